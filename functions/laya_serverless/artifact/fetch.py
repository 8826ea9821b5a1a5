"""Fetch a published artifact from a store into a local cache, verifying every byte before use.

Cold start on Lambda: resolve the pointer, read the manifest (the caller may refuse the artifact
from it before any other byte moves), then for each file the manifest lists keep a cached copy
whose hash matches or download and check a fresh one. Nothing is parsed until the whole artifact
has been verified, and what is parsed is read through the handles that were verified (`cache`); a
file in the cached artifact that its manifest does not list refuses it.
With `graph_in_memory` the graph streams into an anonymous memory file
(`memfd_create`; from S3 in parallel ranged parts, `transfer`), hashed on the way, and the session opens it
there: a checkpoint's FP32 graph (626 MiB for the ModernBERT-base shape, 1,607 MiB for the published
ModernBERT-large) is larger than Lambda's 512 MB `/tmp`, which SnapStart caps whatever the function configures.
Bytes in Python would cost a second copy while onnxruntime parses them (peak 1.9 GB against 0.8 GB from a file,
measured on the ModernBERT-base shape).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import observe
from ..errors import ArtifactError
from .cache import (
    STAGING_PREFIX,
    default_cache_dir,
    handle_path,
    open_verified,
    private_cache,
    private_folder,
    staging_file,
    write_atomic,
)
from .layout import GRAPH_FILE, MANIFEST_FILE
from .manifest import Manifest, sha256_bytes, verify_file
from .store import ObjectStore, artifact_key, pointer_key

DEFAULT_CACHE_DIR = default_cache_dir()  # per user, 0700 (`cache.private_cache`)
_ARTIFACT_ID = re.compile(r"^[0-9a-f]{64}$")


def missing_folder(store: ObjectStore) -> str | None:
    """Why a local store cannot hold anything: its folder does not exist (a typo), said as such."""
    root = getattr(store, "root", None)
    return "the store folder %s does not exist" % root if isinstance(root, Path) and not root.is_dir() else None


def published_id(store: ObjectStore, checkpoint: str, target: str) -> str:
    """The artifact id the pointer for (checkpoint, target) names."""
    found = store.read(pointer_key(checkpoint, target))
    if found is None and missing_folder(store):
        raise ArtifactError(missing_folder(store))
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
    """A verified artifact: its local directory (every listed file, but a graph kept in memory), the open handles
    its files were verified through, and that graph."""

    artifact_id: str
    directory: Path
    manifest: Manifest
    graph_in_memory: MemoryFile | None = None
    handles: dict[str, int] = field(default_factory=dict)

    def path_of(self, name: str) -> Path:
        """Where to read file `name` so that the bytes read are the verified ones."""
        if name == GRAPH_FILE and self.graph_in_memory:
            return self.graph_in_memory.path
        fd = self.handles.get(name)
        return self.directory / name if fd is None else handle_path(fd, self.directory / name)

    @property
    def graph(self) -> Path:
        return self.path_of(GRAPH_FILE)

    @property
    def files(self) -> dict[str, Path]:
        return {name: self.path_of(name) for name in self.manifest.files}

    def release(self) -> None:
        """Free the in-memory graph and close the verified handles (once the session and tokenizer have read them)."""
        if self.graph_in_memory:
            self.graph_in_memory.close()
        for fd in self.handles.values():
            os.close(fd)
        self.handles.clear()


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
    """Download (or reuse) artifact `artifact_id` under `cache_dir` and verify all of it (for the tools, which read
    it by path afterwards; serving reads the verified handles of `fetch_verified`)."""
    fetched = fetch_verified(store, artifact_id, read_manifest(store, artifact_id), cache_dir)
    fetched.release()
    return fetched.directory, fetched.manifest


def fetch_verified(store: ObjectStore, artifact_id: str, manifest: tuple[bytes, Manifest],
                   cache_dir: Path = DEFAULT_CACHE_DIR, graph_in_memory: bool = False) -> Fetched:
    """Every file `manifest` (as `read_manifest` returned it) lists, verified and held open: under `cache_dir`, or,
    for the graph with `graph_in_memory`, in memory. The caller reads them by `Fetched.path_of`, then releases."""
    raw, parsed = manifest
    destination = private_cache(Path(cache_dir)) / artifact_id
    private_folder(destination)
    graph, handles = None, {}
    try:
        for name, expected in parsed.files.items():
            if graph_in_memory and name == GRAPH_FILE:
                graph = _memory_verified(store, artifact_id, name, expected)
            else:
                handles[name] = _cache_verified(store, artifact_id, name, expected, destination / name)
        write_atomic(destination / MANIFEST_FILE, raw)
        _refuse_unlisted(destination, parsed)
    except BaseException:
        Fetched(artifact_id, destination, parsed, graph, handles).release()
        raise
    return Fetched(artifact_id, destination, parsed, graph, handles)


def _refuse_unlisted(destination: Path, manifest: Manifest) -> None:
    """Nothing unproven may sit next to a proven graph: a cached file the manifest does not list refuses the artifact
    (a download in progress, `.download-*`, is not one)."""
    present = {p.relative_to(destination).as_posix() for p in destination.rglob("*")
               if not p.name.startswith(STAGING_PREFIX) and (p.is_file() or p.is_symlink())}
    unlisted = sorted(present - set(manifest.files) - {MANIFEST_FILE})
    if unlisted:
        raise ArtifactError("the cached artifact %s holds files its manifest does not list: %s; remove them"
                            % (destination, ", ".join(unlisted)))


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


def _cache_verified(store: ObjectStore, artifact_id: str, name: str, expected: dict[str, Any], local: Path) -> int:
    """A handle on a cached copy whose hash matches, or on a fresh one downloaded and checked (put in place only
    once checked)."""
    if os.path.lexists(local):
        try:
            with observe.span(observe.VERIFY):
                return open_verified(local, name, expected)
        except ArtifactError:
            pass
    local.parent.mkdir(parents=True, exist_ok=True)
    lock, staging = staging_file(local.parent)
    try:
        with observe.span(observe.FETCH):
            digest = store.download(artifact_key(artifact_id, name), staging)
        with observe.span(observe.VERIFY):
            handle = open_verified(staging, name, expected, sha256=digest)
        os.replace(staging, local)
        return handle
    finally:
        os.close(lock)
        staging.unlink(missing_ok=True)


def fetch_published(store: ObjectStore, checkpoint: str, target: str,
                    cache_dir: Path = DEFAULT_CACHE_DIR) -> tuple[str, Path, Manifest]:
    """(artifact id, verified local directory, manifest) of what (checkpoint, target) points at."""
    artifact_id = published_id(store, checkpoint, target)
    path, manifest = fetch_artifact(store, artifact_id, cache_dir)
    return artifact_id, path, manifest
