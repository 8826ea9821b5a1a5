"""The GPU path under exactly the permissions the synthesized template grants (moto, IAM enforced): the
SageMaker container's start (the real `build_service`, as `laya-serverless serve` runs it in the image, with
the model's environment) reading the store with its execution role, and the `/gpu` proxy function's real
handler calling InvokeEndpoint with its role, delivered to that container's `/invocations`.

No GPU here: the container's sessions run on the CPU behind a `Placement` that offers CUDA and reports the
session on it, and `gpu_profile()` names a GPU. What is proven is the store reads, their permissions, the
start without a jobs engine and the proxy's wire path, not CUDA (the device check, `scripts/gpu_check.sh`).
moto checks resource-level grants only in S3 and SQS; the proxy's InvokeEndpoint is checked against its
role's statements here (`allows`), as `CheckedStates` does for StartExecution.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from io import BytesIO
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError
from fastapi.testclient import TestClient

from laya_artifacts.deploy.publish import publish
from laya_serverless.artifact.gpu import gpu_key
from laya_serverless.artifact.layout import MANIFEST_FILE
from laya_serverless.artifact.platform import gate_record, gate_record_key
from laya_serverless.artifact.store import open_store
from laya_serverless.core.providers import CPU_PROVIDER, CUDA_PROVIDER, Placement
from laya_serverless.core.session import Loading, OnnxDecisionSession, ProviderSpec
from laya_serverless.http.service import build_service
from laya_serverless.local_edge.jobs_engine import local_jobs
from laya_serverless.settings import Settings

from ..functional.laya_serverless.http.test_app_fast import ENGLISH, QUESTIONS
from .conftest import (
    ACCOUNT,
    BUCKET,
    REGION,
    S3AsDocumented,
    allows,
    as_role,
    bucket_ids,
    lists,
    resolve,
    role_statements,
)

pytestmark = pytest.mark.slow
GPU_CONTEXT = {"gpu": "true", "gpu_target": "cuda-fp32"}
ENDPOINT_NAME = "laya-gpu-endpoint"
ENDPOINT_ARN = "arn:aws:sagemaker:%s:%s:endpoint/%s" % (REGION, ACCOUNT, ENDPOINT_NAME)
A10G = {"gpu": {"name": "NVIDIA A10G", "driver_version": "550.163.01", "compute_cap": "8.6"}, "gpu_count": 1}
L4 = {"gpu": {"name": "NVIDIA L4", "driver_version": "550.163.01", "compute_cap": "8.9"}, "gpu_count": 1}
BODY = {"state": "i was charged twice", "questions": QUESTIONS, **ENGLISH}


class _OnCudaInName(OnnxDecisionSession):
    """A real CPU session that reports the CUDA provider: the stand-in for the GPU this machine lacks."""

    def active_providers(self) -> list[str]:
        return [CUDA_PROVIDER, CPU_PROVIDER]


def _gpu_placement() -> Placement:
    def open_on_cpu(graph: Path, _providers: Sequence[ProviderSpec], threads: int | None,
                    loading: Loading) -> _OnCudaInName:
        return _OnCudaInName(graph, threads=threads, level=loading.level)

    return Placement(available=lambda: [CUDA_PROVIDER, CPU_PROVIDER], open=open_on_cpu)


def _resource(template: dict[str, Any], kind: str) -> tuple[str, dict[str, Any]]:
    found = [(lid, r["Properties"]) for lid, r in template["Resources"].items() if r["Type"] == kind]
    assert len(found) == 1, "expected one %s, found %d" % (kind, len(found))
    return found[0]


def _known(template: dict[str, Any]) -> dict[str, str]:
    endpoint_id, _ = _resource(template, "AWS::SageMaker::Endpoint")
    return {endpoint_id: ENDPOINT_ARN, "%s.EndpointName" % endpoint_id: ENDPOINT_NAME}


def _container(template: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The SageMaker model's execution-role statements and its container's environment, resolved."""
    _, model = _resource(template, "AWS::SageMaker::Model")
    role_id = model["ExecutionRoleArn"]["Fn::GetAtt"][0]
    environment = resolve(model["PrimaryContainer"]["Environment"], bucket_ids(template))
    return role_statements(template, role_id), {k: str(v) for k, v in environment.items()}


def _proxy(template: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, str]]:
    function = next(r["Properties"] for r in template["Resources"].values()
                    if r["Type"] == "AWS::Lambda::Function" and r["Properties"].get("Handler") == "proxy.handler")
    known = _known(template)
    environment = resolve(function["Environment"]["Variables"], bucket_ids(template), known)
    return role_statements(template, function["Role"]["Fn::GetAtt"][0], known), environment


def _cuda_artifact(fp32: Path, out: Path, built_on: dict[str, Any]) -> Path:
    """The tiny FP32 artifact relabelled as the demo's cuda-fp32 one, gated on the GPU `built_on` names."""
    shutil.copytree(fp32, out)
    manifest = json.loads((out / MANIFEST_FILE).read_text())
    manifest["configuration"]["checkpoint"]["name"] = "demo"
    manifest["configuration"].update(target="cuda-fp32", cuda={"build_gpu": dict(built_on, onnxruntime=_ort())})
    (out / MANIFEST_FILE).write_text(json.dumps(manifest))
    return out


def _ort() -> str:
    import onnxruntime as ort

    return str(ort.__version__)


def _start(template: dict[str, Any], tmp_path: Path, here: dict[str, Any],
           monkeypatch: pytest.MonkeyPatch) -> tuple[TestClient, S3AsDocumented, Settings]:
    """The container's start as the image runs it, on the GPU `here` names, with its execution role."""
    from laya_serverless.assembly import loader

    monkeypatch.setattr(loader, "gpu_profile", lambda: dict(here, onnxruntime=_ort()))
    statements, environment = _container(template)
    settings = Settings.from_environ({**environment, "LAYA_CACHE_DIR": str(tmp_path / "cache")})
    with as_role(statements, "sagemaker-execution-%s" % tmp_path.name) as session:
        client = S3AsDocumented(session.client("s3"), statements)
        store = open_store(settings.deployment.store, s3_client=client)
        app = build_service(settings, store, placement=_gpu_placement(), jobs=local_jobs(settings))
        return TestClient(app), client, settings


def _published(aws: Any, template: dict[str, Any], artifact: Path) -> str:
    _, environment = _container(template)
    return publish(artifact, open_store(environment["LAYA_STORE"], s3_client=aws))


def test_the_gpu_container_starts_with_its_execution_role_and_no_jobs_engine(
        aws: Any, synth: Any, tiny_fp32: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    template = synth(**GPU_CONTEXT)[1]
    _published(aws, template, _cuda_artifact(tiny_fp32, tmp_path / "cuda", A10G))
    client, s3, settings = _start(template, tmp_path, A10G, monkeypatch)
    assert local_jobs(settings) is None   # the model's environment turns the jobs engine off: no listing of jobs/
    assert client.get("/ping").status_code == 200, client.get("/ping").json()
    health = client.get("/health").json()
    assert health["loaded"] == ["english"] and health["device"] == "cuda", health
    decided = client.post("/invocations", json=BODY)
    assert decided.status_code == 200 and set(decided.json()["answers"]) == set(QUESTIONS)
    assert s3.denied_absences == []


def test_a_cuda_artifact_served_on_another_gpu_reads_its_regate_record_with_the_execution_role(
        aws: Any, synth: Any, tiny_fp32: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    template = synth(**GPU_CONTEXT)[1]
    artifact_id = _published(aws, template, _cuda_artifact(tiny_fp32, tmp_path / "cuda", A10G))
    _, environment = _container(template)
    store = open_store(environment["LAYA_STORE"], s3_client=aws)

    unproven, s3, _ = _start(template, tmp_path / "before", L4, monkeypatch)
    assert unproven.get("/ping").status_code == 503
    # no re-gate on the L4 yet: the record reads as absent (404, its ListBucket granted), not denied
    assert "never here (nvidia-l4" in caplog.text and "no gate record" in caplog.text, caplog.text
    assert s3.denied_absences == []

    l4 = dict(L4, onnxruntime=_ort())
    key = gate_record_key(artifact_id, gpu_key(l4))
    store.create(key, b'{"passed": true}')   # a record that proves nothing is read, and ignored
    caplog.clear()
    ignored, _, _ = _start(template, tmp_path / "garbage", L4, monkeypatch)
    assert ignored.get("/ping").status_code == 503 and "record was ignored" in caplog.text

    bucket, _, prefix = environment["LAYA_STORE"].removeprefix("s3://").partition("/")
    aws.delete_object(Bucket=bucket, Key="%s/%s" % (prefix.rstrip("/"), key))   # records are create-only
    store.create(key, gate_record(artifact_id, l4, {"target": "cuda-fp32", "passed": True, "rows": 12,
                                                    "max_probability_error": 2e-6, "max_action_error": 1e-6},
                                  gpu_key(l4)))
    regated, _, _ = _start(template, tmp_path / "after", L4, monkeypatch)
    assert regated.get("/ping").status_code == 200, regated.get("/ping").json()


@pytest.mark.parametrize("key", ["demo/cuda-fp32.json", "gates/x/y.json", "jobs/input/a.jsonl"])
def test_the_execution_role_writes_nothing_and_lists_no_jobs(aws: Any, synth: Any, key: str) -> None:
    template = synth(**GPU_CONTEXT)[1]
    statements, environment = _container(template)
    bucket, _, prefix = environment["LAYA_STORE"].removeprefix("s3://").partition("/")
    prefix = prefix.rstrip("/")
    with as_role(statements, "sagemaker-writes") as session:
        with pytest.raises(ClientError, match="AccessDenied"):
            session.client("s3").put_object(Bucket=bucket, Key="%s/%s" % (prefix, key), Body=b"{}")
    # moto ignores the s3:prefix condition, so the listing is checked against the statements (conftest)
    assert lists(statements, "%s/gates/x/" % prefix) and not lists(statements, "%s/jobs/" % prefix)


class _InvokeEndpointAs:
    """sagemaker-runtime's InvokeEndpoint for a role: the grant checked against its statements, the call
    delivered to the container app's `/invocations` (what SageMaker does), its refusals as ModelError."""

    def __init__(self, statements: list[dict[str, Any]], container: TestClient) -> None:
        self.statements, self.container = statements, container
        self.calls: list[str] = []

    def invoke_endpoint(self, EndpointName: str, Body: bytes, CustomAttributes: str = "",  # noqa: N803
                        **_: Any) -> dict[str, Any]:
        arn = "arn:aws:sagemaker:%s:%s:endpoint/%s" % (REGION, ACCOUNT, EndpointName)
        self.calls.append(EndpointName)
        if not allows(self.statements, "sagemaker:InvokeEndpoint", arn):
            raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": "not authorized"}},
                              "InvokeEndpoint")
        reply = self.container.post("/invocations", content=Body, headers={
            "content-type": "application/json", "X-Amzn-SageMaker-Custom-Attributes": CustomAttributes})
        if reply.status_code != 200:
            raise ClientError({"Error": {"Code": "ModelError", "Message": "the model answered an error"},
                               "OriginalStatusCode": reply.status_code, "OriginalMessage": reply.text},
                              "InvokeEndpoint")
        return {"Body": BytesIO(reply.content), "ContentType": reply.headers["content-type"]}


def _gateway_event(path: str, body: dict[str, Any] | None, method: str = "POST") -> dict[str, Any]:
    return {"httpMethod": method, "path": path, "headers": {"Content-Type": "application/json"},
            "body": json.dumps(body) if body is not None else None, "isBase64Encoded": False}


def test_the_gpu_routes_reach_the_container_through_the_proxy_with_its_role(
        aws: Any, synth: Any, tiny_fp32: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    template = synth(**GPU_CONTEXT)[1]
    _published(aws, template, _cuda_artifact(tiny_fp32, tmp_path / "cuda", A10G))
    container, _, _ = _start(template, tmp_path, A10G, monkeypatch)
    statements, environment = _proxy(template)
    monkeypatch.setattr(sys, "path", [str(Path(__file__).parents[2] / "functions" / "gpu_proxy"), *sys.path])
    import proxy

    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    runtime = _InvokeEndpointAs(statements, container)
    decided = proxy.handler(_gateway_event("/gpu/v1/systemone", BODY), None, client=runtime)
    assert decided["statusCode"] == 200, decided
    assert json.loads(decided["body"]) == container.post("/v1/systemone", json=BODY).json()
    refused = proxy.handler(_gateway_event("/gpu/v1/systemone", {"state": "x"}), None, client=runtime)
    direct = container.post("/v1/systemone", json={"state": "x"})   # the container's refusal, passed on as is
    assert (refused["statusCode"], json.loads(refused["body"])) == (direct.status_code, direct.json())
    assert refused["statusCode"] >= 400
    health = proxy.handler(_gateway_event("/gpu/health", None, "GET"), None, client=runtime)
    assert health["statusCode"] == 200 and json.loads(health["body"])["device"] == "cuda"
    assert runtime.calls == [ENDPOINT_NAME] * 3

    monkeypatch.setenv("LAYA_GPU_ENDPOINT", "another-endpoint")   # the role invokes its own endpoint only
    denied = proxy.handler(_gateway_event("/gpu/v1/systemone", BODY), None, client=runtime)
    assert denied["statusCode"] == 503
    with as_role(statements, "gpu-proxy") as session:   # and it reads nothing from the store
        with pytest.raises(ClientError, match="AccessDenied"):
            session.client("s3").get_object(Bucket=BUCKET, Key="demo/cuda-fp32.json")
