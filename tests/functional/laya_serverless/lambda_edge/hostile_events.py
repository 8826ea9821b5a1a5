"""Lambda events a deployed function may be handed, well formed or not, built from the saved API Gateway
events: what each must get back. `answer` is one of "ok" (a 2xx), "refused" (a 4xx with a JSON
`detail`), "unsupported" (not HTTP: the unsupported_event result) and "warm" (a warm-up ping)."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

from tests.paths import EVENTS


def saved(name: str) -> dict[str, Any]:
    return json.loads((EVENTS / name).read_text())


V2 = saved("http-api-v2-systemone.json")
V2_HEALTH = saved("http-api-v2-health.json")
V1 = dict(saved("rest-v1-systemone-base64-base-path.json"), path="/v1/systemone")
BODY = V2["body"]


def v2(**changes: Any) -> dict[str, Any]:
    return {**copy.deepcopy(V2), **changes}


def v1(**changes: Any) -> dict[str, Any]:
    return {**copy.deepcopy(V1), **changes}


def v2_http(**changes: Any) -> dict[str, Any]:
    event = copy.deepcopy(V2)
    event["requestContext"]["http"].update(changes)
    return event


ALB_HEALTH = {"requestContext": {"elb": {"targetGroupArn": "arn:aws:elasticloadbalancing:eu-west-1:1:targetgroup/x"}},
              "httpMethod": "GET", "path": "/health", "queryStringParameters": {}, "headers": {"host": "lb"},
              "body": "", "isBase64Encoded": False}

NOT_HTTP: list[tuple[str, Any]] = [
    ("sqs", {"Records": [{"messageId": "1", "body": "{}", "eventSource": "aws:sqs"}]}),
    ("s3", {"Records": [{"eventSource": "aws:s3", "s3": {"bucket": {"name": "b"}, "object": {"key": "k"}}}]}),
    ("sns", {"Records": [{"EventSource": "aws:sns", "Sns": {"Message": "hi"}}]}),
    ("dynamodb", {"Records": [{"eventSource": "aws:dynamodb", "dynamodb": {}}]}),
    ("kinesis", {"Records": [{"eventSource": "aws:kinesis", "kinesis": {"data": "eA=="}}]}),
    ("cloudfront", {"Records": [{"cf": {"request": {"uri": "/"}}}]}),
    ("records-empty", {"Records": []}),
    ("records-string", {"Records": "x"}),
    ("eventbridge-schedule", {"source": "aws.events", "detail-type": "Scheduled Event", "detail": {}}),
    ("eventbridge-custom", {"source": "my.app", "detail-type": "Job", "detail": {"id": 1}}),
    ("cloudwatch-logs", {"awslogs": {"data": "H4sI"}}),
    ("empty", {}),
    ("job-like", {"job_id": "j-1", "states": ["a"], "questions": {}}),
    ("step-functions", {"input": {"state": "x"}, "token": "t"}),
    ("cognito", {"triggerSource": "PreSignUp_SignUp", "request": {}}),
    ("none", None), ("int", 5), ("float", 2.5), ("bool", True), ("string", "GET /health"),
    ("list", [V2]), ("empty-list", []), ("bytes-like-string", "\ud800"),
]
WARM: list[tuple[str, Any]] = [
    ("warmer", {"warmer": True, "concurrency": 1}),
    ("serverless-plugin-warmup", {"source": "serverless-plugin-warmup"}),
]
MALFORMED_HTTP: list[tuple[str, Any]] = [
    ("v2-no-http", v2(requestContext={"requestId": "r"})),
    ("v2-context-null", v2(requestContext=None)),
    ("v2-context-list", v2(requestContext=[1])),
    ("v2-method-int", v2_http(method=5)),
    ("v2-path-missing", v2_http(path=None)),
    ("v2-headers-list", v2(headers=[["a", "b"]])),
    ("v2-header-int", v2(headers={"host": 5})),
    ("v2-header-surrogate", v2(headers={"x-note": "\ud800"})),
    ("v2-header-name-surrogate", v2(headers={"\udcff": "x"})),
    ("v2-body-int", v2(body=5)),
    ("v2-body-dict", v2(body={"state": "x"})),
    ("v2-base64-garbage", v2(body="%%%not base64%%%", isBase64Encoded=True)),
    ("v2-base64-non-ascii", v2(body="é", isBase64Encoded=True)),
    ("v2-cookies-string", v2(cookies="a=b")),
    ("v2-query-int", v2(rawQueryString=5)),
    ("v2-bad-host-port", v2(headers={"host": "a:b"})),
    ("v2-host-colons", v2(headers={"host": "a:1:2"})),
    ("v2-forwarded-port", v2(headers={"host": "a", "x-forwarded-port": "eighty"})),
    ("v2-truncated", {"version": "2.0", "requestContext": {"http": {}}}),
    ("v1-no-method", {k: v for k, v in V1.items() if k != "httpMethod"}),
    ("v1-no-path", {k: v for k, v in V1.items() if k != "path"}),
    ("v1-path-int", v1(path=7)),
    ("v1-multi-header-string", v1(multiValueHeaders={"host": "a"})),
    ("v1-query-int", v1(queryStringParameters={"a": 1})),
    ("v1-multi-query-string", v1(multiValueQueryStringParameters={"a": "b"})),
    ("v1-base64-garbage", v1(body="!!!!", isBase64Encoded=True)),
    ("v1-identity-string", v1(requestContext={"identity": "x"})),
    ("v1-truncated-resource", {"resource": "/"}),
    ("v1-truncated-method", {"httpMethod": "GET"}),
    ("v1-route-key-only", {"routeKey": "$default"}),
    ("alb-no-path", {k: v for k, v in ALB_HEALTH.items() if k != "path"}),
]
# Well formed events whose request the app itself refuses with the protocol's 4xx.
REFUSED_BY_APP: list[tuple[str, Any]] = [
    ("v2-body-lone-surrogate", v2(body='{"state": "\ud800", "questions": {}}')),
    ("v2-not-json", v2(body="{")),
    ("v1-empty-body", v1(body=None, isBase64Encoded=False)),
    ("v2-zstd-garbage", v2(headers={"content-encoding": "zstd"}, body=base64.b64encode(b"xx").decode(),
                           isBase64Encoded=True)),
    ("v2-unknown-path", v2_http(path="/nope")),
    ("v2-wrong-method", v2_http(method="DELETE")),
]
OK: list[tuple[str, Any]] = [
    ("v2-systemone", v2()), ("v2-health", copy.deepcopy(V2_HEALTH)), ("v1-systemone", v1()),
    ("v1-health", v1(path="/health", httpMethod="GET", body=None, isBase64Encoded=False)),
    ("alb-health", copy.deepcopy(ALB_HEALTH)), ("v1-payload-1.0", v1(version="1.0")),
]

ALL: list[tuple[str, Any, str]] = (
    [(n, e, "unsupported") for n, e in NOT_HTTP] + [(n, e, "warm") for n, e in WARM]
    + [(n, e, "refused") for n, e in MALFORMED_HTTP + REFUSED_BY_APP] + [(n, e, "ok") for n, e in OK])
