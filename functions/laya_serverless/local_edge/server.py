"""The local server's uvicorn configuration (`laya-serverless serve` and `start-api`): timeouts and limits.

uvicorn closes an idle keep-alive connection after `timeout_keep_alive`, but has no deadline for
request headers: a connection that sends nothing, or half a request line, stays open forever.
`HeaderDeadlineProtocol` closes any connection whose request headers are not complete within
`LAYA_HEADER_TIMEOUT` seconds of its first byte (or of being opened); the body has its own
deadline in the app (`LAYA_BODY_READ_TIMEOUT`). A request answered before its body was read (a
401, a 405, a 413) leaves the client sending a body nobody reads: uvicorn's keep-alive timer stops
at its next byte, so the same deadline closes such a connection too. Header size is bounded by h11
for headers that arrive in pieces and by `HeaderBudget` for a block that arrives whole (h11 bounds
only what it buffers), and h11's own refusals are answered as JSON like every other error.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from typing import Any

import h11
from uvicorn import Config
from uvicorn.protocols.http.h11_impl import H11Protocol

from ..settings import LocalServerSettings

MAX_HEADER_BYTES = 16 * 1024  # h11's own default, stated: a request line plus headers past this is a 400
_log = logging.getLogger("laya_serverless")


class HeaderDeadlineProtocol(H11Protocol):
    """uvicorn's h11 protocol, closing connections that do not deliver complete request headers in time."""

    header_timeout = 10.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._header_deadline: asyncio.TimerHandle | None = None
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is h11.IDLE or self._answered_unread():
            self._arm()  # waiting for a request's headers, or for the end of a body nobody will read
        else:
            self._disarm()

    def _answered_unread(self) -> bool:
        """The response went out while the client is still sending its request's body."""
        return self.conn.our_state in (h11.DONE, h11.MUST_CLOSE) and self.conn.their_state is h11.SEND_BODY

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._disarm()  # idle between requests is the keep-alive timeout's business
        if self._answered_unread():
            self._arm()   # unless the rest of an unread body is still to come: it gets the header deadline

    def send_400_response(self, msg: str) -> None:
        """h11's refusal of what is not HTTP (or headers past the bound), as JSON like the app's errors."""
        body = json.dumps({"detail": "invalid HTTP request (malformed, or request headers over %d bytes)"
                                     % MAX_HEADER_BYTES}).encode()
        headers = [(b"content-type", b"application/json"), (b"connection", b"close"),
                   (b"content-length", str(len(body)).encode())]
        try:
            self.transport.write(self.conn.send(h11.Response(status_code=400, headers=headers, reason=b"Bad Request")))
            self.transport.write(self.conn.send(h11.Data(data=body)))
            self.transport.write(self.conn.send(h11.EndOfMessage()))
        except h11.LocalProtocolError:   # a response had already begun: nothing more can be said
            pass
        self.transport.close()

    def _arm(self) -> None:
        if self._header_deadline is None and not self.transport.is_closing():
            self._header_deadline = self.loop.call_later(self.header_timeout, self._headers_too_slow)

    def _disarm(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _headers_too_slow(self) -> None:
        self._header_deadline = None
        if (self.conn.their_state is h11.IDLE or self._answered_unread()) and not self.transport.is_closing():
            _log.info("closed a connection that sent no complete request headers (or the rest of an unread body) "
                      "in %.0fs", self.header_timeout)
            self.transport.close()


class HeaderBudget:
    """ASGI: a request whose line and headers together pass `limit` bytes is a 431, whatever h11 let through."""

    def __init__(self, app: Any, limit: int = 0) -> None:
        self.app, self.limit = app, limit or MAX_HEADER_BYTES

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            size = len(scope.get("raw_path") or b"") + len(scope.get("query_string") or b"") + sum(
                len(name) + len(value) + 4 for name, value in scope.get("headers") or ())
            if size > self.limit:
                body = json.dumps({"detail": "request headers too large (over %d bytes)" % self.limit}).encode()
                await send({"type": "http.response.start", "status": 431, "headers": [
                    (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close")]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


class CloseAfterAmbiguousFraming:
    """ASGI: a request with both `Transfer-Encoding` and `Content-Length` is answered with `Connection: close`
    (RFC 9112 6.1: a server MUST close the connection after responding to one; its framing may have been read one
    way here and another way by something in front, and the next request on that connection is not trusted)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        names = {name.lower() for name, _ in scope.get("headers") or ()} if scope["type"] == "http" else set()
        if not {b"transfer-encoding", b"content-length"} <= names:
            await self.app(scope, receive, send)
            return

        async def closing(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                kept = [(k, v) for k, v in message.get("headers") or () if k.lower() != b"connection"]
                message = dict(message, headers=[*kept, (b"connection", b"close")])
            await send(message)

        await self.app(scope, receive, closing)


def uvicorn_config(app: Any, settings: LocalServerSettings, host: str, port: int) -> Config:
    """uvicorn's `Config` for the local server, with the header deadline and keep-alive timeout of `settings`."""
    protocol = type("HeaderDeadline", (HeaderDeadlineProtocol,), {"header_timeout": settings.header_timeout})
    # proxy_headers off: uvicorn's default trusts X-Forwarded-For from 127.0.0.1, so any local client could pick its
    # address and step around the per-client reading cap; the peer's own address is the client's.
    return Config(CloseAfterAmbiguousFraming(HeaderBudget(app)), host=host, port=port, log_level="warning",
                  http=protocol, timeout_keep_alive=max(1, round(settings.keep_alive_timeout)),
                  h11_max_incomplete_event_size=MAX_HEADER_BYTES, proxy_headers=False)


def listening_socket(host: str, port: int) -> socket.socket:
    """The bound, listening socket the server will serve on; raises OSError (a taken port) before `ready:` is said."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return socket.create_server((host, port), family=family, backlog=2048)
