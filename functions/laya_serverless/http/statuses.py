"""Where errors become HTTP answers: the status of each refusal, and what an inference failure turns into.

Every non-2xx the app produces is `{"detail": "<text>"}`; the 503s carry
`Retry-After: 1`. In strict Jev mode a malformed body is a 422 like every other validation
failure, and bodies take the Jev shapes (`strict.error_body`). Nothing else in the package
chooses a status code.
"""

from __future__ import annotations

from fastapi import Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from .. import observe
from ..errors import (
    BodyTimeout,
    ClientDisconnected,
    Conflict,
    DeviceOutOfMemory,
    InferenceFailed,
    InvalidRequest,
    MalformedEvent,
    MalformedRequest,
    NotFound,
    NotReady,
    Overloaded,
    RequestError,
    TooLarge,
    Unauthenticated,
    UnsupportedEncoding,
)
from ..protocol import strict as strict_shapes

STATUSES: dict[type[RequestError], int] = {
    MalformedRequest: 400,
    MalformedEvent: 400,
    ClientDisconnected: 400,  # never read by anyone; 400 rather than nginx's non-standard 499
    Unauthenticated: 401,
    NotFound: 404,
    BodyTimeout: 408,
    Conflict: 409,
    TooLarge: 413,
    UnsupportedEncoding: 415,
    InvalidRequest: 422,
    InferenceFailed: 500,
    Overloaded: 503,
    DeviceOutOfMemory: 503,
    NotReady: 503,
}
# The Jev contract answers every body validation failure with 422; upstream says 400 for the shape ones.
STRICT_STATUSES: dict[type[RequestError], int] = {MalformedEvent: 400, MalformedRequest: 422}
_RETRY_LATER = (Overloaded, NotReady)


def status_of(error: RequestError, strict: bool = False) -> int:
    for kind in type(error).__mro__:
        if strict and kind in STRICT_STATUSES:
            return STRICT_STATUSES[kind]
        if kind in STATUSES:
            return STATUSES[kind]
    return 500


def refusal_response(error: RequestError, strict: bool = False) -> JSONResponse:
    headers = {"Retry-After": "1"} if isinstance(error, _RETRY_LATER) else None
    body = strict_shapes.error_body(error) if strict else {"detail": error.detail}
    return JSONResponse(body, status_code=status_of(error, strict), headers=headers)


def _strict(request: Request) -> bool:
    serve = getattr(request.app.state, "serving", None)
    return bool(serve is not None and serve.settings.protocol.jev_strict)


async def handle_refusal(request: Request, error: Exception) -> JSONResponse:
    """The app's exception handler for every `RequestError`."""
    assert isinstance(error, RequestError)
    if isinstance(error, Overloaded):
        observe.metric(observe.ADMISSION_REFUSALS)
    elif isinstance(error, NotReady):
        observe.metric(observe.NOT_READY)
    return refusal_response(error, _strict(request))


async def handle_framework_error(request: Request, error: Exception) -> Response:
    """Starlette's own 404/405 (and the docs' errors): upstream's bodies, or Jev's shape in strict mode."""
    assert isinstance(error, StarletteHTTPException)
    if not _strict(request):
        return await http_exception_handler(request, error)
    kind = {404: "not_found", 405: "method_not_allowed"}.get(error.status_code, "api_error")
    return JSONResponse({"detail": {"error_type": kind, "message": str(error.detail)}}, status_code=error.status_code,
                        headers=error.headers)
