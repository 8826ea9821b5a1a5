"""Downloads hash the bytes as they stream, so a fetch verifies each file without reading it twice."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from laya_serverless.artifact.store import LocalStore, S3Store

DATA = bytes(range(256)) * 9000  # over two 1 MiB chunks


def test_a_local_download_returns_the_sha256_of_what_it_wrote(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    assert store.create("artifacts/x/model.onnx", DATA)
    digest = store.download("artifacts/x/model.onnx", tmp_path / "copy")
    assert (tmp_path / "copy").read_bytes() == DATA and digest == hashlib.sha256(DATA).hexdigest()


def test_an_s3_download_streams_and_hashes(tmp_path: Path, moto_aws: Any) -> None:
    client = moto_aws("s3")
    client.create_bucket(Bucket="artifacts-bucket")
    store = S3Store("artifacts-bucket", "prefix", client)
    assert store.create("artifacts/x/model.onnx", DATA)
    digest = store.download("artifacts/x/model.onnx", tmp_path / "copy")
    assert (tmp_path / "copy").read_bytes() == DATA and digest == hashlib.sha256(DATA).hexdigest()
