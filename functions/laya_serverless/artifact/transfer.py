"""Parallel ranged downloads from S3, hashed in order as the parts land.

One S3 stream reads about 60-90 MB/s inside Lambda, so a 1.6 GB graph takes 18-27 s on one GET. boto3's managed
transfer (s3transfer, `TransferConfig`) fetches an object above one part in ranged GETs on several connections and
writes each piece at its offset. The sink below takes those writes in any order and feeds sha256 each stretch once
everything before it is in place, reading it back from the file (a page-cache or memory-file read, not the network):
the digest covers every byte of the file, in one pass that overlaps the download.
"""

from __future__ import annotations

import hashlib
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["DEFAULT_CONCURRENCY", "DEFAULT_PARTS", "DEFAULT_PART_MB", "DownloadParts", "HashingSink", "download_parts"]

DEFAULT_PART_MB = 16       # a part per GET: large enough that a request's latency is small beside its bytes
DEFAULT_CONCURRENCY = 10   # GETs at once: boto3's own default, and its default connection pool
_READ_BACK = 1 << 20


@dataclass(frozen=True)
class DownloadParts:
    """How an object is fetched: in ranged parts of `part_mb` MiB, `concurrency` at once (1: one stream)."""

    part_mb: int = DEFAULT_PART_MB
    concurrency: int = DEFAULT_CONCURRENCY

    def transfer_config(self) -> Any:
        from boto3.s3.transfer import TransferConfig

        part = self.part_mb << 20
        # "classic": s3transfer in this process, never the CRT client, so that every byte goes through the sink.
        return TransferConfig(multipart_threshold=part, multipart_chunksize=part, max_concurrency=self.concurrency,
                              use_threads=self.concurrency > 1, preferred_transfer_client="classic")


DEFAULT_PARTS = DownloadParts()


class HashingSink:
    """A seekable file for s3transfer's writes, at their offsets, in any order; `hexdigest` is the sha256 of the file.

    A write below the hashed prefix (s3transfer retrying a part from its start) or a hole left at the end makes the
    digest fall back to hashing the whole file: the answer is always the file's own bytes."""

    def __init__(self, path: Path) -> None:
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        self._digest = hashlib.sha256()
        self._position = self._hashed = 0
        self._written: dict[int, int] = {}   # start -> end of each stretch written past the hashed prefix
        self._rehash = False
        self._lock = threading.Lock()

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        if whence != os.SEEK_SET:
            offset += self._position if whence == os.SEEK_CUR else os.fstat(self._fd).st_size
        self._position = offset
        return offset

    def tell(self) -> int:
        return self._position

    def write(self, data: bytes) -> int:
        with self._lock:
            start = self._position
            view = memoryview(data)
            while view:
                done = os.pwrite(self._fd, view, self._position)
                view, self._position = view[done:], self._position + done
            if start < self._hashed:
                self._rehash = True
            else:
                self._written[start] = max(self._position, self._written.get(start, start))
                self._advance()
            return len(data)

    def _advance(self) -> None:
        while self._hashed in self._written:
            end = self._written.pop(self._hashed)
            self._hash_range(self._hashed, end)
            self._hashed = end

    def _hash_range(self, start: int, end: int) -> None:
        while start < end:
            chunk = os.pread(self._fd, min(_READ_BACK, end - start), start)
            if not chunk:
                break
            self._digest.update(chunk)
            start += len(chunk)

    def hexdigest(self) -> str:
        with self._lock:
            if self._rehash or self._written or self._hashed != os.fstat(self._fd).st_size:
                self._digest, self._written = hashlib.sha256(), {}
                self._hash_range(0, os.fstat(self._fd).st_size)
                self._hashed, self._rehash = os.fstat(self._fd).st_size, False
            return self._digest.hexdigest()

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> HashingSink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def download_parts(client: Any, bucket: str, key: str, destination: Path, parts: DownloadParts) -> str:
    """Write `s3://bucket/key` to `destination` in ranged parts (one GET below a part); the sha256 of the file."""
    with HashingSink(destination) as sink:
        client.download_fileobj(bucket, key, sink, Config=parts.transfer_config())
        return sink.hexdigest()
