"""Where errors become HTTP answers: the status of each refusal, and what an inference failure turns into.

Every non-2xx the app produces is `{"detail": "<text>"}` (protocol §2.1); the 503s carry
`Retry-After: 1`. Nothing else in the package chooses a status code.
"""

from __future__ import annotations

import logging

from fastapi import Request
from fastapi.responses import JSONResponse

from ..errors import (
    BodyTimeout,
    Conflict,
    InferenceFailed,
    InvalidRequest,
    MalformedRequest,
    NotFound,
    NotReady,
    Overloaded,
    RequestError,
    TooLarge,
    Unauthenticated,
    UnsupportedEncoding,
)

_log = logging.getLogger("laya_serverless")

STATUSES: dict[type[RequestError], int] = {
    MalformedRequest: 400,
    Unauthenticated: 401,
    NotFound: 404,
    BodyTimeout: 408,
    Conflict: 409,
    TooLarge: 413,
    UnsupportedEncoding: 415,
    InvalidRequest: 422,
    InferenceFailed: 500,
    Overloaded: 503,
    NotReady: 503,
}
_RETRY_LATER = (Overloaded, NotReady)


def status_of(error: RequestError) -> int:
    for kind in type(error).__mro__:
        if kind in STATUSES:
            return STATUSES[kind]
    return 500


def refusal_from(error: Exception, model: object) -> RequestError:
    """What a failure during inference answers: a caller's `ValueError` is a 422 with its message;
    anything else is logged with its traceback and answered as a bare 500 (no paths, no weights)."""
    if isinstance(error, RequestError):
        return error
    if isinstance(error, ValueError):
        return InvalidRequest(str(error))
    _log.error("inference failed for model=%s", str(model).replace("\n", "\\n").replace("\r", "\\r"),
               exc_info=error)
    return InferenceFailed("inference failed")


def refusal_response(error: RequestError) -> JSONResponse:
    headers = {"Retry-After": "1"} if isinstance(error, _RETRY_LATER) else None
    return JSONResponse({"detail": error.detail}, status_code=status_of(error), headers=headers)


async def handle_refusal(_request: Request, error: Exception) -> JSONResponse:
    """The app's exception handler for every `RequestError`."""
    assert isinstance(error, RequestError)
    return refusal_response(error)
