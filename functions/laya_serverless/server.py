"""The local server's uvicorn configuration (`laya-serverless serve` and `start-api`): timeouts and limits.

uvicorn closes an idle keep-alive connection after `timeout_keep_alive`, but has no deadline for
request headers: a connection that sends nothing, or half a request line, stays open forever.
`HeaderDeadlineProtocol` closes any connection whose request headers are not complete within
`LAYA_HEADER_TIMEOUT` seconds of its first byte (or of being opened); the body has its own
deadline in the app (`LAYA_BODY_READ_TIMEOUT`). Header size is bounded by h11.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import h11
from uvicorn import Config
from uvicorn.protocols.http.h11_impl import H11Protocol

from .settings import Settings

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
        if self.conn.their_state is h11.IDLE:
            self._arm()  # waiting for (the rest of) a request's headers: the deadline runs from the first wait
        else:
            self._disarm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._disarm()  # idle between requests is the keep-alive timeout's business

    def _arm(self) -> None:
        if self._header_deadline is None and not self.transport.is_closing():
            self._header_deadline = self.loop.call_later(self.header_timeout, self._headers_too_slow)

    def _disarm(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _headers_too_slow(self) -> None:
        self._header_deadline = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            _log.info("closed a connection that sent no complete request headers in %.0fs", self.header_timeout)
            self.transport.close()


def uvicorn_config(app: Any, settings: Settings, host: str, port: int) -> Config:
    """uvicorn's `Config` for the local server, with the header deadline and keep-alive timeout of `settings`."""
    protocol = type("HeaderDeadline", (HeaderDeadlineProtocol,), {"header_timeout": settings.header_timeout})
    return Config(app, host=host, port=port, log_level="warning", http=protocol,
                  timeout_keep_alive=max(1, round(settings.keep_alive_timeout)),
                  h11_max_incomplete_event_size=MAX_HEADER_BYTES)
