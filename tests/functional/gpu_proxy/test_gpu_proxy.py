"""The `/gpu` proxy end to end in-process: API Gateway event -> proxy -> a stand-in for InvokeEndpoint that
posts to the real app's `/invocations` as SageMaker does -> the same answer as the CPU API's."""

from __future__ import annotations

import importlib.util
import json
from types import ModuleType
from typing import Any

import pytest
from botocore.exceptions import ClientError
from fastapi.testclient import TestClient

from laya_serverless import settings as env
from laya_serverless.local_edge.start_api import rest_api_event
from tests.functional.laya_serverless.http.test_sagemaker_contract import BODY, app
from tests.paths import ROOT

SOURCE = ROOT / "functions" / "gpu_proxy" / "proxy.py"


class SageMakerRuntime:
    """InvokeEndpoint as SageMaker runs it: only the body and the custom attributes reach the container."""

    def __init__(self, container: TestClient | None) -> None:
        self.container, self.calls = container, []

    def invoke_endpoint(self, **call: Any) -> dict[str, Any]:
        self.calls.append(call)
        if self.container is None:
            raise ClientError({"Error": {"Code": "ValidationError", "Message": "Endpoint laya not found"}},
                              "InvokeEndpoint")
        reply = self.container.post("/invocations", content=call["Body"], headers={
            "Content-Type": call["ContentType"], "X-Amzn-SageMaker-Custom-Attributes": call["CustomAttributes"]})
        if reply.status_code != 200:
            raise ClientError({"Error": {"Code": "ModelError", "Message": "Received client error"},
                               "OriginalStatusCode": reply.status_code, "OriginalMessage": reply.text},
                              "InvokeEndpoint")

        class Body:
            def read(self) -> bytes:
                return reply.content

        return {"Body": Body(), "ContentType": reply.headers["content-type"]}


@pytest.fixture()
def proxy(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpu_proxy_under_test", SOURCE)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setenv(module.ENDPOINT_ENV, "laya-gpu")
    return module


def event(method: str, path: str, body: bytes = b"", **headers: str) -> dict[str, Any]:
    return rest_api_event(method, path, "", [(k.replace("_", "-").encode(), v.encode()) for k, v in headers.items()],
                          body)


def test_the_proxy_reads_the_variable_the_stack_sets(proxy: ModuleType) -> None:
    assert proxy.ENDPOINT_ENV == env.GPU_ENDPOINT


def test_with_scale_to_zero_the_proxy_names_the_inference_component(proxy: ModuleType,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    assert proxy.COMPONENT_ENV == env.GPU_INFERENCE_COMPONENT
    runtime = SageMakerRuntime(app())
    proxy.handler(event("GET", "/gpu/health"), None, runtime)
    assert "InferenceComponentName" not in runtime.calls[-1]   # a plain endpoint refuses the parameter
    monkeypatch.setenv(proxy.COMPONENT_ENV, "laya-gpu-component")
    assert proxy.handler(event("GET", "/gpu/health"), None, runtime)["statusCode"] == 200
    assert runtime.calls[-1]["InferenceComponentName"] == "laya-gpu-component"


def test_a_gpu_decision_is_the_cpu_apis_decision(proxy: ModuleType) -> None:
    container = app()
    runtime = SageMakerRuntime(container)
    reply = proxy.handler(event("POST", "/laya/gpu/v1/systemone", json.dumps(BODY).encode()), None, runtime)
    assert reply["statusCode"] == 200
    assert json.loads(reply["body"]) == container.post("/v1/systemone", json=BODY).json()
    assert runtime.calls[0]["EndpointName"] == "laya-gpu" and runtime.calls[0]["CustomAttributes"] == (
        "laya-route=systemone")


def test_batch_health_and_zstd_bodies_reach_their_routes(proxy: ModuleType) -> None:
    try:
        from compression.zstd import compress
    except ImportError:
        from backports.zstd import compress
    container = app()
    runtime = SageMakerRuntime(container)
    batch = {"states": ["a", "b"], "questions": BODY["questions"], "lang": "en"}
    packed = compress(json.dumps(batch).encode())
    reply = proxy.handler(event("POST", "/gpu/v1/systemone/batch", packed, content_encoding="zstd"), None, runtime)
    assert json.loads(reply["body"]) == container.post("/v1/systemone/batch", json=batch).json()
    assert runtime.calls[-1]["CustomAttributes"] == "laya-route=batch; content-encoding=zstd"
    health = proxy.handler(event("GET", "/gpu/health"), None, runtime)
    assert json.loads(health["body"]) == container.get("/health").json()


def test_the_containers_refusals_come_back_with_its_status_and_detail(proxy: ModuleType) -> None:
    container = app()
    reply = proxy.handler(event("POST", "/gpu/v1/systemone", b'{"state": "x"}'), None, SageMakerRuntime(container))
    expected = container.post("/v1/systemone", json={"state": "x"})
    assert (reply["statusCode"], json.loads(reply["body"])) == (expected.status_code, expected.json())


def test_unknown_routes_odd_codings_and_a_missing_endpoint(proxy: ModuleType) -> None:
    runtime = SageMakerRuntime(None)
    assert proxy.handler(event("GET", "/gpu/v1/systemone"), None, runtime)["statusCode"] == 404
    odd = proxy.handler(event("POST", "/gpu/v1/systemone", b"{}", content_encoding="x;y=1"), None, runtime)
    assert odd["statusCode"] == 415 and runtime.calls == []
    down = proxy.handler(event("POST", "/gpu/v1/systemone", b"{}"), None, runtime)
    assert (down["statusCode"], json.loads(down["body"]), down["headers"]["Retry-After"]) == (
        503, {"detail": "the GPU endpoint is not available; try again later"}, "1")
