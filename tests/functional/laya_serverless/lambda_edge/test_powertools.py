"""Powertools behind the Lambda handler (run locally: tracing disabled, logs and EMF on stderr)."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from laya_serverless import observe
from laya_serverless.http.app import create_app
from laya_serverless.http.request_id import HEADER
from laya_serverless.lambda_edge.api_handler import lambda_handler
from laya_serverless.lambda_edge.powertools import SERVICE, Instrumentation, PowertoolsBackend
from laya_serverless.local_edge.start_api import lambda_context
from laya_serverless.protocol.routing import Registry
from laya_serverless.settings import Settings
from tests.functional.laya_serverless.http.test_app_fast import fake_decider
from tests.functional.laya_serverless.lambda_edge import hostile_events

KEY = "sekrit-key-value"


BROKEN: list[bool] = [False]


class _Session:
    def run(self, feeds: Any) -> Any:
        if BROKEN[0]:
            raise RuntimeError("the graph broke")
        return fake_decider([2.0, 0.0, 1.0]).session.run(feeds)


@pytest.fixture
def instrumented() -> Iterator[Any]:
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    instrumentation = Instrumentation({})
    settings = Settings.of(api_key=KEY)
    decider = fake_decider([2.0, 0.0, 1.0])
    decider.session = _Session()
    app = create_app({"english": decider}, settings, registry=Registry())
    yield instrumentation.wrap(lambda_handler(app, settings))
    BROKEN[0] = False
    observe.install(None)
    ours = logging.getLogger("laya_serverless")
    for handler in [h for h in ours.handlers if getattr(h, "_laya_powertools", False)]:
        ours.removeHandler(handler)
    asyncio.set_event_loop(None)
    loop.close()


def _lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def test_logs_are_powertools_json_with_ids_and_never_the_key_or_body(instrumented: Any,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    event = hostile_events.v2(body="{not json at all: %s" % "SECRET-BODY-TEXT")
    event["headers"].update({"authorization": "Bearer " + KEY, HEADER: "client-req-7"})
    answer = instrumented(event, lambda_context())
    assert answer["statusCode"] == 400 and answer["headers"][HEADER] == "client-req-7"
    instrumented({"Records": [{"eventSource": "aws:sqs"}]}, lambda_context())
    err = capsys.readouterr().err
    assert KEY not in err and "SECRET-BODY-TEXT" not in err
    [dropped] = [line for line in _lines(err) if line.get("message", "").startswith("unsupported event")]
    assert dropped["service"] == SERVICE and dropped["level"] == "ERROR"
    assert {"cold_start", "function_request_id", "function_name"} <= set(dropped)


def test_a_request_logs_its_request_and_correlation_ids(instrumented: Any, capsys: pytest.CaptureFixture[str]) -> None:
    logging.getLogger("laya_serverless").warning("outside any request")
    BROKEN[0] = True
    event = hostile_events.v2()
    event["headers"].update({HEADER: "client-req-9", "authorization": "Bearer " + KEY})
    assert instrumented(event, lambda_context())["statusCode"] == 500
    lines = _lines(capsys.readouterr().err)
    [outside] = [line for line in lines if line.get("message") == "outside any request"]
    [failed] = [line for line in lines if line.get("message", "").startswith("inference failed")]
    assert "request_id" not in outside
    assert failed["request_id"] == "client-req-9" and failed["correlation_id"] == event["requestContext"]["requestId"]
    assert "the graph broke" in failed["exception"] and KEY not in json.dumps(failed)


def test_answered_requests_emit_emf_metrics(instrumented: Any, capsys: pytest.CaptureFixture[str]) -> None:
    event = hostile_events.v2()
    event["headers"]["authorization"] = "Bearer " + KEY
    assert instrumented(event, lambda_context())["statusCode"] == 200
    [emf] = [line for line in _lines(capsys.readouterr().err) if "_aws" in line]
    names = {m["Name"] for m in emf["_aws"]["CloudWatchMetrics"][0]["Metrics"]}
    assert {"InferenceMs", "Rows", "InputTokens", "HttpEvents", "ColdStarts"} <= names
    assert emf["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "LayaServerless"
    assert emf["Rows"] == [2.0] and emf["InputTokens"][0] > 0  # Powertools keeps each value in a list


def test_init_spans_wait_for_the_first_trace() -> None:
    backend = PowertoolsBackend(metrics=None, tracer=None, tracing=True)  # type: ignore[arg-type]
    written: list[tuple[str, float, float, bool]] = []
    backend._write = lambda *span: written.append(span)  # type: ignore[method-assign]
    backend.span("fetch", 1.0, 2.0, False)
    backend.span("session", 2.0, 3.0, True)
    assert written == [] and len(backend.pending) == 2
    backend.invoking = True
    backend.flush_pending()
    backend.span("inference", 4.0, 5.0, False)
    assert written == [("init.fetch", 1.0, 2.0, False), ("init.session", 2.0, 3.0, True),
                       ("inference", 4.0, 5.0, False)]


def test_tracing_is_off_outside_lambda() -> None:
    backend = PowertoolsBackend(metrics=None, tracer=None, tracing=False)  # type: ignore[arg-type]
    backend.span("fetch", 1.0, 2.0, False)
    assert backend.pending == []
