"""The local front's API Gateway events: what Mangum reads from each payload format."""

from __future__ import annotations

import base64

import pytest

from laya_serverless.local_edge.start_api import ApiGatewayFront, http_api_event, rest_api_event

HEADERS = [(b"Authorization", b"Bearer k"), (b"X-Many", b"a"), (b"X-Many", b"b"), (b"User-Agent", b"curl/8")]


def test_rest_api_events_carry_method_path_query_headers_and_body() -> None:
    event = rest_api_event("POST", "/v1/systemone", "a=1&a=2&b=", HEADERS, b'{"x": 1}')
    assert (event["httpMethod"], event["path"], event["resource"]) == ("POST", "/v1/systemone", "/{proxy+}")
    assert event["multiValueHeaders"]["x-many"] == ["a", "b"] and event["headers"]["authorization"] == "Bearer k"
    assert event["multiValueQueryStringParameters"] == {"a": ["1", "2"], "b": [""]}
    assert base64.b64decode(event["body"]) == b'{"x": 1}' and event["isBase64Encoded"] is True
    assert event["requestContext"]["identity"]["userAgent"] == "curl/8" and "version" not in event


def test_rest_api_events_without_a_query_have_none() -> None:
    event = rest_api_event("GET", "/health", "", [], b"")
    assert event["queryStringParameters"] is None and event["multiValueQueryStringParameters"] is None


def test_http_api_events_join_repeated_headers() -> None:
    event = http_api_event("GET", "/health", "", HEADERS, b"")
    assert event["version"] == "2.0" and event["headers"]["x-many"] == "a,b"
    assert event["requestContext"]["http"]["method"] == "GET"


def test_an_unknown_payload_version_is_refused() -> None:
    with pytest.raises(ValueError, match="payload must be one of v1, v2"):
        ApiGatewayFront(lambda event, context: {}, payload="v3")
