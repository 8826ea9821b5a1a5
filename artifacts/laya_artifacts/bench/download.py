"""One S3 stream against parallel ranged parts, from a local moto server into a memory file (as on Lambda).

    laya-artifacts bench download [--mib 512] [--part-mb 16] [--concurrency 10] [--stream-mbps 75] [--rounds 3]

Each round fetches the same object with `S3Store.download` twice, alternating: as one stream (one GET, what the
store did before parts) and in ranged parts, both hashed as the store hashes them. `--stream-mbps` caps each
GET's body at that rate, as S3 caps one stream inside Lambda (60-90 MB/s); 0 leaves it uncapped, which measures
only this machine's overhead. Prints each way's median seconds and the ratio: a local server says nothing of
S3's own throughput, so read the ratio, not the seconds.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import os
import socket
import statistics
import time
from typing import Any

from laya_serverless.artifact.fetch import MemoryFile
from laya_serverless.artifact.store import S3Store
from laya_serverless.artifact.transfer import DownloadParts

BUCKET, KEY = "laya-bench", "artifacts/bench/model.onnx"
ONE_STREAM = DownloadParts(part_mb=1024, concurrency=1)   # above any object here: one plain GET


class _Capped:
    """A response body read at most `rate` bytes a second (one stream's cap)."""

    def __init__(self, body: Any, rate: float) -> None:
        self._body, self._rate, self._start, self._read = body, rate, time.perf_counter(), 0

    def read(self, amt: int | None = None) -> bytes:
        data = self._body.read(amt)
        self._read += len(data)
        ahead = self._read / self._rate - (time.perf_counter() - self._start)
        if ahead > 0:
            time.sleep(ahead)
        return data

    def __getattr__(self, name: str) -> Any:
        return getattr(self._body, name)


def _serve_ranges_from_memory() -> None:
    """moto reads a whole object back, under a lock, for every ranged GET (S3 does not): keep each object's bytes
    once, so that a part costs the server its own bytes and the comparison measures the client."""
    from moto.s3.models import FakeKey

    original: Any = vars(FakeKey)["value"]   # the property, not its value
    read = original.fget
    kept: dict[int, bytes] = {}

    def value(key: Any) -> bytes:
        if id(key) not in kept:
            kept[id(key)] = read(key)
        return kept[id(key)]

    setattr(FakeKey, "value", property(value, original.fset))  # noqa: B010  (mypy: a property assigned)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _client(endpoint: str, stream_mbps: float) -> Any:
    import boto3
    from botocore.config import Config

    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="bench",
                          aws_secret_access_key="bench", config=Config(max_pool_connections=64))
    if stream_mbps > 0:
        def cap(parsed: dict[str, Any], **_: Any) -> None:
            parsed["Body"] = _Capped(parsed["Body"], stream_mbps * 1e6)
        client.meta.events.register("after-call.s3.GetObject", cap)
    return client


def _timed(store: S3Store, expected: str) -> float:
    memory = MemoryFile("model.onnx")
    try:
        start = time.perf_counter()
        digest = store.download(KEY, memory.path)
        seconds = time.perf_counter() - start
    finally:
        memory.close()
    if digest != expected:
        raise SystemExit("the download's sha256 %s is not the object's %s" % (digest, expected))
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mib", type=int, default=512, help="object size (MiB)")
    parser.add_argument("--part-mb", type=int, default=DownloadParts().part_mb)
    parser.add_argument("--concurrency", type=int, default=DownloadParts().concurrency)
    parser.add_argument("--stream-mbps", type=float, default=75.0, help="cap per GET (MB/s; 0: none)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)   # one line per ranged GET otherwise
    _serve_ranges_from_memory()
    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        client = _client("http://127.0.0.1:%d" % port, args.stream_mbps)
        client.create_bucket(Bucket=BUCKET)
        data = os.urandom(args.mib << 20)
        client.put_object(Bucket=BUCKET, Key=KEY, Body=data)
        expected = hashlib.sha256(data).hexdigest()
        del data
        ways = {"one stream": ONE_STREAM, "parts": DownloadParts(args.part_mb, args.concurrency)}
        times: dict[str, list[float]] = {name: [] for name in ways}
        for _ in range(args.rounds):
            for name, parts in ways.items():
                times[name].append(_timed(S3Store(BUCKET, "", client, parts), expected))
    finally:
        server.stop()
    single, parallel = (statistics.median(times[name]) for name in ways)
    print("%d MiB, cap %s per stream, %d part(s) of %d MiB at once, medians of %d" % (
        args.mib, "%g MB/s" % args.stream_mbps if args.stream_mbps else "none", args.concurrency, args.part_mb,
        args.rounds))
    for name in ways:
        print("  %-10s %.2f s  (%s)" % (name, statistics.median(times[name]),
                                        ", ".join("%.2f" % t for t in times[name])))
    print("  parts are x%.2f one stream" % (single / parallel))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
