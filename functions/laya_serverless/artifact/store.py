"""Object storage for artifacts: a local folder (the embedded default) or `s3://bucket/prefix`.

Layout under the root:

    artifacts/<artifact id>/<file>            immutable; the id is the sha256 of manifest.json
    pointers/<checkpoint>/<target>.json       names the published artifact; moved by compare-and-swap

Writes are create-only or compare-and-swap, so two publishers can never interleave a pointer.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

from ..errors import ArtifactError, StorageUnavailable
from .transfer import DEFAULT_PARTS, DownloadParts, download_parts

DEFAULT_LOCAL_STORE = ".laya-store"
_CHUNK = 1 << 20
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def _copy_hashing(chunks: Iterable[bytes], destination: Path) -> str:
    """Write `chunks` to `destination` and hash them on the way: one pass over the bytes, not two."""
    digest = hashlib.sha256()
    with open(destination, "wb") as out:
        for chunk in chunks:
            digest.update(chunk)
            out.write(chunk)
    return digest.hexdigest()


def artifact_key(artifact_id: str, name: str) -> str:
    return "artifacts/%s/%s" % (artifact_id, name)


def pointer_key(checkpoint: str, target: str) -> str:
    """Checkpoint names may be hub ids (`owner/name`); keys keep them one path segment."""
    return "pointers/%s/%s.json" % (_SAFE.sub("--", checkpoint), _SAFE.sub("--", target))


class ObjectStore(Protocol):
    uri: str

    def read(self, key: str) -> tuple[bytes, str] | None:
        """The object and its version tag, or None when there is none."""

    def size(self, key: str) -> int | None:
        """The object's size in bytes from its metadata (nothing is read), or None when there is none."""

    def download(self, key: str, destination: Path) -> str:
        """Write the object to `destination`; returns the sha256 of the bytes written, hashed as they stream."""

    def create(self, key: str, data: bytes) -> bool:
        """Write only if absent; False when the key already exists."""

    def upload(self, key: str, source: Path) -> None: ...

    def swap(self, key: str, data: bytes, expected_version: str | None) -> bool:
        """Write if the current version is `expected_version` (None: if absent); False otherwise."""

    def list(self, prefix: str) -> list[str]: ...


class LocalStore:
    """A folder. Writes go through a temporary file and a rename; pointer swaps hold a file lock."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).resolve()
        self.uri = str(self.root)

    def _path(self, key: str) -> Path:
        return self.root / key

    @contextmanager
    def _reading(self, key: str) -> Iterator[None]:
        """An unreadable folder or file of the store (permissions, I/O) is the store's refusal, never a crash."""
        try:
            yield
        except OSError as exc:
            raise StorageUnavailable("the local store %s cannot be read at %s: %s"
                                     % (self.uri, key, exc.strerror or exc)) from exc

    def _inside(self, key: str) -> Path | None:
        """The object's file, or None when there is none or a link leads out of the store (a link to a file
        elsewhere is not an object of this store: `jobs/input/` must not read the machine's files)."""
        path = self._path(key)
        if not path.is_file() or not path.resolve().is_relative_to(self.root):
            return None
        return path

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / ".lock", "a+") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _write(self, key: str, data: bytes) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)

    def read(self, key: str) -> tuple[bytes, str] | None:
        with self._reading(key):
            path = self._inside(key)
            if path is None:
                return None
            data = path.read_bytes()
        return data, hashlib.sha256(data).hexdigest()

    def size(self, key: str) -> int | None:
        with self._reading(key):
            path = self._inside(key)
            return None if path is None else path.stat().st_size

    def download(self, key: str, destination: Path) -> str:
        path = self._path(key)
        with self._reading(key):
            if not path.is_file():
                raise ArtifactError("%s has no object %s" % (self.uri, key))
            source = open(path, "rb")
        with source:  # streams: graphs can be hundreds of MB
            return _copy_hashing(iter(lambda: source.read(_CHUNK), b""), destination)

    def create(self, key: str, data: bytes) -> bool:
        with self._locked():
            if self._path(key).exists():
                return False
            self._write(key, data)
            return True

    def upload(self, key: str, source: Path) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        os.close(fd)
        shutil.copyfile(source, tmp)
        os.replace(tmp, path)

    def swap(self, key: str, data: bytes, expected_version: str | None) -> bool:
        with self._locked():
            current = self.read(key)
            if (current[1] if current else None) != expected_version:
                return False
            self._write(key, data)
            return True

    def list(self, prefix: str) -> list[str]:
        base = self._path(prefix)
        with self._reading(prefix):
            if not base.exists():
                return []
            return sorted(p.relative_to(self.root).as_posix() for p in base.rglob("*")
                          if p.is_file() and not p.name.startswith(".tmp-"))


class S3Store:
    """`s3://bucket/prefix` through an injected boto3 S3 client; S3 conditional writes do the locking. Downloads go
    in ranged parts, several at once (`parts`; `transfer`)."""

    def __init__(self, bucket: str, prefix: str, client: Any, parts: DownloadParts = DEFAULT_PARTS) -> None:
        self.bucket, self.prefix, self.client, self.parts = bucket, prefix.strip("/"), client, parts
        self.uri = "s3://%s/%s" % (bucket, self.prefix)

    def _key(self, key: str) -> str:
        return "%s/%s" % (self.prefix, key) if self.prefix else key

    @staticmethod
    def _code(error: Exception) -> str:
        return str(getattr(error, "response", {}).get("Error", {}).get("Code", ""))

    def read(self, key: str) -> tuple[bytes, str] | None:
        try:
            response = self.client.get_object(Bucket=self.bucket, Key=self._key(key))
        except Exception as exc:
            if self._code(exc) in ("NoSuchKey", "404"):
                return None
            raise ArtifactError("cannot read %s/%s: %s" % (self.uri, key, exc)) from exc
        return response["Body"].read(), response["ETag"]

    def size(self, key: str) -> int | None:
        try:
            response = self.client.head_object(Bucket=self.bucket, Key=self._key(key))
        except Exception as exc:
            if self._code(exc) in ("NoSuchKey", "404", "NotFound"):
                return None
            raise ArtifactError("cannot read the size of %s/%s: %s" % (self.uri, key, exc)) from exc
        return int(response["ContentLength"])

    def download(self, key: str, destination: Path) -> str:
        try:
            return download_parts(self.client, self.bucket, self._key(key), destination, self.parts)
        except Exception as exc:
            raise ArtifactError("cannot download %s/%s: %s" % (self.uri, key, exc)) from exc

    def create(self, key: str, data: bytes) -> bool:
        try:
            self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data, IfNoneMatch="*")
        except Exception as exc:
            if self._code(exc) in ("PreconditionFailed", "ConditionalRequestConflict", "412", "409"):
                return False
            raise ArtifactError("cannot write %s/%s: %s" % (self.uri, key, exc)) from exc
        return True

    def upload(self, key: str, source: Path) -> None:
        try:
            self.client.upload_file(str(source), self.bucket, self._key(key))
        except Exception as exc:
            raise ArtifactError("cannot upload %s to %s/%s: %s" % (source, self.uri, key, exc)) from exc

    def swap(self, key: str, data: bytes, expected_version: str | None) -> bool:
        if expected_version is None:
            return self.create(key, data)
        try:
            self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data, IfMatch=expected_version)
        except Exception as exc:
            # If-Match on a key that does not exist answers NoSuchKey: the precondition failed too.
            if self._code(exc) in ("PreconditionFailed", "ConditionalRequestConflict", "412", "409", "NoSuchKey"):
                return False
            raise ArtifactError("cannot write %s/%s: %s" % (self.uri, key, exc)) from exc
        return True

    def list(self, prefix: str) -> list[str]:
        keys: list[str] = []
        paginator = self.client.get_paginator("list_objects_v2")
        strip = len(self.prefix) + 1 if self.prefix else 0
        for page in paginator.paginate(Bucket=self.bucket, Prefix=self._key(prefix)):
            keys.extend(item["Key"][strip:] for item in page.get("Contents", []))
        return sorted(keys)


def open_store(uri: str | Path, s3_client: Any = None, parts: DownloadParts = DEFAULT_PARTS) -> ObjectStore:
    """`s3://bucket/prefix` (boto3's client unless one is given, with a connection per concurrent part) or a local
    folder path."""
    text = str(uri)
    if text.startswith("s3://"):
        bucket, _, prefix = text[len("s3://"):].partition("/")
        if not bucket:
            raise ArtifactError("store URI %r names no bucket" % text)
        if s3_client is None:
            import boto3
            from botocore.config import Config

            s3_client = boto3.client("s3", config=Config(max_pool_connections=max(10, parts.concurrency)))
        return S3Store(bucket, prefix, s3_client, parts)
    if "://" in text:
        raise ArtifactError("store URI %r: use s3://bucket/prefix or a local folder" % text)
    return LocalStore(text)
