"""Fetch a published artifact from a store into a local cache, verifying every byte before use.

Cold start on Lambda: resolve the pointer, read the manifest (the caller may refuse the artifact
from it before any other byte moves), then for each file the manifest lists keep a cached copy
whose hash matches or download and check a fresh one. Nothing is parsed until the whole artifact
has been verified. With `graph_in_memory` the graph streams into an anonymous memory file
(`memfd_create`), hashed on the way, and the session opens it there: a checkpoint's FP32 graph
(626 MiB for ModernBERT-base) is larger than Lambda's 512 MB `/tmp`, which SnapStart caps whatever
the function configures. Bytes in Python would cost a second copy while onnxruntime parses them
(peak 1.9 GB against 0.8 GB from a file, measured on the ModernBERT-base shape).
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import observe
from ..errors import ArtifactError
from .layout import GRAPH_FILE, MANIFEST_FILE
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


class MemoryFile:
    """An anonymous in-memory file (Linux `memfd_create`), opened by path like any file until `close`."""

    def __init__(self, name: str) -> None:
        self._fd: int | None = os.memfd_create(name, os.MFD_CLOEXEC)

    @property
    def path(self) -> Path:
        if self._fd is None:
            raise ArtifactError("the in-memory file was closed")
        return Path("/proc/self/fd/%d" % self._fd)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


@dataclass(frozen=True)
class Fetched:
    """A verified artifact: its local directory (every listed file, but a graph kept in memory) and that graph."""

    artifact_id: str
    directory: Path
    manifest: Manifest
    graph_in_memory: MemoryFile | None = None

    @property
    def graph(self) -> Path:
        return self.graph_in_memory.path if self.graph_in_memory else self.directory / GRAPH_FILE

    def release(self) -> None:
        """Free the in-memory graph (once a session has read it)."""
        if self.graph_in_memory:
            self.graph_in_memory.close()


def read_manifest(store: ObjectStore, artifact_id: str) -> tuple[bytes, Manifest]:
    """The manifest of artifact `artifact_id`, checked against its id (the sha256 of its bytes)."""
    found = store.read(artifact_key(artifact_id, MANIFEST_FILE))
    if found is None:
        raise ArtifactError("artifact %s has no %s in %s" % (artifact_id, MANIFEST_FILE, store.uri))
    if sha256_bytes(found[0]) != artifact_id:
        raise ArtifactError("%s of artifact %s does not hash to its id: it was edited or swapped"
                            % (MANIFEST_FILE, artifact_id))
    return found[0], Manifest.parse(found[0], "%s of artifact %s" % (MANIFEST_FILE, artifact_id))


def fetch_artifact(store: ObjectStore, artifact_id: str, cache_dir: Path = DEFAULT_CACHE_DIR) -> tuple[Path, Manifest]:
    """Download (or reuse) artifact `artifact_id` under `cache_dir` and verify all of it."""
    fetched = fetch_verified(store, artifact_id, read_manifest(store, artifact_id), cache_dir)
    return fetched.directory, fetched.manifest


def fetch_verified(store: ObjectStore, artifact_id: str, manifest: tuple[bytes, Manifest],
                   cache_dir: Path = DEFAULT_CACHE_DIR, graph_in_memory: bool = False) -> Fetched:
    """Every file `manifest` (as `read_manifest` returned it) lists, verified: under `cache_dir`, or, for the
    graph with `graph_in_memory`, in memory."""
    raw, parsed = manifest
    destination = Path(cache_dir) / artifact_id
    destination.mkdir(parents=True, exist_ok=True)
    graph = None
    for name, expected in parsed.files.items():
        if graph_in_memory and name == GRAPH_FILE:
            graph = _memory_verified(store, artifact_id, name, expected)
        else:
            _cache_verified(store, artifact_id, name, expected, destination / name)
    (destination / MANIFEST_FILE).write_bytes(raw)
    return Fetched(artifact_id, destination, parsed, graph)


def _memory_verified(store: ObjectStore, artifact_id: str, name: str, expected: dict[str, Any]) -> MemoryFile:
    memory = MemoryFile(name)
    try:
        with observe.span(observe.FETCH):
            digest = store.download(artifact_key(artifact_id, name), memory.path)
        with observe.span(observe.VERIFY):
            verify_file(memory.path, name, expected, sha256=digest)
    except BaseException:
        memory.close()
        raise
    return memory


def _cache_verified(store: ObjectStore, artifact_id: str, name: str, expected: dict[str, Any], local: Path) -> None:
    """Keep a cached copy whose hash matches, or download and check a fresh one (written only once checked)."""
    if local.is_file():
        try:
            with observe.span(observe.VERIFY):
                verify_file(local, name, expected)
            return
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


def fetch_published(store: ObjectStore, checkpoint: str, target: str,
                    cache_dir: Path = DEFAULT_CACHE_DIR) -> tuple[str, Path, Manifest]:
    """(artifact id, verified local directory, manifest) of what (checkpoint, target) points at."""
    artifact_id = published_id(store, checkpoint, target)
    path, manifest = fetch_artifact(store, artifact_id, cache_dir)
    return artifact_id, path, manifest
