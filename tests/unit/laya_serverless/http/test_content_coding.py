"""Request-body codings: zstd accepted and bounded, anything else refused clearly."""

from __future__ import annotations

import pytest
from backports.zstd import compress

from laya_serverless import RequestError
from laya_serverless.http.content_coding import decode_body
from laya_serverless.http.statuses import status_of
from laya_serverless.protocol.limits import MAX_BODY_BYTES


def test_identity_and_zstd_round_trip() -> None:
    body = b'{"state": "x", "questions": {}}' * 50
    assert decode_body(body, None) == body and decode_body(body, "identity") == body
    assert decode_body(compress(body), "zstd") == body and decode_body(compress(body), " ZSTD ") == body


def test_exactly_the_limit_is_accepted_and_a_bomb_is_refused() -> None:
    assert len(decode_body(compress(b"0" * MAX_BODY_BYTES), "zstd")) == MAX_BODY_BYTES
    bomb = compress(b"0" * (MAX_BODY_BYTES * 50))
    assert len(bomb) < 10_000
    with pytest.raises(RequestError) as error:
        decode_body(bomb, "zstd")
    assert (status_of(error.value), error.value.detail) == (413, "request body too large")


@pytest.mark.parametrize(("data", "coding", "status", "detail"), [
    (b"not zstd at all", "zstd", 400, "request body is not valid zstd data"),
    (compress(b'{"a": 1}' * 100)[:-4], "zstd", 400, "request body is not valid zstd data"),
    (compress(b'{"a": 1}') + b"garbage", "zstd", 400,
     "request body has data after its zstd frame; send exactly one frame"),
    (compress(b'{"a": 1}') + compress(b'{"b": 2}'), "zstd", 400,
     "request body has data after its zstd frame; send exactly one frame"),
    (b"{}", "gzip", 415, "unsupported Content-Encoding 'gzip'; send zstd or an uncompressed body"),
])
def test_bad_bodies_are_refused(data: bytes, coding: str, status: int, detail: str) -> None:
    with pytest.raises(RequestError) as error:
        decode_body(data, coding)
    assert (status_of(error.value), error.value.detail) == (status, detail)
