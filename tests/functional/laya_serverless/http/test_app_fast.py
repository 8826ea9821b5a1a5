"""The HTTP app end to end over deciders built from fakes: no ONNX export, so this tier runs in seconds.

The real decider code runs (tokenize, sequence, decode, abstention) over a word-level tokenizer and
a session that returns fixed logits; byte parity with upstream lives in `test_app.py` (slow).
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from laya_serverless import Decider
from laya_serverless.errors import Overloaded
from laya_serverless.http.app import build_app, create_app
from laya_serverless.http.serving import Serving, serving
from laya_serverless.protocol.deployment import Deployment
from laya_serverless.protocol.routing import Registry
from laya_serverless.settings import Settings
from tests.unit.fakes import FixedSession, config, word_encoder

QUESTIONS = {
    "team": {"type": "choice", "instructions": "which team ?", "criteria": {"billing": "refunds", "tech": None}},
    "churn": {"type": "noul", "instructions": "does the statement hold ?"},
}
ENGLISH = {"lang": "en"}


def fake_decider(logits: list[float]) -> Decider:
    return Decider(FixedSession(logits), word_encoder(), config())


def client(settings: Settings | None = None, **deciders: Decider) -> TestClient:
    deployed = deciders or {"english": fake_decider([2.0, 0.0])}
    return TestClient(create_app(deployed, settings or Settings.of(), registry=Registry()))


def test_a_decision_comes_from_the_deployed_decider_with_timing_headers() -> None:
    response = client().post("/v1/systemone", json={"state": "i was charged twice", "questions": QUESTIONS,
                                                    **ENGLISH})
    assert response.status_code == 200
    body = response.json()
    assert body["answers"]["team"]["choice"] == "billing"  # logit 2.0 beats 0.0
    assert list(body["answers"]["team"])[-1] == "x_jev_confidence"
    assert body["routing"]["model"] == "english" and body["routing"]["reason"] == "explicit lang='en'"
    assert response.headers["x-inference-time-ms"] == response.headers["server-timing"].split("dur=")[1]


def test_other_logits_give_the_other_choice() -> None:
    response = client(english=fake_decider([0.0, 3.0])).post(
        "/v1/systemone", json={"state": "x", "questions": QUESTIONS, **ENGLISH})
    assert response.json()["answers"]["team"]["choice"] == "tech"


def test_strict_mode_keeps_only_the_contracts_keys() -> None:
    strict = client(Settings.of(jev_strict=True))
    body = strict.post("/v1/systemone", json={"state": "x", "questions": QUESTIONS, **ENGLISH}).json()
    assert list(body) == ["model", "answers", "usage"]
    assert list(body["answers"]["team"]) == ["type", "choice", "confidence", "probabilities"]


def test_batch_answers_each_state_in_order_and_sums_usage() -> None:
    body = client().post("/v1/systemone/batch", json={"states": ["a", "b c d"], "questions": QUESTIONS,
                                                      **ENGLISH}).json()
    assert len(body["results"]) == 2
    assert body["total_usage"]["input_tokens"] == sum(r["usage"]["input_tokens"] for r in body["results"])
    assert body["results"][0]["usage"]["input_tokens"] < body["results"][1]["usage"]["input_tokens"]


def test_auth_refuses_decisions_and_reduces_health() -> None:
    keyed = client(Settings.of(api_key="k3y"))
    assert keyed.post("/v1/systemone", json={}).json() == {"detail": "invalid or missing bearer token"}
    assert keyed.get("/health").json() == {"status": "ok"}
    assert keyed.get("/health", headers={"Authorization": "Bearer k3y"}).json()["loaded"] == ["english"]
    assert keyed.get("/openapi.json").status_code == 404
    ok = keyed.post("/v1/systemone", json={"state": "x", "questions": QUESTIONS, **ENGLISH},
                    headers={"Authorization": "Bearer k3y"})
    assert ok.status_code == 200


def test_an_unavailable_deployment_answers_503_and_says_so_in_health() -> None:
    app = TestClient(create_app({}, Settings.of(), unavailable="artifacts missing"))
    refused = app.post("/v1/systemone", json={"state": "x", "questions": {}})
    assert (refused.status_code, refused.json(), refused.headers["retry-after"]) == (
        503, {"detail": "artifacts missing"}, "1")
    assert app.get("/health").json() == {"status": "ok", "ready": False, "detail": "artifacts missing",
                                         "device": "cpu", "device_is_preference": True}


class _Broken:
    def __init__(self, error: Exception) -> None:
        self.error = error

    def run(self, feeds: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        raise self.error


@pytest.mark.parametrize(("error", "status", "detail"), [
    (RuntimeError("/secret/path/model.onnx exploded"), 500, "inference failed"),
    (ValueError("a caller's mistake"), 422, "a caller's mistake"),
])
def test_inference_failures_map_to_one_status_each(error: Exception, status: int, detail: str) -> None:
    broken = Decider(_Broken(error), word_encoder(), config())
    response = client(english=broken).post("/v1/systemone", json={"state": "x", "questions": QUESTIONS, **ENGLISH})
    assert (response.status_code, response.json()) == (status, {"detail": detail})
    assert "server-timing" not in response.headers


def test_the_serving_dependency_can_be_overridden() -> None:
    app = create_app({"english": fake_decider([2.0, 0.0])}, Settings.of())
    settings = Settings.of()
    other = Serving(settings, Deployment({"english": fake_decider([0.0, 5.0])}, Registry(), "english"), Registry(),
                    detect=lambda _state: {})
    app.dependency_overrides[serving] = lambda: other
    body = TestClient(app).post("/v1/systemone", json={"state": "x", "questions": QUESTIONS, **ENGLISH}).json()
    assert body["answers"]["team"]["choice"] == "tech"


def test_admission_refuses_at_once_when_every_slot_is_taken() -> None:
    serve = Serving(Settings.of(max_concurrent=1),
                    Deployment({"english": fake_decider([1.0, 0.0])}, Registry(), "english"), Registry(),
                    detect=lambda _state: {})

    async def two_at_once() -> str:
        async with serve.admitted(None):
            with pytest.raises(Overloaded, match="server busy"):
                async with serve.admitted(None):
                    pass
        async with serve.admitted(None):  # the slot is free again
            return "admitted"

    assert asyncio.run(two_at_once()) == "admitted"


def test_idle_unload_empties_the_deployment_and_a_request_reloads_it() -> None:
    reloads: list[int] = []

    def reload() -> tuple[dict[str, Decider], dict[str, Any]]:
        reloads.append(1)
        return {"english": fake_decider([2.0, 0.0])}, {"english": "abc"}

    settings = Settings.of(idle_unload_seconds=0.01)
    deployment = Deployment({"english": fake_decider([2.0, 0.0])}, Registry(), "english", {"english": "abc"}, reload)
    serve = Serving(settings, deployment, Registry(), detect=lambda _state: {})
    serve.last_activity -= 1.0
    assert asyncio.run(serve.unload_if_idle()) is True
    app = TestClient(build_app(serve))  # no lifespan: no reaper racing the assertions below
    assert app.get("/health").json()["loaded"] == []
    app.post("/v1/systemone", json={"state": "x", "questions": QUESTIONS, **ENGLISH})
    health = app.get("/health").json()
    assert reloads == [1] and health["loaded"] == ["english"] and health["revisions"] == {"english": "abc"}


def _raw(app: Any, method: str, path: str, headers: list[tuple[bytes, bytes]]) -> tuple[int, dict[bytes, bytes], bytes]:
    """One request straight over ASGI: what the app itself sends, before any server drops or rewrites a byte."""
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": method, "path": path, "raw_path": path.encode(), "query_string": b"",
             "headers": headers, "root_path": "", "scheme": "http", "server": ("testserver", 80),
             "client": ("198.51.100.7", 5000), "http_version": "1.1", "asgi": {"version": "3.0"}}
    asyncio.run(app(scope, receive, send))
    return sent[0]["status"], dict(sent[0]["headers"]), b"".join(m.get("body", b"") for m in sent[1:])


def test_head_health_is_200_with_the_get_s_headers_and_no_body() -> None:
    """It was a 405."""
    app = create_app({"english": fake_decider([1.0, 0.0])}, Settings.of(), registry=Registry())
    status, headers, body = _raw(app, "HEAD", "/health", [(b"host", b"testserver")])
    got = _raw(app, "GET", "/health", [(b"host", b"testserver")])
    assert (status, body) == (200, b"") and headers[b"content-type"] == got[1][b"content-type"] == b"application/json"


def test_a_trailing_slash_is_a_404_never_a_redirect_to_the_host_a_caller_names() -> None:
    """The 307 used to send callers to whatever the Host header named, and drop the stage prefix on Lambda."""
    app = create_app({"english": fake_decider([1.0, 0.0])}, Settings.of(), registry=Registry())
    for path in ("/health/", "/v1/systemone/"):
        status, headers, body = _raw(app, "GET", path, [(b"host", b"evil.example")])
        assert (status, b"location" in headers, body) == (404, False, b'{"detail":"Not Found"}')
