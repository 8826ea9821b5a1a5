"""The serving cache's folder: this user's own, written atomically without following links, its files
loaded through the very handles that were verified.

The default is a per-user folder in the system temp folder (`/tmp/laya-artifacts-<uid>`: on Lambda the
only writable place), created 0700. Any cache folder, default or configured, is used only when it is a
real folder owned by this user that no other user can write: a folder someone else made (or a link they
planted) could swap the files between their check and their load. A verified file stays open, and the
session, tokenizer and decode config read it through `/proc/self/fd/N`: renaming another file onto the
path afterwards changes nothing that is loaded.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

from ..errors import ArtifactError, StorageUnavailable

STAGING_PREFIX = ".download-"  # a download in progress, renamed into place once verified
_CHUNK = 1 << 20
_PROC_FD = Path("/proc/self/fd")


def default_cache_dir() -> Path:
    return Path(tempfile.gettempdir()) / ("laya-artifacts-%d" % os.getuid())


def private_cache(cache_dir: Path) -> Path:
    """`cache_dir`, created 0700 if absent; refused unless it is a real folder of this user nobody else can write.
    Staging files that a crashed fill left behind are removed (those of a live download are locked, and kept)."""
    path = Path(cache_dir)
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = os.lstat(path)
    except OSError as exc:
        raise StorageUnavailable("the cache folder %s cannot be created or read: %s" % (path, exc.strerror)) from exc
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise StorageUnavailable("the cache folder %s is a link or not a folder; remove it, or set LAYA_CACHE_DIR "
                                 "to a folder of your own" % path)
    if info.st_uid != os.getuid():
        raise StorageUnavailable("the cache folder %s belongs to uid %d, not to this user (uid %d): its owner could "
                                 "swap what is served; remove it, or set LAYA_CACHE_DIR to a folder of your own"
                                 % (path, info.st_uid, os.getuid()))
    if info.st_mode & 0o022:
        raise StorageUnavailable("the cache folder %s is writable by other users (mode %03o); chmod 700 it, or set "
                                 "LAYA_CACHE_DIR to a folder of your own" % (path, stat.S_IMODE(info.st_mode)))
    sweep_staging(path)
    return path


def sweep_staging(cache_dir: Path) -> list[Path]:
    """Remove the staging files of fills that died (kill -9, a crash): each live download holds a lock on its own."""
    swept = []
    for staging in Path(cache_dir).glob("*/%s*" % STAGING_PREFIX):
        try:
            fd = os.open(staging, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            continue   # a download in progress
        else:
            staging.unlink(missing_ok=True)
            swept.append(staging)
        finally:
            os.close(fd)
    return swept


def private_folder(path: Path) -> None:
    """A folder inside the private cache (an artifact's), created 0700; a link in its place is refused."""
    try:
        path.mkdir(mode=0o700, exist_ok=True)
        info = os.lstat(path)
    except OSError as exc:
        raise StorageUnavailable("the cache folder %s cannot be created or read: %s" % (path, exc.strerror)) from exc
    if not stat.S_ISDIR(info.st_mode):
        raise StorageUnavailable("%s in the cache is a link or not a folder" % path)


def staging_file(folder: Path) -> tuple[int, Path]:
    """A new, locked staging file in `folder` (create-only: never an existing file or a link)."""
    fd, name = tempfile.mkstemp(dir=folder, prefix=STAGING_PREFIX)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd, Path(name)


def write_atomic(path: Path, data: bytes) -> None:
    """Write `path` through a new staging file and a rename: a link planted at `path` is replaced, never followed."""
    fd, staging = staging_file(path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(staging, path)
    finally:
        staging.unlink(missing_ok=True)


def open_verified(path: Path, name: str, expected: dict[str, Any], sha256: str | None = None) -> int:
    """An open handle on `path` (never through a link) whose bytes have the size and sha256 the manifest lists.
    `sha256`, when the caller hashed these bytes as it wrote them through this same inode, saves a second read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError as exc:
        raise ArtifactError("artifact file %r is missing" % name) from exc
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ArtifactError("artifact file %r in the cache is a link" % name) from exc
        raise StorageUnavailable("artifact file %r cannot be read from the cache: %s" % (name, exc.strerror)) from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ArtifactError("artifact file %r in the cache is not a file" % name)
        if info.st_size != expected["bytes"]:
            raise ArtifactError("artifact file %r has %d bytes, the manifest says %d"
                                % (name, info.st_size, expected["bytes"]))
        actual = sha256 or _sha256_of(fd)
        if actual != expected["sha256"]:
            raise ArtifactError("artifact file %r has sha256 %s, the manifest says %s"
                                % (name, actual, expected["sha256"]))
    except BaseException:
        os.close(fd)
        raise
    return fd


def _sha256_of(fd: int) -> str:
    digest, offset = hashlib.sha256(), 0
    while block := os.pread(fd, _CHUNK, offset):
        digest.update(block)
        offset += len(block)
    return digest.hexdigest()


def handle_path(fd: int, fallback: Path) -> Path:
    """A path that opens this very handle's file (Linux `/proc/self/fd/N`); elsewhere the file's own path."""
    return _PROC_FD / str(fd) if _PROC_FD.is_dir() else fallback
