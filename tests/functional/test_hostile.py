"""Hostile-input tier: generated requests and Lambda events against the app (default and strict) and the
real Lambda handler. The property: never a 5xx, never a raise, and every 4xx carries a JSON `detail`.

Bounded and repeatable: a fixed number of examples per property (`EXAMPLES`), derandomized, no
example database, no deadline (the suite shares two cores). docs/operations.md has the counts.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from laya_serverless.handler import lambda_handler
from laya_serverless.http.app import create_app
from laya_serverless.local import lambda_context
from laya_serverless.protocol.routing import Registry
from laya_serverless.settings import Settings
from tests.functional import hostile_events
from tests.functional.test_app_fast import fake_decider

EXAMPLES = 120
BOUNDED = settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

_text = st.one_of(st.text(max_size=20), st.sampled_from(["", " ", "\ud800", "[MASK]", "é" * 3, "\x00", "jev-latest"]))
_scalar = st.one_of(st.none(), st.booleans(), st.integers(min_value=-10**400, max_value=10**400),
                    st.floats(allow_nan=True, allow_infinity=True), _text)
_json = st.recursive(_scalar, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                      st.dictionaries(_text, inner, max_size=4)), max_leaves=12)
_question = st.fixed_dictionaries({"type": st.sampled_from(["choice", "score", "noul", "box", 3, None])}, optional={
    "instructions": _json, "criteria": _json, "labels": _json, "option_order": _json})
_field = st.sampled_from(["state", "states", "questions", "model", "task", "lang", "lang_guess", "max_len",
                          "head_max_len", "min_confidence", "batch_size", "sort_by_length", "diagnostics", "hooks"])
_request = st.builds(lambda state, questions, extra: {"state": state, "questions": questions, **extra},
                     _json, st.dictionaries(_text, st.one_of(_question, _json), max_size=3),
                     st.dictionaries(_field, _json, max_size=4))
_body = st.one_of(_request.map(lambda r: json.dumps(r, ensure_ascii=False).encode("utf-8", "surrogatepass")),
                  st.binary(max_size=64), _json.map(lambda v: json.dumps(v).encode()))
_encoding = st.sampled_from([None, "zstd", "gzip", "identity", "zstd, gzip", "\x7f"])


HANDLERS: dict[str, Any] = {}


@pytest.fixture(scope="module", autouse=True)
def event_loop_for_mangum() -> Iterator[None]:
    """Mangum drives the app on this thread's loop (created here, so it is closed, not garbage-collected)."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    HANDLERS["lambda"] = lambda_handler(_app(False), Settings(api_key="k3y"))
    yield
    HANDLERS.clear()
    asyncio.set_event_loop(None)
    loop.close()


def _app(strict: bool) -> Any:
    chosen = Settings(jev_strict=strict, api_key="k3y")
    return create_app({"english": fake_decider([1.5, 0.5, 0.25, 2.0])}, chosen, registry=Registry())


CLIENTS = {strict: TestClient(_app(strict), raise_server_exceptions=False) for strict in (False, True)}
AUTH = {"Authorization": "Bearer k3y"}


def _check(status: int, raw: bytes, strict: bool = False) -> None:
    assert status < 500, (status, raw[:300])
    if status >= 400:
        detail = json.loads(raw)["detail"]
        assert isinstance(detail, (list, dict) if strict else str) and detail


@pytest.mark.parametrize("strict", [False, True], ids=["default", "strict"])
@pytest.mark.parametrize("path", ["/v1/systemone", "/v1/systemone/batch"])
@BOUNDED
@given(body=_body, encoding=_encoding)
def test_generated_requests_never_get_a_5xx(strict: bool, path: str, body: bytes, encoding: str | None) -> None:
    headers = dict(AUTH, **({"Content-Encoding": encoding} if encoding else {}))
    response = CLIENTS[strict].post(path, content=body, headers=headers)
    _check(response.status_code, response.content, strict)


def _mutated(event: dict[str, Any], path: list[str], value: Any, delete: bool) -> dict[str, Any]:
    mutated = copy.deepcopy(event)
    target = mutated
    for key in path[:-1]:
        if not isinstance(target.get(key), dict):
            return mutated
        target = target[key]
    if delete:
        target.pop(path[-1], None)
    else:
        target[path[-1]] = value
    return mutated


_PATHS = st.sampled_from([["body"], ["headers"], ["headers", "host"], ["headers", "authorization"],
                          ["headers", "content-encoding"], ["isBase64Encoded"], ["requestContext"],
                          ["requestContext", "http"], ["requestContext", "http", "method"],
                          ["requestContext", "http", "path"], ["rawQueryString"], ["cookies"], ["version"],
                          ["httpMethod"], ["path"], ["multiValueHeaders"], ["queryStringParameters"]])
_EVENTS = st.sampled_from([hostile_events.V2, hostile_events.V2_HEALTH, hostile_events.V1, hostile_events.ALB_HEALTH])


@BOUNDED
@given(event=_EVENTS, path=_PATHS, value=st.one_of(_json, _body.map(lambda b: base64.b64encode(b).decode())),
       delete=st.booleans())
def test_mutated_lambda_events_are_always_answered(event: dict[str, Any], path: list[str], value: Any,
                                                   delete: bool) -> None:
    answer = HANDLERS["lambda"](_mutated(event, path, value, delete), lambda_context())
    assert isinstance(answer, dict)
    if "statusCode" in answer:
        raw = base64.b64decode(answer["body"]) if answer.get("isBase64Encoded") else answer["body"].encode()
        _check(answer["statusCode"], raw)


@BOUNDED
@given(event=_json)
def test_arbitrary_json_events_are_always_answered(event: Any) -> None:
    answer = HANDLERS["lambda"](event, lambda_context())
    assert isinstance(answer, dict)
    assert answer.get("statusCode", 400) < 500
