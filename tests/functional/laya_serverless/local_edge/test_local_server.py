"""`laya-serverless serve`'s uvicorn configuration on 127.0.0.1: header deadline, keep-alive, header size."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from laya_serverless.http.app import create_app
from laya_serverless.local_edge.server import MAX_HEADER_BYTES, uvicorn_config
from laya_serverless.protocol.routing import Registry
from laya_serverless.settings import LocalServerSettings, Settings
from tests.functional.laya_serverless.http.test_app_fast import fake_decider
from tests.functional.threaded_server import free_port, start_server

HEADER_TIMEOUT, KEEP_ALIVE = 0.5, 1.0


@pytest.fixture(scope="module")
def address() -> Iterator[tuple[str, int]]:
    settings = Settings.of(header_timeout=HEADER_TIMEOUT, keep_alive_timeout=KEEP_ALIVE)
    app = create_app({"english": fake_decider([1.0, 0.0])}, settings, registry=Registry())
    port = free_port()
    server, thread = start_server(uvicorn_config(app, settings.local_server, "127.0.0.1", port))
    yield "127.0.0.1", port
    server.should_exit = True
    thread.join(timeout=5)


def _closed_after(sock: socket.socket, limit: float) -> tuple[float, bytes]:
    """Seconds until the server closed `sock` (reading whatever it sent first), at most `limit`."""
    sock.settimeout(limit)
    started, received = time.monotonic(), b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except TimeoutError:
        return limit, received
    return time.monotonic() - started, received


def test_a_silent_connection_is_closed_at_the_header_deadline(address: tuple[str, int]) -> None:
    with socket.create_connection(address) as sock:
        waited, received = _closed_after(sock, 5)
    assert HEADER_TIMEOUT * 0.8 <= waited < 3 and received == b""


def test_a_trickled_request_line_does_not_reset_the_deadline(address: tuple[str, int]) -> None:
    with socket.create_connection(address) as sock:
        started = time.monotonic()
        for piece in (b"GET /hea", b"lth HTTP/1.1\r\n", b"Host: x\r\n"):
            sock.sendall(piece)
            time.sleep(0.2)
        waited, _ = _closed_after(sock, 5)
    assert time.monotonic() - started < 3 and waited < 3


def test_an_idle_keep_alive_connection_is_closed(address: tuple[str, int]) -> None:
    with socket.create_connection(address) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        waited, received = _closed_after(sock, 5)
    assert received.startswith(b"HTTP/1.1 200") and b'"status":"ok"' in received
    assert KEEP_ALIVE * 0.8 <= waited < 4


def test_headers_that_never_end_are_refused_past_the_size_bound(address: tuple[str, int]) -> None:
    with socket.create_connection(address) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (MAX_HEADER_BYTES + 10))
        _, received = _closed_after(sock, 5)
    assert received.startswith(b"HTTP/1.1 400")
    assert b"application/json" in received and b'{"detail": "invalid HTTP request' in received


@pytest.mark.parametrize("request_head", [
    b"POST /v1/systemone HTTP/1.1\r\nHost: x\r\nContent-Length: 400\r\n\r\n{",   # answered 401 before its body
    b"DELETE /v1/systemone HTTP/1.1\r\nHost: x\r\nContent-Length: 400\r\n\r\n{",   # 405
], ids=["401", "405"])
def test_a_connection_answered_before_its_body_is_closed_once_it_stalls(request_head: bytes) -> None:
    """A request refused before its body is read, whose client then trickles the body: the connection is closed at
    the header deadline (it used to stay open forever: uvicorn stops its keep-alive timer at the next byte)."""
    settings = Settings.of(header_timeout=HEADER_TIMEOUT, keep_alive_timeout=KEEP_ALIVE, api_key="k3y")
    app = create_app({"english": fake_decider([1.0, 0.0])}, settings, registry=Registry())
    port = free_port()
    server, thread = start_server(uvicorn_config(app, settings.local_server, "127.0.0.1", port))
    try:
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(request_head)
            time.sleep(0.3)
            sock.sendall(b'"')   # one more byte of a body nobody reads
            waited, received = _closed_after(sock, 6)
        assert received.startswith((b"HTTP/1.1 401", b"HTTP/1.1 405")), received[:80]
        assert waited < 5, "the connection was held %.1f s" % waited
    finally:
        server.should_exit = True
        thread.join(timeout=5)


def test_one_header_past_the_bound_in_a_single_piece_is_a_json_431(address: tuple[str, int]) -> None:
    with socket.create_connection(address) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (60 * 1024) + b"\r\n\r\n")
        _, received = _closed_after(sock, 5)
    assert received.startswith(b"HTTP/1.1 431") and b"request headers too large" in received
    with socket.create_connection(address) as sock:   # under the bound: served
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Fine: " + b"a" * 1000 + b"\r\n\r\n")
        _, received = _closed_after(sock, 3)
    assert received.startswith(b"HTTP/1.1 200")


def test_proxy_headers_do_not_pick_the_client_address() -> None:
    """uvicorn trusted X-Forwarded-For from 127.0.0.1 by default: any local client could choose its address and
    lift the per-client reading cap. The local server takes the connection's peer as the client."""
    import json

    async def echo(scope: dict, receive: object, send: object) -> None:  # type: ignore[type-arg]
        if scope["type"] != "http":
            return
        payload = json.dumps({"client": scope["client"][0], "scheme": scope["scheme"]}).encode()
        await send({"type": "http.response.start", "status": 200, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]})
        await send({"type": "http.response.body", "body": payload})

    port = free_port()
    server, thread = start_server(uvicorn_config(echo, LocalServerSettings(), "127.0.0.1", port))
    try:
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 203.0.113.9\r\nX-Forwarded-Proto: https\r\n"
                         b"Connection: close\r\n\r\n")
            _, received = _closed_after(sock, 5)
    finally:
        server.should_exit = True
        thread.join(timeout=5)
    assert json.loads(received.split(b"\r\n\r\n", 1)[1]) == {"client": "127.0.0.1", "scheme": "http"}


def test_a_request_framed_both_chunked_and_by_length_is_answered_then_the_connection_closed(
        address: tuple[str, int]) -> None:
    """Such a request used to leave its connection open for the next one (RFC 9112 6.1 says close); a request
    pipelined behind it is never answered."""
    framed = (b"POST /v1/systemone HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 5\r\n"
              b"Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n")
    with socket.create_connection(address) as sock:
        sock.sendall(framed + b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        _, received = _closed_after(sock, 5)
    head = received.split(b"\r\n\r\n", 1)[0].lower()
    assert b"\r\nconnection: close" in head and received.count(b"HTTP/1.1 ") == 1
