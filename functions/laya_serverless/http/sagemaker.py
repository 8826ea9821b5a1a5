"""The SageMaker container contract beside the Jev routes: `GET /ping` and `POST /invocations`.

SageMaker probes `/ping` (200 when ready, within 2 s) and sends every InvokeEndpoint body to
`/invocations`, with no path and no headers of the caller's but `X-Amzn-SageMaker-Custom-Attributes`.
So `/invocations` is `/v1/systemone` by default, and the custom attributes (`key=value` pairs
separated by `;`) choose another route (`laya-route=batch` or `health`) and carry the body's
`content-encoding` (the official client zstd-compresses bodies). Both routes exist in every
deployment of the app: they are cheap aliases, and the contract is testable without a container.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, Request
from fastapi.responses import JSONResponse, Response

from ..errors import MalformedRequest, NotReady, Unauthenticated
from .routes import Authorization, ServingDep, health, systemone, systemone_batch
from .statuses import refusal_response

router = APIRouter()
CustomAttributes = Annotated[str | None, Header(alias="X-Amzn-SageMaker-Custom-Attributes")]
ROUTE, ENCODING = "laya-route", "content-encoding"
ROUTES = ("systemone", "batch", "health")


def custom_attributes(text: str | None) -> dict[str, str]:
    """`k=v; k2=v2` as a dict (keys lower-cased); a pair without `=` is refused, not guessed at."""
    pairs: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in (text or "").split(";"))):
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise MalformedRequest("X-Amzn-SageMaker-Custom-Attributes must be key=value pairs separated by ';'")
        pairs[key.strip().lower()] = value.strip()
    return pairs


def _with_encoding(request: Request, encoding: str | None) -> Request:
    """The request as the Jev routes read it, with the content coding the proxy could only pass as an attribute."""
    if not encoding:
        return request
    headers = [(k, v) for k, v in request.scope["headers"] if k.lower() != b"content-encoding"]
    headers.append((b"content-encoding", encoding.encode("latin-1", "replace")))
    return Request(dict(request.scope, headers=headers), request.receive)


@router.get("/ping")
def ping(serve: ServingDep) -> Response:
    """200 once the deployment loaded; 503 with the reason otherwise (a refused GPU, missing artifacts)."""
    if serve.deployment is None:
        return refusal_response(NotReady(serve.unavailable or "not ready"))
    return JSONResponse({"status": "ok"})


@router.post("/invocations")
async def invocations(request: Request, serve: ServingDep, authorization: Authorization = None,
                      attributes: CustomAttributes = None) -> Any:
    """A Jev `/v1/systemone` body, answered exactly as that route answers it (or the route the attributes name).
    Without a valid bearer, a malformed attribute header is a 401, not a 400: nothing is parsed for a stranger
    beyond what routes to the open health answer."""
    try:
        chosen = custom_attributes(attributes)
        route = chosen.get(ROUTE, "systemone").lower()
        if route not in ROUTES:
            raise MalformedRequest("unknown %s %r; one of %s" % (ROUTE, route, ", ".join(ROUTES)))
    except MalformedRequest:
        if not serve.authorized(authorization):
            raise Unauthenticated("invalid or missing bearer token") from None
        raise
    if route == "health":
        return health(serve, authorization)
    request = _with_encoding(request, chosen.get(ENCODING))
    if route == "batch":
        return await systemone_batch(request, serve, authorization)
    return await systemone(request, serve, authorization)
