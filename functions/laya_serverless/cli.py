"""`laya-serverless`: what `sam local` users expect, without Docker or an AWS account.

    laya-serverless serve                 the app on uvicorn (LAYA_HOST/LAYA_PORT, default 127.0.0.1:8000)
    laya-serverless invoke --event FILE   the real Lambda handler on an API Gateway event; prints its response
    laya-serverless start-api             an HTTP front that turns each request into an API Gateway (HTTP API,
                                          payload v2) event for the real handler, like `sam local start-api`
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import sys
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace
from typing import Any

LOCAL_HOST = "127.0.0.1"


def _say(message: str) -> None:
    print("[laya-serverless] %s" % message, file=sys.stderr, flush=True)


def lambda_context() -> Any:
    """The few attributes Mangum and handlers read from a Lambda context."""
    return SimpleNamespace(function_name="laya-serverless-local", aws_request_id=str(uuid.uuid4()),
                           invoked_function_arn="arn:aws:lambda:local:000000000000:function:laya-serverless-local",
                           memory_limit_in_mb=3008, get_remaining_time_in_millis=lambda: 30_000)


def http_api_event(method: str, path: str, query: str, headers: list[tuple[bytes, bytes]],
                   body: bytes) -> dict[str, Any]:
    """An API Gateway HTTP API (payload format 2.0) event for one request; the body always base64."""
    merged: dict[str, str] = {}
    for name, value in headers:
        key = name.decode("latin-1").lower()
        merged[key] = merged[key] + "," + value.decode("latin-1") if key in merged else value.decode("latin-1")
    now = time.time()
    return {
        "version": "2.0", "routeKey": "$default", "rawPath": path, "rawQueryString": query,
        "headers": merged, "isBase64Encoded": True, "body": base64.b64encode(body).decode("ascii"),
        "requestContext": {
            "accountId": "000000000000", "apiId": "local", "domainName": merged.get("host", LOCAL_HOST),
            "domainPrefix": "local", "requestId": str(uuid.uuid4()), "routeKey": "$default", "stage": "$default",
            "time": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now)), "timeEpoch": int(now * 1000),
            "http": {"method": method, "path": path, "protocol": "HTTP/1.1", "sourceIp": LOCAL_HOST,
                     "userAgent": merged.get("user-agent", "")},
        },
    }


class ApiGatewayFront:
    """ASGI app: HTTP request -> API Gateway v2 event -> Lambda handler -> HTTP response."""

    def __init__(self, handler: Any) -> None:
        self.handler = handler
        # One worker with its own event loop (Mangum drives the app on the calling thread's loop),
        # taking one event at a time, as a Lambda instance does.
        self.worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lambda",
                                         initializer=lambda: asyncio.set_event_loop(asyncio.new_event_loop()))

    def close(self) -> None:
        """Close the worker's event loop and stop the worker."""
        self.worker.submit(lambda: asyncio.get_event_loop().close()).result()
        self.worker.shutdown()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        event = http_api_event(scope["method"], scope["path"], scope.get("query_string", b"").decode("latin-1"),
                               scope.get("headers", []), body)
        result = await asyncio.get_running_loop().run_in_executor(self.worker, self.handler, event, lambda_context())
        payload = result.get("body") or ""
        data = base64.b64decode(payload) if result.get("isBase64Encoded") else payload.encode("utf-8")
        headers = [(k.lower().encode("latin-1"), str(v).encode("latin-1")) for k, v in
                   (result.get("headers") or {}).items()]
        for key, values in (result.get("multiValueHeaders") or {}).items():
            headers += [(key.lower().encode("latin-1"), str(v).encode("latin-1")) for v in values]
        for cookie in result.get("cookies") or []:
            headers.append((b"set-cookie", cookie.encode("latin-1")))
        await send({"type": "http.response.start", "status": int(result.get("statusCode", 500)), "headers": headers})
        await send({"type": "http.response.body", "body": data})


def _address(args: argparse.Namespace) -> tuple[str, int]:
    from .settings import Settings

    settings = Settings.from_environ()
    host = args.host or os.environ.get("LAYA_HOST", "").strip() or LOCAL_HOST
    return host, args.port or settings.port


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from .service import build_service
    from .settings import Settings

    settings = Settings.from_environ()
    host, port = _address(args)
    app = build_service(settings)
    _say("ready: http://%s:%d  (store %s, %s)" % (host, port, settings.store, ", ".join(
        "%s=%s/%s" % (name, stored, settings.target) for name, stored in settings.deployed.items())))
    uvicorn.run(app, host=host, port=port, log_level="warning")
    return 0


def _invoke(args: argparse.Namespace) -> int:
    from .handler import make_handler

    try:
        event = json.loads(Path(args.event).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        _say("error: cannot read the event %s: %s" % (args.event, exc))
        return 2
    response = make_handler()(event, lambda_context())
    print(json.dumps(response, ensure_ascii=False, indent=2))
    return 0


def _start_api(args: argparse.Namespace) -> int:
    import uvicorn

    from .handler import make_handler

    host, port = _address(args)
    front = ApiGatewayFront(make_handler())
    _say("ready: http://%s:%d  (each request runs the Lambda handler on an API Gateway v2 event)" % (host, port))
    try:
        uvicorn.run(front, host=host, port=port, log_level="warning")
    finally:
        front.close()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="laya-serverless", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    for name, run, text in (("serve", _serve, "serve the app with uvicorn"),
                            ("start-api", _start_api, "an HTTP front over the Lambda handler")):
        command = commands.add_parser(name, help=text)
        command.add_argument("--host", help="bind address (default LAYA_HOST or 127.0.0.1)")
        command.add_argument("--port", type=int, help="port (default LAYA_PORT or 8000)")
        command.set_defaults(run=run)
    invoke = commands.add_parser("invoke", help="run the Lambda handler on one API Gateway event")
    invoke.add_argument("--event", required=True, help="an API Gateway event (v1 REST or v2 HTTP API) as JSON")
    invoke.set_defaults(run=_invoke)
    args = parser.parse_args(argv)
    return int(args.run(args))


if __name__ == "__main__":
    raise SystemExit(main())
