"""Where errors become HTTP answers: the status of each refusal, and what an inference failure turns into.

Every non-2xx the app produces is `{"detail": "<text>"}`; the 503s carry
`Retry-After: 1`. In strict Jev mode a malformed body is a 422 like every other validation
failure, and bodies take the Jev shapes (`strict.error_body`). Each refusal class declares its
own status (`laya_serverless.errors`); this module only reads it, and nothing else chooses a status code.
"""

from __future__ import annotations

from fastapi import Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from .. import observe
from ..errors import NotReady, Overloaded, RequestError
from ..protocol import strict as strict_shapes


def status_of(error: RequestError, strict: bool = False) -> int:
    """The refusal's own status (`RequestError.status`), or its strict one in strict Jev mode."""
    return error.strict_status if strict and error.strict_status is not None else error.status


def refusal_response(error: RequestError, strict: bool = False) -> JSONResponse:
    headers = {"Retry-After": "1"} if error.retry_later else None
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
