"""Reading a request body: size cap, read deadline, content coding, JSON.

A client that disconnects mid-body is logged in one line (no traceback) and refused with
`ClientDisconnected`; nobody reads that answer.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from fastapi import Request
from starlette.requests import ClientDisconnect

from ..errors import BodyTimeout, ClientDisconnected, MalformedRequest, TooLarge
from ..protocol.limits import MAX_BODY_BYTES
from .content_coding import decode_body

_log = logging.getLogger("laya_serverless")


def declared_too_large(content_length: str | None) -> bool:
    """A `Content-Length` that already says the body is over the cap; an unparseable one says nothing."""
    text = (content_length or "").strip()
    return text.isdigit() and int(text) > MAX_BODY_BYTES


async def read_body(request: Request, timeout: float) -> bytes:
    """The raw body: 413 as soon as it passes the cap (chunked bodies too), 408 past the deadline."""
    if declared_too_large(request.headers.get("content-length")):
        raise TooLarge("request body too large")
    received = [0]

    async def collect() -> bytes:
        chunks = []
        async for chunk in request.stream():
            received[0] += len(chunk)
            if received[0] > MAX_BODY_BYTES:
                raise TooLarge("request body too large")
            chunks.append(chunk)
        return b"".join(chunks)

    try:
        return await asyncio.wait_for(collect(), timeout=timeout)
    except TimeoutError:
        raise BodyTimeout("request body was not received in time") from None
    except ClientDisconnect:
        _log.info("client disconnected after %d body bytes of %s %s", received[0], request.method, request.url.path)
        raise ClientDisconnected("client disconnected before its body arrived") from None


def parse_json(raw: bytes) -> Any:
    """Python's own `json.loads` on the bytes, as upstream: BOM and UTF-16/32 accepted, NaN literals too."""
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        raise MalformedRequest("request body must be valid JSON", kind="json_invalid") from None


async def read_json(request: Request, timeout: float) -> Any:
    raw = await read_body(request, timeout)
    return parse_json(decode_body(raw, request.headers.get("content-encoding")))
