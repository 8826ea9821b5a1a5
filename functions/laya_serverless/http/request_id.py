"""`x-typesafe-request-id`: the id the official Jev client reads from every response.

Echoed when the client sent a usable one (1-128 characters of letters, digits and `._:-`, so it
is safe in a header and a log line), generated otherwise (`req_` + 32 hex digits). The id of the
request being served is in `current` and `RequestIdFilter` puts it on every log record, so the
response and the log lines of one request carry the same id.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Iterable
from contextvars import ContextVar
from typing import Any

HEADER = "x-typesafe-request-id"
_USABLE = re.compile(r"[A-Za-z0-9._:-]{1,128}")
current: ContextVar[str | None] = ContextVar("laya_request_id", default=None)


def new_id() -> str:
    return "req_" + uuid.uuid4().hex


def chosen(sent: Any) -> str:
    """The client's id when usable, else a fresh one."""
    return sent if isinstance(sent, str) and _USABLE.fullmatch(sent) else new_id()


def sent_in(headers: Iterable[tuple[bytes, bytes]]) -> str | None:
    for name, value in headers:
        if name.lower() == HEADER.encode():
            return value.decode("latin-1")
    return None


class RequestIdMiddleware:
    """ASGI middleware: choose the id, make it `current`, and set the header on the response."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = chosen(sent_in(scope.get("headers") or ()))
        token = current.set(request_id)

        async def send_with_id(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers") or () if k.lower() != HEADER.encode()]
                message = dict(message, headers=[*headers, (HEADER.encode(), request_id.encode("ascii"))])
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            current.reset(token)


class RequestIdFilter(logging.Filter):
    """Adds `request_id` (the current request's, or None outside a request) to every record it sees."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            record.request_id = current.get()
        return True
