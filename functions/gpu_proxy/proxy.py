"""API Gateway (REST, payload 1.0) -> SageMaker InvokeEndpoint: the `/gpu` routes of the same API.

The gateway's authorizer has already checked the bearer key; the endpoint holds no key. The route
and the body's content coding travel as custom attributes (InvokeEndpoint forwards no path and no
header of the caller's), and the container's `/invocations` answers them as the Jev routes do. A
refusal of the container's comes back as InvokeEndpoint's ModelError and is passed on with the
container's own status and body. Standard library and boto3 only, so the function is this one file.
"""

from __future__ import annotations

import base64
import json
import os
import re
from typing import Any

ENDPOINT_ENV = "LAYA_GPU_ENDPOINT"
# Set where the endpoint hosts the model as an inference component (-c gpu_min_instances=0, scale to zero).
COMPONENT_ENV = "LAYA_GPU_INFERENCE_COMPONENT"
# (method, path after /gpu/) -> the container's route; anything else is the app's own 404.
ROUTES = {("POST", "v1/systemone"): "systemone", ("POST", "v1/systemone/batch"): "batch", ("GET", "health"): "health"}
_CODING = re.compile(r"^[A-Za-z0-9-]{1,32}$")
_client: Any = None


def _sagemaker() -> Any:
    global _client
    if _client is None:
        import boto3

        _client = boto3.client("sagemaker-runtime")
    return _client


def answer(status: int, body: bytes | str, content_type: str = "application/json") -> dict[str, Any]:
    headers = {"Content-Type": content_type}
    if status == 503:
        headers["Retry-After"] = "1"
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    return {"statusCode": status, "headers": headers, "body": text, "isBase64Encoded": False}


def detail(status: int, text: str) -> dict[str, Any]:
    return answer(status, json.dumps({"detail": text}))


def route_of(event: dict[str, Any]) -> str | None:
    path = str(event.get("path") or "")
    _, found, rest = path.partition("/gpu/")
    return ROUTES.get((str(event.get("httpMethod")), rest.strip("/"))) if found else None


def attributes_of(route: str, headers: dict[str, str]) -> str | None:
    """`laya-route=...; content-encoding=...`, or None when the content coding cannot be passed on safely."""
    coding = headers.get("content-encoding", "").strip()
    if coding and not _CODING.match(coding):
        return None
    return "laya-route=%s" % route + ("; content-encoding=%s" % coding if coding else "")


def _model_error(response: dict[str, Any]) -> dict[str, Any]:
    status = int(response.get("OriginalStatusCode") or 502)
    message = response.get("OriginalMessage") or json.dumps({"detail": "the GPU endpoint failed"})
    return answer(status, message)


def handler(event: dict[str, Any], _context: Any, client: Any = None) -> dict[str, Any]:
    route = route_of(event)
    if route is None:
        return detail(404, "Not Found")
    headers = {str(k).lower(): str(v) for k, v in (event.get("headers") or {}).items()}
    attributes = attributes_of(route, headers)
    if attributes is None:
        return detail(415, "unsupported Content-Encoding %r; send zstd or an uncompressed body"
                      % headers.get("content-encoding"))
    raw = event.get("body") or ""
    body = base64.b64decode(raw) if event.get("isBase64Encoded") else str(raw).encode("utf-8")
    from botocore.exceptions import BotoCoreError, ClientError

    component = os.environ.get(COMPONENT_ENV)
    target = {"EndpointName": os.environ[ENDPOINT_ENV], **({"InferenceComponentName": component} if component else {})}
    try:
        reply = (client or _sagemaker()).invoke_endpoint(
            **target, ContentType="application/json", Accept="application/json",
            CustomAttributes=attributes, Body=body or b"{}")
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "ModelError":
            return _model_error(exc.response)
        print("InvokeEndpoint failed: %s" % exc.response.get("Error", {}).get("Code"))
        return detail(503, "the GPU endpoint is not available; try again later")
    except BotoCoreError as exc:
        print("InvokeEndpoint failed: %s" % type(exc).__name__)
        return detail(503, "the GPU endpoint is not available; try again later")
    return answer(200, reply["Body"].read(), reply.get("ContentType") or "application/json")
