"""The real Lambda handler (guard + Mangum + app on fake deciders) answers every event, never raises."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from laya_serverless.http.app import create_app
from laya_serverless.http.request_id import HEADER
from laya_serverless.lambda_edge.api_handler import lambda_handler
from laya_serverless.lambda_edge.guard import GuardedHandler
from laya_serverless.local_edge.start_api import lambda_context
from laya_serverless.protocol.routing import Registry
from laya_serverless.settings import Settings
from tests.functional.laya_serverless.http.test_app_fast import fake_decider
from tests.functional.laya_serverless.lambda_edge import hostile_events


@pytest.fixture(scope="module", autouse=True)
def event_loop_for_mangum() -> Iterator[None]:
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    yield
    asyncio.set_event_loop(None)
    loop.close()


def guarded(**settings: Any) -> GuardedHandler:
    chosen = Settings.of(**settings)
    app = create_app({"english": fake_decider([2.0, 0.0, 1.0])}, chosen, registry=Registry())
    return lambda_handler(app, chosen)


HANDLER = None


def handler() -> GuardedHandler:
    global HANDLER
    if HANDLER is None:
        HANDLER = guarded()
    return HANDLER


def body_of(answer: dict[str, Any]) -> Any:
    raw = answer["body"]
    return json.loads(base64.b64decode(raw) if answer.get("isBase64Encoded") else raw)


@pytest.mark.parametrize(("name", "event", "expected"), hostile_events.ALL, ids=[n for n, _, _ in hostile_events.ALL])
def test_every_event_gets_an_answer(name: str, event: Any, expected: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="laya_serverless"):
        answer = handler()(event, lambda_context())
    assert isinstance(answer, dict)
    if expected == "unsupported":
        assert answer["ok"] is False and answer["error"] == "unsupported_event" and "statusCode" not in answer
        [line] = [r for r in caplog.records if r.levelno == logging.ERROR]
        assert line.getMessage().startswith("unsupported event dropped: ") and "\n" not in line.getMessage()
        return
    if expected == "warm":
        assert answer == {"warm": True}
        return
    status = answer["statusCode"]
    assert status < 500, answer
    assert answer["headers"][HEADER].startswith("req_")
    if expected == "ok":
        assert 200 <= status < 300, answer
    else:
        assert 400 <= status < 500, answer
        assert isinstance(body_of(answer)["detail"], str) and body_of(answer)["detail"]
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged for %s" % name


def test_a_malformed_event_is_answered_in_its_sources_shape() -> None:
    rest = handler()(hostile_events.v1(path=7), lambda_context())
    assert set(rest) == {"statusCode", "headers", "multiValueHeaders", "body", "isBase64Encoded"}
    assert body_of(rest) == {"detail": "malformed event: path must be a non-empty string"}
    http = handler()(hostile_events.v2(body="%%", isBase64Encoded=True), lambda_context())
    assert set(http) == {"statusCode", "headers", "body", "isBase64Encoded"} and http["statusCode"] == 400
    alb = handler()({k: v for k, v in hostile_events.ALB_HEALTH.items() if k != "path"}, lambda_context())
    assert alb["statusDescription"] == "400 Bad Request"


def test_strict_mode_shapes_a_malformed_event_as_a_jev_error() -> None:
    answer = guarded(jev_strict=True)(hostile_events.v2(body=5), lambda_context())
    assert answer["statusCode"] == 400
    assert body_of(answer)["detail"]["error_type"] == "invalid_request_error"


def test_a_request_id_sent_in_the_event_is_echoed() -> None:
    event = hostile_events.v2()
    event["headers"][HEADER] = "client-id-1"
    assert handler()(event, lambda_context())["headers"][HEADER] == "client-id-1"
    broken = hostile_events.v2(body=5, headers={HEADER: "client-id-2"})
    assert handler()(broken, lambda_context())["headers"][HEADER] == "client-id-2"


def test_a_defect_of_ours_is_logged_and_answered_500_as_json(caplog: pytest.LogCaptureFixture) -> None:
    def broken(_event: dict[str, Any], _context: Any) -> dict[str, Any]:
        raise RuntimeError("a bug")

    answer = GuardedHandler(broken)(hostile_events.v2(), lambda_context())
    assert answer["statusCode"] == 500 and body_of(answer) == {"detail": "internal error"}
    assert any(r.exc_info for r in caplog.records)
