"""What a Lambda event is, before Mangum sees it, and a clean copy of it when it is an HTTP request.

`classify` names an event: an HTTP request (API Gateway REST payload 1.0, HTTP API 1.0 or 2.0, an
ALB), a warm-up ping, or something this function does not serve (SQS, S3, SNS, EventBridge, a
job, a string...). `clean_http_event` rebuilds an HTTP event from only the fields Mangum reads,
each checked for its type and for text that can be encoded: a truncated or hostile event becomes
`MalformedEvent` (answered 400) instead of a KeyError, a base64 or a UnicodeEncodeError inside
Mangum. Bodies are decoded here (base64 strictly; a text body with a lone surrogate is kept as
its `surrogatepass` bytes, which the app then refuses with the protocol's own 400).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import MalformedEvent

REST, HTTP_V2, ALB = "apigateway-rest", "apigateway-http", "alb"
HTTP_SOURCES = (REST, HTTP_V2, ALB)
WARMUP = "warmup"
_WARMUP_KEYS = ("warmer", "warmup", "keep_warm")
_WARMUP_SOURCES = ("serverless-plugin-warmup", "laya-serverless.warmup")


@dataclass(frozen=True)
class EventKind:
    source: str  # one of HTTP_SOURCES, WARMUP, or what the event says it is (aws:sqs, aws.events, ...)

    @property
    def http(self) -> bool:
        return self.source in HTTP_SOURCES


def _records_source(records: Any) -> str:
    first = records[0] if isinstance(records, list) and records else None
    if not isinstance(first, Mapping):
        return "records"
    if "cf" in first:
        return "cloudfront"
    found = first.get("eventSource") or first.get("EventSource")
    return found if isinstance(found, str) and found else "records"


def classify(event: Any) -> EventKind:
    """Which kind of invocation `event` is; never raises."""
    if not isinstance(event, Mapping):
        return EventKind("not-an-object:%s" % type(event).__name__)
    if not event:
        return EventKind("empty")
    if any(event.get(key) for key in _WARMUP_KEYS) or event.get("source") in _WARMUP_SOURCES:
        return EventKind(WARMUP)
    if "requestContext" in event:
        context = event["requestContext"]
        if isinstance(context, Mapping) and "elb" in context:
            return EventKind(ALB)
        return EventKind(HTTP_V2 if event.get("version") == "2.0" else REST)
    if "httpMethod" in event or "resource" in event or "routeKey" in event:
        return EventKind(HTTP_V2 if event.get("version") == "2.0" else REST)  # truncated: no requestContext
    if "Records" in event:
        return EventKind(_records_source(event["Records"]))
    if isinstance(event.get("source"), str) and "detail-type" in event:
        return EventKind("eventbridge:%s" % event["source"])
    return EventKind("unknown")


def _text(value: Any, where: str, *, required: bool = True) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value):
        raise MalformedEvent("malformed event: %s must be a non-empty string" % where)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise MalformedEvent("malformed event: %s is not valid UTF-8 text" % where) from None
    return value


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise MalformedEvent("malformed event: %s must be an object" % where)
    return value


def _headers(event: Mapping[str, Any]) -> dict[str, str]:
    """Single- and multi-value headers merged (lower-cased names; repeated values joined with ", ")."""
    merged = {_text(k, "a header name").lower(): _text(v, "header %r" % k, required=False)
              for k, v in _mapping(event.get("headers"), "headers").items()}
    for name, values in _mapping(event.get("multiValueHeaders"), "multiValueHeaders").items():
        if not isinstance(values, list):
            raise MalformedEvent("malformed event: multiValueHeaders[%r] must be a list" % name)
        merged[_text(name, "a header name").lower()] = ", ".join(
            _text(v, "header %r" % name, required=False) for v in values)
    host = merged.get("host", "")
    if host.count(":") > 1 or (":" in host and not host.rpartition(":")[2].isdigit()):
        raise MalformedEvent("malformed event: the Host header is not host[:port]")
    if "x-forwarded-port" in merged and not merged["x-forwarded-port"].isdigit():
        raise MalformedEvent("malformed event: X-Forwarded-Port is not a port number")
    return merged


def _query(event: Mapping[str, Any]) -> dict[str, list[str]]:
    query: dict[str, list[str]] = {}
    for key, value in _mapping(event.get("queryStringParameters"), "queryStringParameters").items():
        query[_text(key, "a query name")] = [_text(value, "query %r" % key, required=False)]
    multi = _mapping(event.get("multiValueQueryStringParameters"), "multiValueQueryStringParameters")
    for key, values in multi.items():
        if not isinstance(values, list):
            raise MalformedEvent("malformed event: multiValueQueryStringParameters[%r] must be a list" % key)
        query[_text(key, "a query name")] = [_text(v, "query %r" % key, required=False) for v in values]
    return query


def event_body(event: Mapping[str, Any]) -> bytes:
    """The request body as bytes: strict base64 when flagged, else the text as UTF-8 (surrogatepass)."""
    body = event.get("body")
    if body is None or body == "":
        return b""
    if not isinstance(body, str):
        raise MalformedEvent("malformed event: body must be a string or null")
    if event.get("isBase64Encoded") is True:
        try:
            return base64.b64decode(body.encode("ascii"), validate=True)
        except (UnicodeEncodeError, binascii.Error, ValueError):
            raise MalformedEvent("malformed event: the body is flagged base64 but is not valid base64") from None
    return body.encode("utf-8", "surrogatepass")


def _http_v2(event: Mapping[str, Any]) -> dict[str, Any]:
    context = _mapping(event.get("requestContext"), "requestContext")
    http = _mapping(context.get("http"), "requestContext.http")
    cookies = event.get("cookies") or []
    if not isinstance(cookies, list):
        raise MalformedEvent("malformed event: cookies must be a list")
    return {
        "version": "2.0", "rawQueryString": _text(event.get("rawQueryString"), "rawQueryString", required=False),
        "headers": _headers({"headers": event.get("headers")}),
        "cookies": [_text(c, "a cookie") for c in cookies],
        "requestContext": {**context, "http": {
            "method": _text(http.get("method"), "requestContext.http.method"),
            "path": _text(http.get("path"), "requestContext.http.path"),
            "sourceIp": _text(http.get("sourceIp"), "requestContext.http.sourceIp", required=False)}},
        "body": event_body(event), "isBase64Encoded": False,
    }


def _rest_or_alb(event: Mapping[str, Any], alb: bool) -> dict[str, Any]:
    context = _mapping(event.get("requestContext"), "requestContext")
    identity = _mapping(context.get("identity"), "requestContext.identity")
    headers = _headers(event)
    cleaned: dict[str, Any] = {
        "httpMethod": _text(event.get("httpMethod"), "httpMethod"),
        "path": _text(event.get("path"), "path"),
        "headers": headers, "multiValueQueryStringParameters": _query(event),
        "body": event_body(event), "isBase64Encoded": False,
    }
    if alb:
        return {**cleaned, "requestContext": {"elb": context.get("elb")}}
    source_ip = _text(identity.get("sourceIp"), "requestContext.identity.sourceIp", required=False)
    return {**cleaned, "resource": event.get("resource") if isinstance(event.get("resource"), str) else "/{proxy+}",
            "requestContext": {**context, "identity": {**identity, "sourceIp": source_ip}}}


def clean_http_event(event: Mapping[str, Any], kind: EventKind) -> dict[str, Any]:
    """A copy of an HTTP `event` holding only well-typed, encodable fields, or `MalformedEvent`."""
    if kind.source == HTTP_V2:
        return _http_v2(event)
    return _rest_or_alb(event, alb=kind.source == ALB)


def http_answer(kind: EventKind, status: int, body: bytes, headers: Mapping[str, str]) -> dict[str, Any]:
    """An answer in the shape the event's source expects, for what the guard says itself."""
    answer: dict[str, Any] = {"statusCode": status, "headers": dict(headers), "body": body.decode("utf-8"),
                              "isBase64Encoded": False}
    if kind.source == ALB:
        answer["statusDescription"] = "%d %s" % (status, "Bad Request" if status == 400 else "Error")
    elif kind.source == REST:
        answer["multiValueHeaders"] = {}
    return answer
