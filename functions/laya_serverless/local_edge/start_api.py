"""Running the Lambda handler on this machine, as `sam local` does, with no Docker and no AWS account.

`ApiGatewayFront` is an ASGI app that turns each HTTP request into an API Gateway event — REST API
(payload 1.0, what the stack deploys) by default, or HTTP API (payload 2.0) — hands it to the real
handler on one worker, as a Lambda instance takes one event at a time, and turns the handler's
result back into an HTTP response.
"""

from __future__ import annotations

import asyncio
import base64
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace
from typing import Any

LOCAL_HOST = "127.0.0.1"
PAYLOAD_VERSIONS = ("v1", "v2")
Headers = list[tuple[bytes, bytes]]


def lambda_context() -> Any:
    """The few attributes Mangum and handlers read from a Lambda context."""
    return SimpleNamespace(function_name="laya-serverless-local", aws_request_id=str(uuid.uuid4()),
                           invoked_function_arn="arn:aws:lambda:local:000000000000:function:laya-serverless-local",
                           memory_limit_in_mb=3008, get_remaining_time_in_millis=lambda: 30_000)


def _merged(headers: Headers) -> dict[str, list[str]]:
    merged: dict[str, list[str]] = {}
    for name, value in headers:
        merged.setdefault(name.decode("latin-1").lower(), []).append(value.decode("latin-1"))
    return merged


def rest_api_event(method: str, path: str, query: str, headers: Headers, body: bytes) -> dict[str, Any]:
    """An API Gateway REST API proxy event (payload format 1.0) for one request; the body always base64."""
    merged = _merged(headers)
    pairs = [part.partition("=") for part in query.split("&") if part]
    multi_query: dict[str, list[str]] = {}
    for key, _, value in pairs:
        multi_query.setdefault(key, []).append(value)
    return {
        "resource": "/{proxy+}", "path": path, "httpMethod": method,
        "headers": {k: v[-1] for k, v in merged.items()}, "multiValueHeaders": merged,
        "queryStringParameters": {k: v[-1] for k, v in multi_query.items()} or None,
        "multiValueQueryStringParameters": multi_query or None,
        "pathParameters": {"proxy": path.lstrip("/")}, "stageVariables": None,
        "requestContext": {
            "accountId": "000000000000", "apiId": "local", "resourceId": "local", "stage": "local",
            "requestId": str(uuid.uuid4()), "resourcePath": "/{proxy+}", "httpMethod": method, "path": path,
            "protocol": "HTTP/1.1", "requestTimeEpoch": int(time.time() * 1000),
            "identity": {"sourceIp": LOCAL_HOST, "userAgent": merged.get("user-agent", [""])[-1]},
        },
        "body": base64.b64encode(body).decode("ascii"), "isBase64Encoded": True,
    }


def http_api_event(method: str, path: str, query: str, headers: Headers, body: bytes) -> dict[str, Any]:
    """An API Gateway HTTP API event (payload format 2.0) for one request; the body always base64."""
    merged = {k: ",".join(v) for k, v in _merged(headers).items()}
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


EVENT_BUILDERS: dict[str, Callable[[str, str, str, Headers, bytes], dict[str, Any]]] = {
    "v1": rest_api_event, "v2": http_api_event}


def _response_headers(result: dict[str, Any]) -> Headers:
    headers = [(k.lower().encode("latin-1"), str(v).encode("latin-1"))
               for k, v in (result.get("headers") or {}).items()]
    for key, values in (result.get("multiValueHeaders") or {}).items():
        headers += [(key.lower().encode("latin-1"), str(v).encode("latin-1")) for v in values]
    for cookie in result.get("cookies") or []:
        headers.append((b"set-cookie", cookie.encode("latin-1")))
    return headers


class ApiGatewayFront:
    """ASGI app: HTTP request -> API Gateway event -> Lambda handler -> HTTP response."""

    def __init__(self, handler: Any, payload: str = "v1") -> None:
        if payload not in EVENT_BUILDERS:
            raise ValueError("payload must be one of %s, got %r" % (", ".join(PAYLOAD_VERSIONS), payload))
        self.handler, self.event = handler, EVENT_BUILDERS[payload]
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
        event = self.event(scope["method"], scope["path"], scope.get("query_string", b"").decode("latin-1"),
                           scope.get("headers", []), body)
        result = await asyncio.get_running_loop().run_in_executor(self.worker, self.handler, event, lambda_context())
        payload = result.get("body") or ""
        data = base64.b64decode(payload) if result.get("isBase64Encoded") else payload.encode("utf-8")
        await send({"type": "http.response.start", "status": int(result.get("statusCode", 500)),
                    "headers": _response_headers(result)})
        await send({"type": "http.response.body", "body": data})
