"""Publishing and verified loading on both store backends (a local folder, and S3 through moto).

The runtime serves only what it verified: a missing, truncated, altered or swapped file, or an
edited manifest, is refused with an ArtifactError naming it.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from laya_artifacts.deploy.publish import publish
from laya_serverless import ArtifactError, Decider
from laya_serverless.artifact.layout import MANIFEST_FILE
from laya_serverless.artifact.manifest import sha256_file
from laya_serverless.artifact.store import LocalStore, ObjectStore, S3Store, artifact_key, open_store, pointer_key

pytestmark = pytest.mark.slow

QUESTIONS = {"team": {"type": "choice", "instructions": "Which team?", "criteria": ["billing", "tech", "other"]},
             "churn": {"type": "noul", "instructions": "Will they leave?"}}


@pytest.fixture
def s3_client(moto_aws: Any) -> Iterator[Any]:
    client = moto_aws("s3")
    client.create_bucket(Bucket="laya-artifacts")
    yield client


@pytest.fixture(params=["local", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ObjectStore:
    if request.param == "local":
        return LocalStore(tmp_path / "store")
    return S3Store("laya-artifacts", "prod/laya", request.getfixturevalue("s3_client"))


def _overwrite(store: ObjectStore, key: str, data: bytes | None) -> None:
    """Tamper with an object behind the store's back (as a broken upload or an attacker would)."""
    if isinstance(store, LocalStore):
        path = store.root / key
        if data is None:
            path.unlink()
        else:
            path.write_bytes(data)
    else:
        assert isinstance(store, S3Store)
        full = "%s/%s" % (store.prefix, key)
        if data is None:
            store.client.delete_object(Bucket=store.bucket, Key=full)
        else:
            store.client.put_object(Bucket=store.bucket, Key=full, Body=data)


def _from_store(store: ObjectStore, cache: Path) -> Decider:
    s3 = store.client if isinstance(store, S3Store) else None
    return Decider.from_store(store.uri, "tiny-modernbert", "cpu-fp32", cache_dir=cache, s3_client=s3)


def test_published_artifact_serves_the_same_answers(tiny_fp32: Path, store: ObjectStore, tmp_path: Path) -> None:
    artifact_id = publish(tiny_fp32, store)
    assert artifact_id == sha256_file(tiny_fp32 / MANIFEST_FILE)
    pointer = json.loads(store.read(pointer_key("tiny-modernbert", "cpu-fp32"))[0])  # type: ignore[index]
    assert pointer["artifact"] == artifact_id and pointer["target"] == "cpu-fp32"
    served = _from_store(store, tmp_path / "cache").predict("I was charged twice", QUESTIONS)
    direct = Decider.from_artifact(tiny_fp32).predict("I was charged twice", QUESTIONS)
    assert served == direct


def test_publishing_again_is_idempotent(tiny_fp32: Path, store: ObjectStore) -> None:
    first = publish(tiny_fp32, store)
    objects = store.list("artifacts/")
    assert publish(tiny_fp32, store) == first
    assert store.list("artifacts/") == objects


class CountingStore:
    """Wraps a store and counts downloads, to see what the cache saves."""

    def __init__(self, inner: ObjectStore) -> None:
        self.inner, self.downloads = inner, []
        self.uri = inner.uri

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def download(self, key: str, destination: Path) -> str:
        self.downloads.append(key)
        return str(self.inner.download(key, destination))


def test_cached_files_are_reused_and_a_corrupted_cache_is_repaired(tiny_fp32: Path, tmp_path: Path) -> None:
    from laya_serverless.artifact.fetch import fetch_artifact

    store = LocalStore(tmp_path / "store")
    artifact_id = publish(tiny_fp32, store)
    counting = CountingStore(store)
    cache = tmp_path / "cache"
    path, manifest = fetch_artifact(counting, artifact_id, cache)  # type: ignore[arg-type]
    assert len(counting.downloads) == len(manifest.files)
    counting.downloads.clear()
    fetch_artifact(counting, artifact_id, cache)  # type: ignore[arg-type]
    assert counting.downloads == []
    graph = path / "model.onnx"
    data = bytearray(graph.read_bytes())
    data[len(data) // 2] ^= 0xFF
    graph.write_bytes(bytes(data))
    with pytest.raises(ArtifactError, match="'model.onnx' has sha256"):
        Decider.from_artifact(path)  # a direct load verifies too
    fetch_artifact(counting, artifact_id, cache)  # type: ignore[arg-type]
    assert counting.downloads == [artifact_key(artifact_id, "model.onnx")]
    Decider.from_artifact(path)


def _flip_byte(data: bytes) -> bytes:
    changed = bytearray(data)
    changed[len(changed) // 3] ^= 0x01
    return bytes(changed)


@pytest.mark.parametrize(("variant", "message"), [
    ("flip a byte of the graph", "artifact file 'model.onnx' has sha256"),
    ("truncate the tokenizer", "artifact file 'tokenizer.json' has \\d+ bytes, the manifest says"),
    ("delete the decode config", "decode_config.json"),
    ("swap in another artifact's tokenizer", "artifact file 'tokenizer.json'"),
    ("edit the manifest", "manifest.json of artifact [0-9a-f]{64} does not hash to its id"),
    ("drop the pointer", "no artifact is published for checkpoint 'tiny-modernbert'"),
])
def test_every_corruption_in_the_store_is_refused(tiny_fp32: Path, minilm: tuple[Path, Path], store: ObjectStore,
                                                  tmp_path: Path, variant: str, message: str) -> None:
    artifact_id = publish(tiny_fp32, store)
    if variant.startswith("flip"):
        _overwrite(store, artifact_key(artifact_id, "model.onnx"), _flip_byte((tiny_fp32 / "model.onnx").read_bytes()))
    elif variant.startswith("truncate"):
        tokenizer = (tiny_fp32 / "tokenizer.json").read_bytes()
        _overwrite(store, artifact_key(artifact_id, "tokenizer.json"), tokenizer[:100])
    elif variant.startswith("delete"):
        _overwrite(store, artifact_key(artifact_id, "decode_config.json"), None)
    elif variant.startswith("swap"):
        _overwrite(store, artifact_key(artifact_id, "tokenizer.json"), (minilm[1] / "tokenizer.json").read_bytes())
    elif variant.startswith("edit"):
        manifest = json.loads((tiny_fp32 / MANIFEST_FILE).read_text())
        manifest["configuration"]["target"] = "cpu-fp32"
        _overwrite(store, artifact_key(artifact_id, MANIFEST_FILE), json.dumps(manifest).encode())
    else:
        _overwrite(store, pointer_key("tiny-modernbert", "cpu-fp32"), None)
    with pytest.raises(ArtifactError, match=message):
        _from_store(store, tmp_path / "cache")
    bad_file = {"flip": "model.onnx", "truncate": "tokenizer.json", "delete": "decode_config.json",
                "swap": "tokenizer.json"}.get(variant.split()[0])
    if bad_file:  # a refused download never lands under the file's real name
        assert not (tmp_path / "cache" / artifact_id / bad_file).exists()


def test_files_next_to_a_verified_artifact_are_refused(tiny_fp32: Path, tmp_path: Path) -> None:
    copy = tmp_path / "artifact"
    shutil.copytree(tiny_fp32, copy)
    (copy / "extra.onnx").write_bytes(b"not proven")
    with pytest.raises(ArtifactError, match="does not list: extra.onnx"):
        Decider.from_artifact(copy)
    os.unlink(copy / "extra.onnx")
    (copy / MANIFEST_FILE).unlink()
    with pytest.raises(ArtifactError, match="manifest.json is missing"):
        Decider.from_artifact(copy)


def test_conditional_writes_never_overwrite(store: ObjectStore) -> None:
    assert store.create("pointers/x/y.json", b"one")
    assert not store.create("pointers/x/y.json", b"two")
    data, version = store.read("pointers/x/y.json")  # type: ignore[misc]
    assert data == b"one"
    assert store.swap("pointers/x/y.json", b"three", version)
    assert not store.swap("pointers/x/y.json", b"four", version)  # stale version: someone moved it
    assert store.read("pointers/x/y.json")[0] == b"three"  # type: ignore[index]
    assert not store.swap("pointers/x/new.json", b"five", "some-version")


class RacingStore(CountingStore):
    """A second publisher moves the pointer between this publisher's read and its swap."""

    def swap(self, key: str, data: bytes, expected_version: str | None) -> bool:
        current = self.inner.read(key)
        assert self.inner.swap(key, b'{"artifact": "' + b"0" * 64 + b'"}', current[1] if current else None)
        return self.inner.swap(key, data, expected_version)


def test_a_concurrent_publish_makes_this_one_fail_loudly(tiny_fp32: Path, store: ObjectStore) -> None:
    with pytest.raises(ArtifactError, match="moved while publishing"):
        publish(tiny_fp32, RacingStore(store))  # type: ignore[arg-type]
    pointer = json.loads(store.read(pointer_key("tiny-modernbert", "cpu-fp32"))[0])  # type: ignore[index]
    assert pointer["artifact"] == "0" * 64  # the other publisher's write stands


def test_store_uris_are_checked() -> None:
    with pytest.raises(ArtifactError, match="names no bucket"):
        open_store("s3://")
    with pytest.raises(ArtifactError, match="use s3://bucket/prefix or a local folder"):
        open_store("gs://bucket/x")


def test_a_graph_kept_in_memory_is_verified_served_and_never_written(tiny_fp32: Path, store: ObjectStore,
                                                                     tmp_path: Path) -> None:
    from laya_serverless.artifact.fetch import fetch_verified, read_manifest

    artifact_id = publish(tiny_fp32, store)
    fetched = fetch_verified(store, artifact_id, read_manifest(store, artifact_id), tmp_path / "cache",
                             graph_in_memory=True)
    assert not (fetched.directory / "model.onnx").exists()  # nothing graph-sized in the cache (Lambda's /tmp)
    assert str(fetched.graph).startswith("/proc/self/fd/")
    assert fetched.graph.read_bytes() == (tiny_fp32 / "model.onnx").read_bytes()
    served = Decider.from_artifact(fetched.directory, verify=False, graph=fetched.graph)
    fetched.release()
    with pytest.raises(ArtifactError, match="closed"):
        _ = fetched.graph
    assert served.predict("I was charged twice", QUESTIONS) == Decider.from_artifact(tiny_fp32).predict(
        "I was charged twice", QUESTIONS)
    _overwrite(store, artifact_key(artifact_id, "model.onnx"), _flip_byte((tiny_fp32 / "model.onnx").read_bytes()))
    with pytest.raises(ArtifactError, match="model.onnx.*sha256"):
        fetch_verified(store, artifact_id, read_manifest(store, artifact_id), tmp_path / "other", graph_in_memory=True)
