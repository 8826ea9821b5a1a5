"""Fetch a published artifact from a store into a local cache, verifying every byte before use.

Cold start on Lambda: resolve the pointer, then for each file the manifest lists keep a cached
copy whose hash matches or download and check a fresh one. Nothing is parsed until the whole
artifact has been verified.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path

from .. import observe
from ..errors import ArtifactError
from .layout import MANIFEST_FILE
from .manifest import Manifest, sha256_bytes, verify_file
from .store import ObjectStore, artifact_key, pointer_key

DEFAULT_CACHE_DIR = Path(tempfile.gettempdir()) / "laya-artifacts"
_ARTIFACT_ID = re.compile(r"^[0-9a-f]{64}$")


def published_id(store: ObjectStore, checkpoint: str, target: str) -> str:
    """The artifact id the pointer for (checkpoint, target) names."""
    found = store.read(pointer_key(checkpoint, target))
    if found is None:
        raise ArtifactError("no artifact is published for checkpoint %r, target %r in %s"
                            % (checkpoint, target, store.uri))
    try:
        artifact_id = json.loads(found[0])["artifact"]
    except (ValueError, KeyError, TypeError) as exc:
        raise ArtifactError("the pointer for %r/%r in %s is malformed" % (checkpoint, target, store.uri)) from exc
    if not isinstance(artifact_id, str) or not _ARTIFACT_ID.match(artifact_id):
        raise ArtifactError("the pointer for %r/%r names an invalid artifact id %r" % (checkpoint, target, artifact_id))
    return artifact_id


def fetch_artifact(store: ObjectStore, artifact_id: str, cache_dir: Path = DEFAULT_CACHE_DIR) -> tuple[Path, Manifest]:
    """Download (or reuse) artifact `artifact_id` under `cache_dir` and verify all of it."""
    destination = Path(cache_dir) / artifact_id
    destination.mkdir(parents=True, exist_ok=True)
    found = store.read(artifact_key(artifact_id, MANIFEST_FILE))
    if found is None:
        raise ArtifactError("artifact %s has no %s in %s" % (artifact_id, MANIFEST_FILE, store.uri))
    if sha256_bytes(found[0]) != artifact_id:
        raise ArtifactError("%s of artifact %s does not hash to its id: it was edited or swapped"
                            % (MANIFEST_FILE, artifact_id))
    manifest = Manifest.parse(found[0], "%s of artifact %s" % (MANIFEST_FILE, artifact_id))
    for name, expected in manifest.files.items():
        local = destination / name
        if local.is_file():
            try:
                with observe.span(observe.VERIFY):
                    verify_file(local, name, expected)
                continue  # a cached copy that still matches
            except ArtifactError:
                pass
        local.parent.mkdir(parents=True, exist_ok=True)
        fd, staging = tempfile.mkstemp(dir=local.parent, prefix=".download-")
        os.close(fd)
        try:
            with observe.span(observe.FETCH):
                digest = store.download(artifact_key(artifact_id, name), Path(staging))
            with observe.span(observe.VERIFY):
                verify_file(Path(staging), name, expected, sha256=digest)
            os.replace(staging, local)
        finally:
            if os.path.exists(staging):
                os.unlink(staging)
    (destination / MANIFEST_FILE).write_bytes(found[0])
    return destination, manifest


def fetch_published(store: ObjectStore, checkpoint: str, target: str,
                    cache_dir: Path = DEFAULT_CACHE_DIR) -> tuple[str, Path, Manifest]:
    """(artifact id, verified local directory, manifest) of what (checkpoint, target) points at."""
    artifact_id = published_id(store, checkpoint, target)
    path, manifest = fetch_artifact(store, artifact_id, cache_dir)
    return artifact_id, path, manifest
