"""The Lambda handler that answers every event it is given, and never raises.

- An HTTP event (API Gateway REST or HTTP API, ALB) is cleaned (`events.clean_http_event`) and
  handed to Mangum; a malformed one is answered 400 with a JSON `detail` in the source's shape.
- A warm-up ping is answered `{"warm": true}`.
- Anything else (SQS, S3, SNS, EventBridge, a job, `{}`, a string, a list, None...) is not ours to
  serve: it gets a logged, one-line `unsupported_event` result. Returning instead of raising is
  on purpose: Lambda retries (and dead-letters) async events whose handler raised, and no retry
  can make this function serve an S3 notification.
- A failure of ours past all that is logged with its traceback and answered 500, still JSON.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from ..errors import MalformedEvent
from ..http import request_id
from ..http.statuses import refusal_response
from .api_events import EventKind, classify, clean_http_event, http_answer

_log = logging.getLogger("laya_serverless")
Adapter = Callable[[dict[str, Any], Any], dict[str, Any]]


def _sent_id(event: Any) -> str:
    headers = event.get("headers") if isinstance(event, dict) else None
    if not isinstance(headers, dict):
        return request_id.new_id()
    sent = next((v for k, v in headers.items() if isinstance(k, str) and k.lower() == request_id.HEADER), None)
    return request_id.chosen(sent)


def _access_log(kind: EventKind, cleaned: dict[str, Any], answer: dict[str, Any]) -> None:
    """One line per HTTP event: method, path, status, and the request id the answer carries."""
    http = cleaned.get("requestContext", {}).get("http") or cleaned
    headers = answer.get("headers") or {}
    _log.info("%s %s -> %s", http.get("httpMethod") or http.get("method"), http.get("path"), answer.get("statusCode"),
              extra={"request_id": headers.get(request_id.HEADER), "event_source": kind.source})


class GuardedHandler:
    """`handler(event, context)` over an ASGI adapter (Mangum) that must only ever see clean HTTP events."""

    def __init__(self, adapter: Adapter, strict: bool = False) -> None:
        self.adapter, self.strict = adapter, strict

    def __call__(self, event: Any, context: Any) -> dict[str, Any]:
        kind = classify(event)
        if kind.source == "warmup":
            _log.info("warm-up ping answered")
            return {"warm": True}
        if not kind.http:
            return self._not_served(kind)
        try:
            cleaned = clean_http_event(event, kind)
        except MalformedEvent as refused:
            return self._refuse(kind, refused, _sent_id(event))
        try:
            answer = self.adapter(cleaned, context)
        except Exception:  # a defect of ours: logged with its traceback, answered as JSON, never raised
            _log.exception("the %s event could not be answered", kind.source)
            return self._answer(kind, 500, {"detail": "internal error"}, _sent_id(event))
        _access_log(kind, cleaned, answer)
        return answer

    def _not_served(self, kind: EventKind) -> dict[str, Any]:
        message = ("this function answers HTTP requests (API Gateway, ALB); a %s event is not one, so it was "
                   "dropped without a retry" % kind.source)
        _log.error("unsupported event dropped: %s", kind.source)
        return {"ok": False, "error": "unsupported_event", "source": kind.source, "message": message}

    def _refuse(self, kind: EventKind, error: MalformedEvent, sent: str) -> dict[str, Any]:
        _log.warning("malformed %s event refused: %s", kind.source, error.detail)
        response = refusal_response(error, self.strict)
        return self._answer(kind, response.status_code, json.loads(bytes(response.body)), sent)

    @staticmethod
    def _answer(kind: EventKind, status: int, payload: Any, sent: str) -> dict[str, Any]:
        body = json.dumps(payload, ensure_ascii=True, separators=(",", ":")).encode()
        return http_answer(kind, status, body, {"content-type": "application/json", request_id.HEADER: sent})
