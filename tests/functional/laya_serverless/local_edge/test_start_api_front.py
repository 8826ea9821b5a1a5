"""`start-api`'s front refuses, as the deployed gateway does, a body without the key and a body larger than a Lambda
event holds, before reading it; what it forwards is the body as sent. Driven over ASGI with a recording handler."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import pytest

from laya_serverless.local_edge.start_api import MAX_BODY_BYTES, ApiGatewayFront

KEY = "local-key"


class Recording:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def __call__(self, event: dict[str, Any], _context: Any) -> dict[str, Any]:
        self.events.append(event)
        return {"statusCode": 200, "headers": {"content-type": "application/json"}, "body": "{}"}


def _send(front: ApiGatewayFront, headers: list[tuple[bytes, bytes]], chunks: list[bytes],
          method: str = "POST", path: str = "/v1/systemone") -> tuple[int, bytes, int]:
    """(status, body, chunks the front read)."""
    read, sent = 0, []

    async def receive() -> dict[str, Any]:
        nonlocal read
        read += 1
        return {"type": "http.request", "body": chunks[read - 1], "more_body": read < len(chunks)}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": method, "path": path, "query_string": b"", "headers": headers}
    asyncio.run(front(scope, receive, send))
    return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:]), read


@pytest.fixture()
def front() -> Any:
    handler = Recording()
    made = ApiGatewayFront(handler, api_key=KEY)
    yield made, handler
    made.close()


def test_a_body_without_the_key_is_refused_before_a_byte_of_it_is_read(front: Any) -> None:
    """A 100 MB body without a key used to be buffered whole (9.4 s, +500 MB RSS), then refused 401."""
    made, handler = front
    for headers in ([(b"content-length", b"104857600")], [(b"transfer-encoding", b"chunked")],
                    [(b"content-length", b"10"), (b"authorization", b"Bearer wrong")]):
        status, body, read = _send(made, headers, [b"x" * 1024] * 4)
        assert (status, json.loads(body), read) == (401, {"detail": "invalid or missing bearer token"}, 0)
    assert handler.events == []


def test_a_body_over_what_a_lambda_event_holds_is_413_declared_or_streamed(front: Any) -> None:
    made, handler = front
    bearer = (b"authorization", b"Bearer " + KEY.encode())
    status, body, read = _send(made, [bearer, (b"content-length", str(MAX_BODY_BYTES + 1).encode())], [b"x"])
    assert (status, read) == (413, 0) and "a Lambda event holds at most 6291456" in json.loads(body)["detail"]
    chunk = b"x" * (1 << 20)
    status, _, read = _send(made, [bearer, (b"transfer-encoding", b"chunked")], [chunk] * 50)
    assert status == 413 and read == MAX_BODY_BYTES // len(chunk) + 1   # stopped just past the cap
    assert handler.events == []


def test_what_passes_is_forwarded_as_sent_and_bodiless_requests_need_no_key(front: Any) -> None:
    made, handler = front
    parts = [b'{"state": "', b"i was charged twice", b'", "questions": {}}']
    headers = [(b"authorization", b"\tBearer " + KEY.encode() + b" "), (b"content-length", b"52")]
    assert _send(made, headers, parts)[0] == 200
    assert _send(made, [], [b""], method="GET", path="/health")[0] == 200
    forwarded, health = handler.events
    assert base64.b64decode(forwarded["body"]) == b"".join(parts) and health["path"] == "/health"


def test_a_keyed_clients_body_has_a_deadline() -> None:
    """A client holding the key could trickle its body forever and hold the one Lambda-like worker."""
    handler = Recording()
    made = ApiGatewayFront(handler, api_key=KEY, body_timeout=0.2)
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        await asyncio.sleep(0.05)
        return {"type": "http.request", "body": b"x", "more_body": True}   # never ends

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    headers = [(b"authorization", b"Bearer " + KEY.encode()), (b"transfer-encoding", b"chunked")]
    try:
        asyncio.run(made({"type": "http", "method": "POST", "path": "/v1/systemone", "query_string": b"",
                          "headers": headers}, receive, send))
    finally:
        made.close()
    assert sent[0]["status"] == 408
    assert json.loads(sent[1]["body"]) == {"detail": "request body was not received in time"}
    assert handler.events == []
