"""Running the Lambda handler on this machine, as `sam local` does, with no Docker and no AWS account.

`ApiGatewayFront` is an ASGI app that turns each HTTP request into an API Gateway event — REST API
(payload 1.0, what the stack deploys) by default, or HTTP API (payload 2.0) — hands it to the real
handler on one worker, as a Lambda instance takes one event at a time, and turns the handler's
result back into an HTTP response. As the deployed gateway does before Lambda sees a byte, the front
refuses a body without the bearer key (the authorizer) and a body larger than a Lambda event can hold,
before reading it; a body is read as it streams, never buffered twice.
"""

from __future__ import annotations

import asyncio
import base64
import hmac
import json
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace
from typing import Any

LOCAL_HOST = "127.0.0.1"
PAYLOAD_VERSIONS = ("v1", "v2")
LAMBDA_EVENT_BYTES = 6 * 1024 * 1024  # a synchronous invocation's payload limit
MAX_BODY_BYTES = LAMBDA_EVENT_BYTES * 3 // 4  # the body travels base64 in the event: 4.5 MiB of it fits
_OWS = " \t"
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

    def __init__(self, handler: Any, payload: str = "v1", api_key: str | None = None,
                 max_body: int = MAX_BODY_BYTES, body_timeout: float = 10.0) -> None:
        """`body_timeout`: seconds a body may take to arrive, keyed or not (`LAYA_BODY_READ_TIMEOUT`)."""
        if payload not in EVENT_BUILDERS:
            raise ValueError("payload must be one of %s, got %r" % (", ".join(PAYLOAD_VERSIONS), payload))
        self.handler, self.event, self.max_body = handler, EVENT_BUILDERS[payload], max_body
        self.body_timeout = body_timeout
        self._expected = None if api_key is None else b"Bearer " + api_key.encode("utf-8", "surrogateescape")
        # One worker with its own event loop (Mangum drives the app on the calling thread's loop),
        # taking one event at a time, as a Lambda instance does.
        self.worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lambda",
                                         initializer=lambda: asyncio.set_event_loop(asyncio.new_event_loop()))

    def close(self) -> None:
        """Close the worker's event loop and stop the worker."""
        self.worker.submit(lambda: asyncio.get_event_loop().close()).result()
        self.worker.shutdown()

    def _refusal(self, headers: Headers) -> tuple[int, str] | None:
        """What the gateway answers before invoking the function: a body without the key (its authorizer), or one
        declared larger than an event holds. Requests without a body go on: `/health` is open, and reduced."""
        merged = _merged(headers)
        declared = merged.get("content-length", ["0"])[-1].strip()
        has_body = "transfer-encoding" in merged or declared != "0"
        if self._expected is not None and has_body:
            supplied = merged.get("authorization", [""])[-1].strip(_OWS).encode("latin-1")
            if not hmac.compare_digest(supplied, self._expected):
                return 401, "invalid or missing bearer token"
        if declared.isdigit() and int(declared) > self.max_body:
            return 413, self._too_large()
        return None

    def _too_large(self) -> str:
        return "request body too large (over %d bytes: a Lambda event holds at most %d, base64)" % (
            self.max_body, LAMBDA_EVENT_BYTES)

    async def _body(self, receive: Any) -> bytes | None:
        """The body as it streams in, or None once it passes the cap (the rest is never read)."""
        body = bytearray()
        while True:
            message = await receive()
            body += message.get("body", b"")
            if len(body) > self.max_body:
                return None
            if not message.get("more_body"):
                return bytes(body)

    @staticmethod
    async def _refuse(send: Any, status: int, detail: str) -> None:
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": json.dumps({"detail": detail}).encode("utf-8")})

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        refused = self._refusal(scope.get("headers", []))
        if refused is not None:
            await self._refuse(send, *refused)
            return
        try:  # the gateway holds a body for a bounded time; a client that trickles it must not hold the worker
            body = await asyncio.wait_for(self._body(receive), self.body_timeout)
        except TimeoutError:
            await self._refuse(send, 408, "request body was not received in time")
            return
        if body is None:
            await self._refuse(send, 413, self._too_large())
            return
        event = self.event(scope["method"], scope["path"], scope.get("query_string", b"").decode("latin-1"),
                           scope.get("headers", []), body)
        result = await asyncio.get_running_loop().run_in_executor(self.worker, self.handler, event, lambda_context())
        payload = result.get("body") or ""
        data = base64.b64decode(payload) if result.get("isBase64Encoded") else payload.encode("utf-8")
        await send({"type": "http.response.start", "status": int(result.get("statusCode", 500)),
                    "headers": _response_headers(result)})
        await send({"type": "http.response.body", "body": data})
