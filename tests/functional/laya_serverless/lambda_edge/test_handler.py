"""The real Lambda handler on saved API Gateway events, and the local runners built on it."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from laya_artifacts.deploy.publish import publish
from laya_serverless.artifact.store import LocalStore
from laya_serverless.lambda_edge.api_handler import make_handler
from laya_serverless.local_edge.cli import main as cli
from laya_serverless.local_edge.start_api import ApiGatewayFront, lambda_context
from tests.paths import EVENTS

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def environ(tiny_fp32: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("deployment")
    publish(tiny_fp32, LocalStore(root / "store"))
    return {"LAYA_STORE": str(root / "store"), "LAYA_DEPLOYED": "multilingual=tiny-modernbert",
            "LAYA_CACHE_DIR": str(root / "cache"), "LAYA_TARGET": "cpu-fp32", "LAYA_API_KEY": "local-test-key",
            "LAYA_API_BASE_PATH": "/laya"}


@pytest.fixture(autouse=True, scope="module")
def main_thread_loop() -> Any:
    """Mangum drives the app on the calling thread's event loop; on Lambda that loop lives as long as
    the process. Here the tests own it, so it is closed rather than left to the garbage collector."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    yield loop
    asyncio.set_event_loop(None)
    loop.close()


def _event(name: str) -> dict[str, Any]:
    return json.loads((EVENTS / name).read_text())


def _body(response: dict[str, Any]) -> Any:
    raw = response["body"]
    return json.loads(base64.b64decode(raw) if response.get("isBase64Encoded") else raw)


def test_http_api_v2_events(environ: dict[str, str]) -> None:
    handler = make_handler(environ)
    health = handler(_event("http-api-v2-health.json"), lambda_context())
    assert health["statusCode"] == 200 and _body(health) == {"status": "ok"}  # no bearer: liveness only
    answered = handler(_event("http-api-v2-systemone.json"), lambda_context())
    assert answered["statusCode"] == 200, answered
    payload = _body(answered)
    assert list(payload) == ["model", "answers", "usage", "routing"]
    assert payload["answers"]["team"]["choice"] in ("billing", "tech", "other")
    assert payload["routing"]["model"] == "multilingual"
    assert float(answered["headers"]["x-inference-time-ms"]) > 0


def test_rest_v1_event_with_base64_body_and_base_path(environ: dict[str, str]) -> None:
    response = make_handler(environ)(_event("rest-v1-systemone-base64-base-path.json"), lambda_context())
    assert response["statusCode"] == 200, response
    assert set(_body(response)["answers"]) == {"team", "churn"}


def test_refused_artifacts_answer_503_and_health_says_not_ready(environ: dict[str, str], tmp_path: Path) -> None:
    handler = make_handler(dict(environ, LAYA_STORE=str(tmp_path / "empty-store")))
    response = handler(_event("http-api-v2-systemone.json"), lambda_context())
    assert response["statusCode"] == 503 and response["headers"]["retry-after"] == "1"
    assert "not available" in _body(response)["detail"]
    health = _event("http-api-v2-health.json")
    health["headers"]["authorization"] = "Bearer local-test-key"
    report = handler(health, lambda_context())
    assert report["statusCode"] == 200 and _body(report)["ready"] is False


def test_invoke_prints_the_lambda_response(environ: dict[str, str], monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    assert cli(["invoke", "--event", str(EVENTS / "http-api-v2-systemone.json")]) == 0
    response = json.loads(capsys.readouterr().out)
    assert response["statusCode"] == 200 and "answers" in _body(response)
    assert cli(["invoke", "--event", str(EVENTS / "missing.json")]) == 2


@pytest.mark.parametrize("payload", ["v1", "v2"])  # v1 (REST API, what the stack deploys) is the default
def test_start_api_front_turns_requests_into_events(environ: dict[str, str], payload: str, main_thread_loop) -> None:
    asyncio.set_event_loop(main_thread_loop)   # the other payload's asyncio.run() unset it
    front = ApiGatewayFront(make_handler(dict(environ, LAYA_API_BASE_PATH="/")), payload=payload)
    body = json.loads((EVENTS / "http-api-v2-systemone.json").read_text())["body"]

    async def run() -> tuple[httpx.Response, httpx.Response, httpx.Response]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=front), base_url="http://local") as client:
            ok = await client.post("/v1/systemone", content=body, headers={"Authorization": "Bearer local-test-key"})
            denied = await client.post("/v1/systemone", content=body)
            missing = await client.get("/nope")
            return ok, denied, missing

    try:
        ok, denied, missing = asyncio.run(run())
    finally:
        front.close()
    assert ok.status_code == 200 and "server-timing" in ok.headers and set(ok.json()["answers"]) == {"team", "churn"}
    assert denied.status_code == 401 and denied.json() == {"detail": "invalid or missing bearer token"}
    assert missing.status_code == 404


def test_the_key_is_read_from_secrets_manager_at_init(environ: dict[str, str], moto_aws, main_thread_loop) -> None:
    """What the CDK stack deploys: no LAYA_API_KEY in the environment, only the secret's ARN."""
    asyncio.set_event_loop(main_thread_loop)   # an earlier test's asyncio.run() unset it; Mangum would leak a new one
    from laya_serverless.errors import SettingsError
    from laya_serverless.settings import API_KEY, API_KEY_SECRET

    client = moto_aws("secretsmanager")
    arn = client.create_secret(Name="laya-api-key", SecretString="from-the-secret")["ARN"]
    deployed = {k: v for k, v in environ.items() if k != API_KEY} | {API_KEY_SECRET: arn}
    handler = make_handler(deployed, secrets_client=client)
    health = _event("http-api-v2-health.json")
    assert _body(handler(health, lambda_context())) == {"status": "ok"}
    health["headers"]["authorization"] = "Bearer from-the-secret"
    full = _body(handler(health, lambda_context()))
    assert full["status"] == "ok" and set(full) > {"status"}   # the full report, not the reduced one
    refused = _event("http-api-v2-systemone.json")
    refused["headers"]["authorization"] = "Bearer local-test-key"
    response = handler(refused, lambda_context())
    assert response["statusCode"] == 401
    assert _body(response) == {"detail": "invalid or missing bearer token"}
    with pytest.raises(SettingsError, match=API_KEY_SECRET):
        make_handler(dict(deployed, **{API_KEY_SECRET: arn + "-missing"}), secrets_client=client)


def test_docs_under_a_prefix_link_to_the_public_url(environ: dict[str, str], main_thread_loop) -> None:
    """What the stack sets with `-c prefix=/laya -c auth=false`: the app routes `/laya/...` and its
    OpenAPI document and Swagger page point at `/prod/laya/...`, the URL a browser sees."""
    from laya_serverless.settings import API_KEY, ROOT_PATH

    asyncio.set_event_loop(main_thread_loop)
    open_api = {k: v for k, v in environ.items() if k != API_KEY} | {ROOT_PATH: "/prod/laya"}
    handler = make_handler(open_api)
    event = _event("rest-v1-systemone-base64-base-path.json")
    event.update(httpMethod="GET", body=None, isBase64Encoded=False, path="/laya/openapi.json")
    document = handler(event, lambda_context())
    assert document["statusCode"] == 200
    assert _body(document)["servers"] == [{"url": "/prod/laya"}]
    assert "/v1/systemone" in _body(document)["paths"]
    event.update(path="/laya/docs")
    page = handler(event, lambda_context())
    assert page["statusCode"] == 200 and "/prod/laya/openapi.json" in page["body"]


def test_invoke_logs_powertools_json_lines(environ: dict[str, str], monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    assert cli(["invoke", "--event", str(EVENTS / "http-api-v2-systemone.json")]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["statusCode"] == 200   # stdout stays the response
    lines = [json.loads(line) for line in captured.err.splitlines() if line.startswith("{")]
    logged = [line for line in lines if line.get("service") == "laya-serverless" and "message" in line]
    assert logged and all("cold_start" in line and "function_request_id" in line for line in logged
                          if "function_request_id" in line)
    assert any("_aws" in line for line in lines)   # the EMF metrics of the invocation
    assert environ["LAYA_API_KEY"] not in captured.err


def test_power_tuning_payloads_are_events_the_handler_answers(environ: dict[str, str]) -> None:
    """`laya-artifacts tune --aws` hands Power Tuning these events: each one a decision request the handler answers
    in full (its answers are the decisions the cost is divided by)."""
    from laya_artifacts.tune.power_tuning import execution_input
    from laya_artifacts.tune.workload import read_workload

    requests = read_workload()
    document = execution_input("arn:aws:lambda:eu-west-1:123456789012:function:f", requests, [1024], num=8,
                               prefix="/laya", bearer="local-test-key")
    handler = make_handler(environ)
    for request, weighted in zip(requests, document["payload"], strict=True):
        response = handler(json.loads(json.dumps(weighted["payload"])), lambda_context())
        assert response["statusCode"] == 200, response
        assert len(_body(response)["answers"]) == request.decisions
