"""The serving cache is this user's own: created 0700, any other folder refused, written without following links,
its files read through the handles that were verified; crashed fills' staging files are swept; a cached file the
manifest does not list refuses the artifact; an unreadable store or cache is a 503 with a reason, not a crash."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import stat
from pathlib import Path

import pytest

from laya_serverless.artifact.fetch import DEFAULT_CACHE_DIR, fetch_verified, read_manifest
from laya_serverless.artifact.manifest import SCHEMA
from laya_serverless.artifact.store import LocalStore, artifact_key
from laya_serverless.errors import ArtifactError

FILES = {"tokenizer.json": b'{"a tokenizer": 1}', "decode_config.json": b'{"max_len": 64}'}
ROOT = os.getuid() == 0
OTHER_UID = 65534  # nobody


def _published(tmp_path: Path) -> tuple[LocalStore, str]:
    store = LocalStore(tmp_path / "store")
    manifest = json.dumps({"schema": SCHEMA, "parity": {"passed": True},
                           "configuration": {"target": "cpu-fp32", "checkpoint": {"name": "demo"}},
                           "files": {n: {"sha256": hashlib.sha256(d).hexdigest(), "bytes": len(d)}
                                     for n, d in FILES.items()}}).encode()
    artifact_id = hashlib.sha256(manifest).hexdigest()
    store.create(artifact_key(artifact_id, "manifest.json"), manifest)
    for name, data in FILES.items():
        store.create(artifact_key(artifact_id, name), data)
    return store, artifact_id


def _fetch(store: LocalStore, artifact_id: str, cache: Path):  # type: ignore[no-untyped-def]
    return fetch_verified(store, artifact_id, read_manifest(store, artifact_id), cache)


def test_the_default_cache_is_per_user_and_created_private(tmp_path: Path) -> None:
    """It used to be `laya-artifacts` in the shared temp folder, whoever had made it."""
    from laya_serverless.artifact.cache import private_cache

    assert DEFAULT_CACHE_DIR.name == "laya-artifacts-%d" % os.getuid()
    made = private_cache(tmp_path / "a" / "cache")
    assert stat.S_IMODE(made.stat().st_mode) == 0o700


def test_a_cache_folder_of_another_user_a_shared_one_or_a_link_is_refused(tmp_path: Path) -> None:
    from laya_serverless.artifact.cache import private_cache
    from laya_serverless.errors import StorageUnavailable

    store, artifact_id = _published(tmp_path)
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(StorageUnavailable, match=r"writable by other users \(mode 777\); chmod 700 it"):
        _fetch(store, artifact_id, shared)
    (tmp_path / "link").symlink_to(private_cache(tmp_path / "mine"))
    with pytest.raises(StorageUnavailable, match="is a link or not a folder"):
        _fetch(store, artifact_id, tmp_path / "link")
    if ROOT:
        theirs = tmp_path / "theirs"
        theirs.mkdir(mode=0o700)
        os.chown(theirs, OTHER_UID, -1)
        with pytest.raises(StorageUnavailable, match="belongs to uid %d, not to this user" % OTHER_UID):
            _fetch(store, artifact_id, theirs)


def test_a_planted_manifest_link_is_replaced_never_written_through(tmp_path: Path) -> None:
    """A `manifest.json` link in the cached artifact used to be followed: a root `serve` overwrote its target."""
    store, artifact_id = _published(tmp_path)
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    cache = tmp_path / "cache"
    (cache / artifact_id).mkdir(parents=True)
    (cache / artifact_id / "manifest.json").symlink_to(victim)
    fetched = _fetch(store, artifact_id, cache)
    fetched.release()
    assert victim.read_bytes() == b"precious"
    assert not (cache / artifact_id / "manifest.json").is_symlink()
    assert (cache / artifact_id / "manifest.json").read_bytes() == store.read(artifact_key(artifact_id,
                                                                                           "manifest.json"))[0]


def test_what_is_loaded_is_what_was_verified_even_if_the_path_is_swapped(tmp_path: Path) -> None:
    """Files used to be verified, then reopened by path: whoever could write the folder swapped them in between."""
    store, artifact_id = _published(tmp_path)
    cache = tmp_path / "cache"
    fetched = _fetch(store, artifact_id, cache)
    try:
        forged = cache / artifact_id / "forged"
        forged.write_bytes(b'{"forged": true}')
        os.replace(forged, cache / artifact_id / "tokenizer.json")
        assert {n: fetched.path_of(n).read_bytes() for n in FILES} == FILES
    finally:
        fetched.release()
    again = _fetch(store, artifact_id, cache)   # the swapped file fails its hash: a fresh copy replaces it
    again.release()
    assert (cache / artifact_id / "tokenizer.json").read_bytes() == FILES["tokenizer.json"]


def test_staging_files_of_a_crashed_fill_are_swept_and_a_live_one_is_kept(tmp_path: Path) -> None:
    store, artifact_id = _published(tmp_path)
    cache = tmp_path / "cache"
    (cache / artifact_id).mkdir(parents=True)
    stale, live = cache / artifact_id / ".download-dead1", cache / artifact_id / ".download-live1"
    stale.write_bytes(b"half a graph")
    live.write_bytes(b"a graph on its way")
    with open(live, "rb") as downloading:
        fcntl.flock(downloading, fcntl.LOCK_EX)   # as the live fill holds it
        _fetch(store, artifact_id, cache).release()
        assert not stale.exists() and live.exists()
    _fetch(store, artifact_id, cache).release()
    assert not live.exists()


def test_a_cached_file_the_manifest_does_not_list_refuses_the_artifact(tmp_path: Path) -> None:
    """The README says loading refuses unlisted files; the serving path used to ignore them."""
    store, artifact_id = _published(tmp_path)
    cache = tmp_path / "cache"
    _fetch(store, artifact_id, cache).release()
    (cache / artifact_id / "model.onnx.data").write_bytes(b"unproven weights")
    with pytest.raises(ArtifactError, match="holds files its manifest does not list: model.onnx.data; remove them"):
        _fetch(store, artifact_id, cache)


class _Unreadable(LocalStore):
    """A local store whose files this process may not open (as root, permissions do not bind: the refusal the
    kernel gives a non-root server is raised where it would be)."""

    def _inside(self, key: str) -> Path | None:
        raise PermissionError(13, "Permission denied", str(self._path(key)))


@pytest.mark.parametrize("unreadable", ["store", "cache"])
def test_an_unreadable_store_or_cache_folder_is_not_ready_with_a_reason_not_a_crash(tmp_path: Path,
                                                                                   unreadable: str) -> None:
    """A store folder this process cannot read used to crash start-up with a PermissionError traceback; a cache
    folder it cannot use is refused the same way, with the same reason."""
    from laya_serverless.assembly.loader import assemble_deployment
    from laya_serverless.settings import Settings

    store, artifact_id = _published(tmp_path)
    store.create("pointers/demo/cpu-fp32.json", json.dumps({"artifact": artifact_id}).encode())
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    if unreadable == "cache":
        os.chown(cache, OTHER_UID, -1) if ROOT else cache.chmod(0o000)
    settings = Settings.of(store=str(tmp_path / "store"), cache_dir=str(cache), target="cpu-fp32")
    try:
        served = _Unreadable(tmp_path / "store") if unreadable == "store" else store
        assembled = assemble_deployment(settings.deployment, served)
    finally:
        cache.chmod(0o700)
    assert (assembled.deployment, assembled.unavailable) == (None, (
        "the artifact store or the local cache folder cannot be read, or the cache is not this user's own; the server "
        "log names it"))
