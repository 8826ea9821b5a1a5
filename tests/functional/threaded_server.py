"""A real uvicorn server on a free local port, in a thread of the test: what the HTTP tests share."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_server(config: Any, timeout: float = 20.0) -> tuple[Any, threading.Thread]:
    """Run `uvicorn.Server(config)` in a daemon thread; return once it accepts connections."""
    import uvicorn

    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started, "the server did not start within %gs" % timeout
    return server, thread
