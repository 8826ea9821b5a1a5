"""Large objects come from S3 in parallel ranged parts, and the sha256 still covers every byte of the file."""

from __future__ import annotations

import hashlib
import io
from pathlib import Path
from typing import Any

import pytest
from botocore.response import StreamingBody

from laya_serverless.artifact import transfer
from laya_serverless.artifact.fetch import MemoryFile
from laya_serverless.artifact.manifest import verify_file
from laya_serverless.artifact.store import S3Store, open_store
from laya_serverless.artifact.transfer import DownloadParts, HashingSink
from laya_serverless.errors import ArtifactError, SettingsError
from laya_serverless.settings import Settings

MIB = 1 << 20
DATA = hashlib.sha256(b"seed").digest() * (5 * MIB // 32) + b"tail" * 31   # 5 MiB and a short last part
KEY = "artifacts/x/model.onnx"


def _ranges(client: Any) -> list[str | None]:
    """The Range of every GetObject the client sends, in the order sent."""
    seen: list[str | None] = []
    client.meta.events.register("provide-client-params.s3.GetObject",
                                lambda params, **_: seen.append(params.get("Range")))
    return seen


@pytest.fixture
def s3(moto_aws: Any) -> Any:
    client = moto_aws("s3")
    client.create_bucket(Bucket="artifacts-bucket")
    client.put_object(Bucket="artifacts-bucket", Key="prefix/" + KEY, Body=DATA)
    return client


def test_a_large_object_is_fetched_in_ranged_parts_and_hashed_whole(s3: Any, tmp_path: Path) -> None:
    ranges = _ranges(s3)
    store = S3Store("artifacts-bucket", "prefix", s3, DownloadParts(part_mb=1, concurrency=4))
    digest = store.download(KEY, tmp_path / "copy")
    assert (tmp_path / "copy").read_bytes() == DATA and digest == hashlib.sha256(DATA).hexdigest()
    starts = sorted(int(str(r).removeprefix("bytes=").partition("-")[0]) for r in ranges)
    assert starts == [part * MIB for part in range(6)]   # six parts of 1 MiB, the last one short, all ranged
    assert all(str(r).startswith("bytes=") for r in ranges)


def test_an_object_within_one_part_is_one_plain_get(s3: Any, tmp_path: Path) -> None:
    ranges = _ranges(s3)
    digest = S3Store("artifacts-bucket", "prefix", s3, DownloadParts(part_mb=8)).download(KEY, tmp_path / "copy")
    assert ranges == [None] and digest == hashlib.sha256(DATA).hexdigest()


def test_a_graph_streams_into_a_memory_file_in_parts(s3: Any) -> None:
    memory = MemoryFile("model.onnx")
    try:
        digest = S3Store("artifacts-bucket", "prefix", s3, DownloadParts(1, 3)).download(KEY, memory.path)
        verify_file(memory.path, "model.onnx", {"bytes": len(DATA), "sha256": hashlib.sha256(DATA).hexdigest()},
                    sha256=digest)
        assert memory.path.read_bytes() == DATA
    finally:
        memory.close()


def test_a_corrupted_part_is_refused(s3: Any, tmp_path: Path) -> None:
    def corrupt(parsed: dict[str, Any], **_: Any) -> None:
        if str(parsed.get("ContentRange", "")).startswith("bytes %d-" % (2 * MIB)):
            body = bytearray(parsed["Body"].read())
            body[1000] ^= 0xFF
            parsed["Body"] = StreamingBody(io.BytesIO(bytes(body)), len(body))

    s3.meta.events.register("after-call.s3.GetObject", corrupt)
    store = S3Store("artifacts-bucket", "prefix", s3, DownloadParts(part_mb=1, concurrency=4))
    digest = store.download(KEY, tmp_path / "copy")
    expected = {"bytes": len(DATA), "sha256": hashlib.sha256(DATA).hexdigest()}
    with pytest.raises(ArtifactError, match="'model.onnx' has sha256 .*, the manifest says"):
        verify_file(tmp_path / "copy", "model.onnx", expected, sha256=digest)


def test_the_sink_hashes_out_of_order_writes_and_rewrites_as_the_file_holds_them(tmp_path: Path) -> None:
    data = bytes(range(256)) * 64
    with HashingSink(tmp_path / "out") as sink:
        for start in (8192, 0, 12288, 4096):           # parts landing in any order
            sink.seek(start)
            sink.write(data[start:start + 4096])
        assert sink.hexdigest() == hashlib.sha256(data).hexdigest()
    with HashingSink(tmp_path / "again") as sink:
        sink.write(data)
        sink.seek(0)
        sink.write(b"\0" * 10)                           # a retried part rewriting hashed bytes
        assert sink.hexdigest() == hashlib.sha256(b"\0" * 10 + data[10:]).hexdigest()
    with HashingSink(tmp_path / "holed") as sink:
        sink.seek(4096)
        sink.write(data[:10])                            # nothing at 0: the digest is of the file, hole and all
        assert sink.hexdigest() == hashlib.sha256((tmp_path / "holed").read_bytes()).hexdigest()


def test_the_settings_choose_the_parts_and_refuse_a_bad_one() -> None:
    deployment = Settings.from_environ({"LAYA_DOWNLOAD_PART_MB": "32", "LAYA_DOWNLOAD_CONCURRENCY": "4"}).deployment
    assert deployment.download_parts == DownloadParts(part_mb=32, concurrency=4)
    assert Settings.from_environ({}).deployment.download_parts == DownloadParts()
    with pytest.raises(SettingsError, match="invalid LAYA_DOWNLOAD_CONCURRENCY '0': must be an integer 1-64"):
        Settings.from_environ({"LAYA_DOWNLOAD_CONCURRENCY": "0"})


def test_the_public_names_are_pinned() -> None:
    assert transfer.__all__ == ["DEFAULT_CONCURRENCY", "DEFAULT_PARTS", "DEFAULT_PART_MB", "DownloadParts",
                                "HashingSink", "download_parts"]


def test_an_opened_s3_store_has_a_connection_per_part(moto_aws: Any) -> None:
    store = open_store("s3://artifacts-bucket/prefix", parts=DownloadParts(concurrency=24))
    assert isinstance(store, S3Store) and store.parts.concurrency == 24
    assert store.client.meta.config.max_pool_connections == 24
