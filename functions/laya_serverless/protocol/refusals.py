"""What a failure during inference is refused as, for the app and the jobs worker alike (`http/statuses.py`
maps refusals to HTTP statuses; nothing here knows HTTP)."""

from __future__ import annotations

import logging

from ..errors import InferenceFailed, InvalidRequest, QuestionError, RequestError, StateError

_log = logging.getLogger("laya_serverless")


def refusal_from(error: Exception, model: object) -> RequestError:
    """A caller's `ValueError` is an `InvalidRequest` with its message (and, from our own, its location and kind);
    a `RequestError` stands; anything else is logged with its traceback and refused as a bare `InferenceFailed`
    (no paths, no weights)."""
    if isinstance(error, RequestError):
        return error
    if isinstance(error, QuestionError | StateError):
        return InvalidRequest.from_error(error)
    if isinstance(error, ValueError):
        return InvalidRequest(str(error))
    _log.error("inference failed for model=%s", str(model).replace("\n", "\\n").replace("\r", "\\r"),
               exc_info=error)
    return InferenceFailed("inference failed")
