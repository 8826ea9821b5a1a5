"""The SageMaker container contract (`GET /ping`, `POST /invocations`) and `/health`'s device block, in-process.

The GPU container serves the same app; these run it on this CPU-only machine: with the CPU device
the contract answers as the Jev routes do, and with `LAYA_DEVICE=cuda` the app never answers a decision.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from laya_serverless import Decider
from laya_serverless.core.providers import CUDA_PROVIDER
from laya_serverless.http.app import create_app
from laya_serverless.http.service import build_service
from laya_serverless.protocol.routing import Registry
from laya_serverless.settings import Settings
from tests.functional.laya_serverless.http.test_app_fast import ENGLISH, QUESTIONS, fake_decider
from tests.unit.fakes import config, word_encoder
from tests.unit.gpu_fakes import FakeSession, gpu_decider, oom

BODY = {"state": "i was charged twice", "questions": QUESTIONS, **ENGLISH}
ATTRIBUTES = "X-Amzn-SageMaker-Custom-Attributes"


def app(settings: Settings | None = None, **deciders: Decider) -> TestClient:
    deployed = deciders or {"english": fake_decider([2.0, 0.0])}
    return TestClient(create_app(deployed, settings or Settings.of(), registry=Registry()))


def test_ping_is_200_once_loaded() -> None:
    response = app().get("/ping")
    assert (response.status_code, response.json()) == (200, {"status": "ok"})


def test_invocations_answers_exactly_as_systemone() -> None:
    client = app()
    jev, sagemaker = client.post("/v1/systemone", json=BODY), client.post("/invocations", json=BODY)
    assert sagemaker.status_code == jev.status_code == 200
    assert sagemaker.json() == jev.json()
    assert "inference;dur=" in sagemaker.headers["server-timing"]


def test_invocations_refuses_as_systemone_refuses() -> None:
    client = app()
    for body in ({"state": "x"}, {"state": "x", "questions": {"q": {"type": "pick"}}}):
        jev, sagemaker = client.post("/v1/systemone", json=body), client.post("/invocations", json=body)
        assert (sagemaker.status_code, sagemaker.json()) == (jev.status_code, jev.json())


def test_custom_attributes_choose_the_batch_and_health_routes() -> None:
    client = app()
    batch = {"states": ["a", "b c"], "questions": QUESTIONS, **ENGLISH}
    via = client.post("/invocations", json=batch, headers={ATTRIBUTES: "laya-route=batch"})
    assert via.json() == client.post("/v1/systemone/batch", json=batch).json()
    health = client.post("/invocations", headers={ATTRIBUTES: "laya-route=health"})
    assert health.json() == client.get("/health").json()


def test_a_zstd_body_arrives_with_its_coding_as_an_attribute() -> None:
    try:
        from compression.zstd import compress
    except ImportError:
        from backports.zstd import compress
    import json

    client = app()
    packed = compress(json.dumps(BODY).encode())
    response = client.post("/invocations", content=packed,
                           headers={ATTRIBUTES: "laya-route=systemone; content-encoding=zstd",
                                    "content-type": "application/json"})
    assert response.status_code == 200 and response.json() == client.post("/v1/systemone", json=BODY).json()


@pytest.mark.parametrize(("attributes", "detail"), [
    ("laya-route=jobs", "unknown laya-route 'jobs'; one of systemone, batch, health"),
    ("batch", "X-Amzn-SageMaker-Custom-Attributes must be key=value pairs separated by ';'"),
])
def test_bad_custom_attributes_are_400s(attributes: str, detail: str) -> None:
    response = app().post("/invocations", json=BODY, headers={ATTRIBUTES: attributes})
    assert (response.status_code, response.json()) == (400, {"detail": detail})


@pytest.mark.parametrize("attributes", ["laya-route=jobs", "batch", ";=;"])
def test_without_the_key_bad_custom_attributes_are_401s(attributes: str) -> None:
    """Auth comes first: a stranger learns nothing from how the attribute header is refused (was a 400)."""
    client = app(Settings.of(api_key="k3y"))
    response = client.post("/invocations", json=BODY, headers={ATTRIBUTES: attributes})
    assert (response.status_code, response.json()) == (401, {"detail": "invalid or missing bearer token"})
    keyed = client.post("/invocations", json=BODY, headers={ATTRIBUTES: attributes, "Authorization": "Bearer k3y"})
    assert keyed.status_code == 400


def test_ping_says_why_an_unavailable_deployment_is_not_ready() -> None:
    client = TestClient(create_app({}, Settings.of(), unavailable="artifacts missing"))
    response = client.get("/ping")
    assert (response.status_code, response.json(), response.headers["retry-after"]) == (
        503, {"detail": "artifacts missing"}, "1")


def _cuda_offered() -> bool:
    import onnxruntime as ort

    return CUDA_PROVIDER in ort.get_available_providers()


@pytest.mark.skipif(_cuda_offered(), reason="this onnxruntime offers CUDA: the refusal is for CPU-only machines")
def test_laya_device_cuda_on_a_cpu_only_machine_never_answers_a_decision(tmp_path: Path) -> None:
    settings = Settings.from_environ({"LAYA_DEVICE": "cuda", "LAYA_STORE": str(tmp_path / "store"),
                                      "LAYA_CACHE_DIR": str(tmp_path / "cache")})
    client = TestClient(build_service(settings))
    ping = client.get("/ping")
    assert ping.status_code == 503 and "CUDAExecutionProvider" in ping.json()["detail"]
    for path in ("/invocations", "/v1/systemone"):
        refused = client.post(path, json=BODY)
        assert (refused.status_code, refused.json()) == (503, ping.json())
    health = client.get("/health").json()
    assert health["ready"] is False and health["detail"] == ping.json()["detail"]
    assert (health["device"], health["device_is_preference"]) == ("cuda", True)
    assert not (tmp_path / "cache").exists()   # refused before any download


def _health(client: TestClient) -> dict[str, Any]:
    body: dict[str, Any] = client.get("/health").json()
    return body


def test_health_reports_where_work_runs_and_counts_cpu_retries() -> None:
    gpu = FakeSession([CUDA_PROVIDER], errors=[oom()])
    decider, _ = gpu_decider(gpu, FakeSession(["CPUExecutionProvider"]))
    client = app(Settings.of(device="cuda", target="cuda-fp16"), english=decider,
                 spare=Decider(FakeSession(["CPUExecutionProvider"]), word_encoder(), config()))
    before = _health(client)
    assert (before["device"], before["device_is_preference"]) == ("cuda", False)
    assert before["checkpoint_devices"] == {"english": "cuda", "spare": "cpu"}
    assert before["cpu_fallbacks"]["english"] == {"count": 0, "last_reason": None}
    assert client.post("/invocations", json=BODY).status_code == 200   # ran out of GPU memory, answered on the CPU
    after = _health(client)
    assert after["cpu_fallbacks"]["english"]["count"] == 1
    assert "out of memory" in after["cpu_fallbacks"]["english"]["last_reason"]
    assert after["checkpoint_devices"]["english"] == "cuda"


def test_without_a_gated_cpu_retry_a_gpu_out_of_memory_request_is_a_503() -> None:
    decider, _ = gpu_decider(FakeSession([CUDA_PROVIDER], errors=[oom()]), None)
    client = app(Settings.of(device="cuda", target="cuda-fp16"), english=decider)
    response = client.post("/v1/systemone", json=BODY)
    assert (response.status_code, response.json(), response.headers["retry-after"]) == (
        503, {"detail": "the GPU is out of memory; try again later"}, "1")
