"""Operating behaviour over fake deciders: request ids, /v1/models, the reading gate, Authorization
whitespace, client disconnects, and strict Jev mode's shapes. Runs in seconds."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from laya_serverless.http.app import create_app
from laya_serverless.http.request_id import HEADER
from laya_serverless.protocol.jev import jev_confidence
from laya_serverless.protocol.routing import Registry
from laya_serverless.settings import Settings
from tests.functional.laya_serverless.http.test_app_fast import ENGLISH, QUESTIONS, fake_decider

LOGITS = [float((i * 7) % 11) / 4 for i in range(300)]


def app(**settings: Any) -> Any:
    chosen = Settings.of(**settings)
    return create_app({"english": fake_decider(LOGITS)}, chosen, registry=Registry())


def body(**extra: Any) -> dict[str, Any]:
    return {"state": "i was charged twice", "questions": QUESTIONS, **ENGLISH, **extra}


# ---------------------------------------------------------------------------- request ids

@pytest.mark.parametrize(("method", "path", "payload"), [
    ("POST", "/v1/systemone", body()), ("POST", "/v1/systemone", {"state": "x"}), ("GET", "/nope", None),
    ("GET", "/health", None), ("GET", "/v1/models", None)])
def test_every_response_carries_a_request_id(method: str, path: str, payload: Any) -> None:
    client = TestClient(app())
    generated = client.request(method, path, json=payload)
    assert generated.headers[HEADER].startswith("req_") and len(generated.headers[HEADER]) == 36
    echoed = client.request(method, path, json=payload, headers={HEADER: "abc-123.x:y_z"})
    assert echoed.headers[HEADER] == "abc-123.x:y_z"


@pytest.mark.parametrize("unusable", ["", "has space", "x" * 129, "new\\nline", "é"])
def test_an_unusable_request_id_is_replaced(unusable: str) -> None:
    response = TestClient(app()).get("/health", headers={HEADER: unusable.encode("utf-8")})
    assert response.headers[HEADER].startswith("req_") and response.headers[HEADER] != unusable


def test_log_lines_of_a_request_carry_its_id(caplog: pytest.LogCaptureFixture) -> None:
    broken = create_app({"english": fake_decider([1.0, 0.0])}, Settings.of(), registry=Registry())
    deployment = broken.state.serving.deployment
    deployment.deciders["english"].session.run = lambda feeds: (_ for _ in ()).throw(RuntimeError("boom"))
    with caplog.at_level(logging.ERROR, logger="laya_serverless"):
        response = TestClient(broken).post("/v1/systemone", json=body(), headers={HEADER: "trace-me"})
    assert response.status_code == 500
    assert [r.request_id for r in caplog.records] == ["trace-me"]


# ---------------------------------------------------------------------------- /v1/models

def test_models_lists_the_deployed_checkpoints_and_needs_the_key() -> None:
    listed = TestClient(app()).get("/v1/models").json()
    assert [m["name"] for m in listed["models"]] == ["english"]
    assert all(isinstance(m[k], str) for m in listed["models"] for k in ("name", "description", "release_date"))
    keyed = TestClient(app(api_key="k3y"))
    assert keyed.get("/v1/models").status_code == 401
    assert keyed.get("/v1/models", headers={"Authorization": "Bearer k3y"}).status_code == 200


def test_models_of_an_unavailable_deployment_is_503() -> None:
    response = TestClient(create_app({}, Settings.of(), unavailable="not here")).get("/v1/models")
    assert (response.status_code, response.json()) == (503, {"detail": "not here"})


# ---------------------------------------------------------------------------- reading gate and auth

async def _slow(seconds: float) -> Any:
    yield b'{"state": "x", '
    await asyncio.sleep(seconds)
    yield b'"questions": {}}'


def _concurrently(asgi: Any, slow: int, then: dict[str, Any]) -> tuple[list[httpx.Response], httpx.Response]:
    async def run() -> tuple[list[httpx.Response], httpx.Response]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=asgi), base_url="http://local") as client:
            stalled = [asyncio.create_task(client.post("/v1/systemone", content=_slow(0.6))) for _ in range(slow)]
            await asyncio.sleep(0.1)
            last = await client.post("/v1/systemone", json=then)
            return list(await asyncio.gather(*stalled)), last

    return asyncio.run(run())


def test_clients_still_sending_their_body_hold_no_admission_slot() -> None:
    stalled, served = _concurrently(app(max_concurrent=1, body_read_timeout=0.3), 3, body())
    assert served.status_code == 200
    assert [r.status_code for r in stalled] == [408, 408, 408]


def test_one_client_may_read_only_so_many_bodies_at_once_when_readers_outnumber_the_slots() -> None:
    stalled, refused = _concurrently(app(max_concurrent=2, max_reads_per_client=2, body_read_timeout=0.3), 2, body())
    assert (refused.status_code, refused.json(), refused.headers["retry-after"]) == (
        503, {"detail": "server busy, try again later"}, "1")


def test_one_pooled_client_is_not_refused_while_admission_slots_are_free() -> None:
    """One client address with 8 requests in flight on a 16-slot server used to get 503s past its 4th read (2.8% of a
    pooled client's requests with 16 slots free); the per-client cap now binds only once readers fill the slots."""
    stalled, served = _concurrently(app(max_concurrent=16, max_reads_per_client=4, body_read_timeout=5), 8, body())
    assert [r.status_code for r in stalled] == [200] * 8 and served.status_code == 200


@pytest.mark.parametrize("header", ["Bearer k3y", " Bearer k3y", "Bearer k3y \t", "\tBearer k3y"])
def test_whitespace_around_the_authorization_value_is_not_part_of_it(header: str) -> None:
    keyed = TestClient(app(api_key="k3y"))
    assert keyed.post("/v1/systemone", json=body(), headers={"Authorization": header}).status_code == 200


@pytest.mark.parametrize("header", ["Bearer  k3y", "bearer k3y", "Bearer k3y x", "Bearerk3y"])
def test_the_inside_of_the_authorization_value_stays_exact(header: str) -> None:
    keyed = TestClient(app(api_key="k3y"))
    assert keyed.post("/v1/systemone", json=body(), headers={"Authorization": header}).status_code == 401


def test_a_client_leaving_mid_body_is_one_log_line(caplog: pytest.LogCaptureFixture) -> None:
    messages = [{"type": "http.request", "body": b'{"state": ', "more_body": True}, {"type": "http.disconnect"}]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return messages.pop(0)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/v1/systemone", "headers": [], "query_string": b"",
             "client": ("127.0.0.1", 5), "server": ("local", 80), "scheme": "http", "root_path": "",
             "http_version": "1.1", "asgi": {"version": "3.0"}}
    with caplog.at_level(logging.INFO, logger="laya_serverless"):
        asyncio.run(app()(scope, receive, send))
    [line] = caplog.records
    assert line.getMessage() == "client disconnected after 10 body bytes of POST /v1/systemone" and not line.exc_info


# ---------------------------------------------------------------------------- strict Jev mode

STRICT_VALIDATION = [
    (b"{", ["body"], "json_invalid"),
    ({"questions": QUESTIONS}, ["body", "state"], "missing"),
    ({"state": "x"}, ["body"], "missing"),
    ({"state": "x", "questions": {}}, ["body", "questions"], "too_short"),
    ({"state": "x", "questions": {"q": {"type": "boolean", "instructions": "x"}}}, ["body", "questions", "q"],
     "value_error"),
    ({"state": "x", "questions": {"q": {"type": "choice", "instructions": "x", "criteria": {}}}},
     ["body", "questions", "q"], "too_short"),
    ({"state": "x", "questions": QUESTIONS, "max_len": "5"}, ["body", "max_len"], "value_error"),
    ({"state": "x", "questions": QUESTIONS, "min_confidence": {"x": 1}}, ["body", "min_confidence"], "value_error"),
    ({"state": "x", "questions": QUESTIONS, "model": "org/repo"}, ["body", "model"], "value_error"),
]


@pytest.mark.parametrize(("payload", "loc", "kind"), STRICT_VALIDATION)
def test_strict_validation_errors_are_422_with_a_detail_list(payload: Any, loc: list[Any], kind: str) -> None:
    client = TestClient(app(jev_strict=True))
    sent = {"content": payload} if isinstance(payload, bytes) else {"json": payload}
    response = client.post("/v1/systemone", **sent)
    assert response.status_code == 422, response.text
    [item] = response.json()["detail"]
    assert (item["loc"], item["type"]) == (loc, kind) and isinstance(item["msg"], str) and item["msg"]


def test_strict_other_errors_carry_an_error_type() -> None:
    keyed = TestClient(app(jev_strict=True, api_key="k3y"))
    assert keyed.post("/v1/systemone", json=body()).json() == {
        "detail": {"error_type": "authentication_error", "message": "invalid or missing bearer token"}}
    big = keyed.post("/v1/systemone", json={"state": "x" * 50_001, "questions": QUESTIONS},
                     headers={"Authorization": "Bearer k3y"})
    assert big.status_code == 413 and big.json()["detail"]["error_type"] == "request_too_large"
    missing = keyed.get("/nope")
    assert missing.status_code == 404 and missing.json()["detail"]["error_type"] == "not_found"
    assert TestClient(app()).get("/nope").json() == {"detail": "Not Found"}  # default mode: upstream's body


def test_strict_accepts_questions_without_instructions() -> None:
    questions = {"threat": {"type": "noul", "criteria": {"true": "a chargeback threat"}},
                 "team": {"type": "choice", "instructions": None, "criteria": {"billing": None, "tech": None}}}
    response = TestClient(app(jev_strict=True)).post("/v1/systemone", json={"state": "x", "questions": questions})
    assert response.status_code == 200 and set(response.json()["answers"]) == {"threat", "team"}


@pytest.mark.parametrize("n", [2, 26, 101, 128, 255])
def test_strict_accepts_2_to_255_options(n: int) -> None:
    criteria = {"option %03d" % i: "queue %d" % i for i in range(n)}
    questions = {"queue": {"type": "choice", "instructions": "which queue ?", "criteria": criteria}}
    response = TestClient(app(jev_strict=True)).post("/v1/systemone", json={"state": "x", "questions": questions})
    assert response.status_code == 200, response.text
    answer = response.json()["answers"]["queue"]
    assert list(answer) == ["type", "choice", "confidence", "probabilities"]
    assert list(answer["probabilities"]) == list(criteria)
    assert answer["probabilities"][answer["choice"]] == max(answer["probabilities"].values())
    over = {"queue": {"type": "choice", "instructions": "x", "criteria": {**criteria, **{"x%d" % i: None for i in range(
        256 - n)}}}}
    assert TestClient(app(jev_strict=True)).post("/v1/systemone", json={"state": "x", "questions": over}
                                                ).status_code == 413


def test_default_mode_still_caps_choices_at_100() -> None:
    criteria = {"o%d" % i: None for i in range(101)}
    response = TestClient(app()).post("/v1/systemone", json={"state": "x", "questions": {
        "q": {"type": "choice", "instructions": "x", "criteria": criteria}}})
    assert (response.status_code, response.json()) == (413, {"detail": "too many choice options for 'q' (101 > 100)"})


def test_strict_confidence_is_laya_by_default_and_jev_on_request() -> None:
    questions = {"team": QUESTIONS["team"], "urgency": {"type": "score", "instructions": "x",
                                                        "criteria": ["low", "mid", "high"]}}
    laya = TestClient(app(jev_strict=True)).post("/v1/systemone", json=body(questions=questions)).json()["answers"]
    full = TestClient(app()).post("/v1/systemone", json=body(questions=questions)).json()["answers"]
    jev = TestClient(app(jev_strict=True, jev_confidence="jev")).post(
        "/v1/systemone", json=body(questions=questions)).json()["answers"]
    for qid in questions:
        assert laya[qid]["confidence"] == full[qid]["confidence"]
        assert jev[qid]["confidence"] == full[qid]["x_jev_confidence"] == round(jev_confidence(full[qid]) or 0, 4)
