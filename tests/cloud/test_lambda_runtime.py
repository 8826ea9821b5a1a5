"""The API function's built package under the real Lambda runtime interface client, as the stack declares it:
Python 3.12, the handler and environment from the synthesized template, read-only code, a 512 MB `/tmp`,
the function's memory as a hard limit (`lambda_runtime.py` says how). AWS APIs are moto's server.

Saved API Gateway events are invoked through the Runtime API, and SnapStart's order is played as Lambda
plays it: INIT, the before-snapshot hooks, `restore/next`, the after-restore hooks, then invocations.
"""

from __future__ import annotations

import base64
import json
import logging
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import boto3
import pytest

from laya_artifacts.deploy.publish import publish
from laya_serverless.artifact.store import open_store

from ..functional.threaded_server import free_port
from ..prerequisites import require, skip_module
from . import lambda_runtime as lr
from .conftest import BUCKET, REGION, bucket_ids, function_with_handler, resolve
from .test_api_permissions import _relabelled

pytestmark = pytest.mark.slow
EVENTS = Path(__file__).resolve().parents[1] / "events"
API_HANDLER = "laya_serverless.lambda_edge.api_handler.handler"
SECRET_NAME, KEY, ROTATED = "laya-api-key", "local-test-key", "rotated-after-the-snapshot"
_why_not = lr.can_sandbox()
WHY_NOT = "the Lambda runtime tier cannot run here: %s" % _why_not if _why_not else None
skip_module(WHY_NOT)  # before any fixture builds an artifact


@pytest.fixture(autouse=True)
def _sandbox_possible() -> None:
    require(WHY_NOT)  # on CI, where every tier must run, each test fails with the reason instead


def _event(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((EVENTS / name).read_text())
    return loaded


@pytest.fixture
def moto_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # a line a request otherwise
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = "http://127.0.0.1:%d" % port
    for name, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                        ("AWS_DEFAULT_REGION", REGION), ("AWS_ENDPOINT_URL", endpoint)):
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    yield endpoint
    urllib.request.urlopen(urllib.request.Request(endpoint + "/moto-api/reset", method="POST")).close()
    server.stop()


def _deploy(synth: Any, artifact: Path, tmp_path: Path, endpoint: str, **context: str) -> SimpleNamespace:
    """The stack's API function (path prefix /laya) with `artifact` published to its bucket as the demo."""
    template = synth(prefix="/laya", **context)[1]
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket=BUCKET)
    secrets = boto3.client("secretsmanager", region_name=REGION)
    secrets.create_secret(Name=SECRET_NAME, SecretString=KEY)
    [secret_id] = [lid for lid, r in template["Resources"].items() if r["Type"] == "AWS::SecretsManager::Secret"]
    function = function_with_handler(template, API_HANDLER)
    raw = function["Environment"]["Variables"]
    environ = {k: str(resolve(v, bucket_ids(template), {secret_id: SECRET_NAME})) for k, v in raw.items()}
    store = open_store(environ["LAYA_STORE"], s3_client=s3)
    publish(_relabelled(artifact, tmp_path / "fp32", "demo", int8=False), store)
    if context.get("target", "cpu-int8") == "cpu-int8":  # an int8 artifact gated on other kernels: FP32 served
        publish(_relabelled(artifact, tmp_path / "int8", "demo", int8=True), store)
    machine = environ["LAYA_JOBS_STATE_MACHINE"].rpartition(":")[2]
    boto3.client("stepfunctions", region_name=REGION).create_state_machine(  # recorded, not run, here
        name=machine, definition=json.dumps({"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}),
        roleArn="arn:aws:iam::123456789012:role/engine")
    s3.put_object(Bucket=BUCKET, Key="laya-artifacts/jobs/input/tickets.jsonl",
                  Body=b"".join(b'"ticket %d: i was charged twice"\n' % i for i in range(40)))
    environ.update(AWS_LAMBDA_FUNCTION_NAME="LayaServerless-Api", AWS_ACCESS_KEY_ID="testing",
                   AWS_SECRET_ACCESS_KEY="testing", AWS_ENDPOINT_URL=endpoint)
    return SimpleNamespace(environ=environ, memory_mb=int(function["MemorySize"]), secrets=secrets,
                           snapstart=function.get("SnapStart"), package=lr.built("x86_64"))


@pytest.fixture
def deployed(moto_server: str, synth: Any, tiny_fp32: Path, tmp_path: Path) -> SimpleNamespace:
    return _deploy(synth, tiny_fp32, tmp_path, moto_server, target="cpu-fp32")


@pytest.fixture
def environment(tmp_path: Path) -> Iterator[Any]:
    """`launch(deployed, snapstart)`: one execution environment of `deployed`, stopped at the end."""
    started: list[lr.ExecutionEnvironment] = []

    def launch(deployed: SimpleNamespace, snapstart: bool) -> lr.ExecutionEnvironment:
        memory = lr.MemoryLimit(deployed.memory_mb)
        env = lr.start(deployed.package, API_HANDLER, deployed.environ, memory,
                       tmp_path / ("function-%d.log" % len(started)), snapstart=snapstart)
        started.append(env)
        return env

    yield launch
    for env in started:
        env.stop()
        env.memory.close()


def _answer(reply: tuple[str, Any]) -> tuple[int, Any]:
    kind, payload = reply
    assert kind == "response", "the function raised: %s" % payload
    body = payload["body"]
    if payload.get("isBase64Encoded"):
        body = base64.b64decode(body).decode()
    return payload["statusCode"], json.loads(body)


def _authorized_health() -> dict[str, Any]:
    """GET /health with the bearer key, as a REST API event (the saved POST's, re-aimed)."""
    event = _event("rest-v1-systemone-base64-base-path.json")
    return {**event, "httpMethod": "GET", "path": "/laya/health", "body": None, "isBase64Encoded": False,
            "requestContext": {**event["requestContext"], "httpMethod": "GET", "path": "/prod/laya/health"}}


def _with_key(event: dict[str, Any], key: str) -> dict[str, Any]:
    """A REST API event with another bearer key (in `headers` and `multiValueHeaders`, which Mangum reads)."""
    changed = dict(event)
    for field, value in (("headers", "Bearer %s" % key), ("multiValueHeaders", ["Bearer %s" % key])):
        kept = {k: v for k, v in (event.get(field) or {}).items() if k.lower() != "authorization"}
        changed[field] = {**kept, "Authorization": value}
    return changed


def test_the_api_package_runs_under_the_runtime_interface_client(environment: Any,
                                                                 deployed: SimpleNamespace) -> None:
    env = environment(deployed, snapstart=False)
    init = env.init_seconds(snapstart=False)
    status, body = _answer(env.api.invoke(_event("rest-v1-systemone-base64-base-path.json")))
    assert status == 200 and body["answers"], body
    status, health = _answer(env.api.invoke(_event("http-api-v2-health.json")))
    assert status == 200 and health["status"] == "ok", health
    status, job = _answer(env.api.invoke(_event("rest-v1-jobs-submit.json")))
    assert status == 202 and job["status"] == "queued" and job["states"] == 40, job
    kind, malformed = env.api.invoke({"httpMethod": 7, "unexpected": True})
    assert kind == "response" and malformed["statusCode"] == 400, malformed  # answered, never raised
    status, refused = _answer(env.api.invoke(_with_key(_event("rest-v1-systemone-base64-base-path.json"), "x")))
    assert status == 401
    peak = env.memory.peak_mb()
    assert env.process.poll() is None and not env.memory.oom_killed(), env.log()[-3000:]
    assert peak <= deployed.memory_mb, "peak %.0f MB over the function's %d MB" % (peak, deployed.memory_mb)
    print("INIT %.2f s, peak %.0f MB of %d MB (%s)" % (init, peak, deployed.memory_mb,
                                                       "cgroup v%d" % env.memory.version))


def test_snapstart_hooks_run_in_lambda_s_order_and_a_rotated_key_is_read_after_restore(
        environment: Any, deployed: SimpleNamespace) -> None:
    assert deployed.snapstart == {"ApplyOn": "PublishedVersions"}  # the stack's default
    env = environment(deployed, snapstart=True)
    env.init_seconds(snapstart=True)  # INIT and the before-snapshot hooks ran: the runtime waits to be restored
    assert "warmed demo before the snapshot" in env.log() or "warmed english before the snapshot" in env.log()
    assert env.api.first_call("/invocation/next") is None
    deployed.secrets.put_secret_value(SecretId=SECRET_NAME, SecretString=ROTATED)  # rotated while snapshotted
    env.api.restore()
    env.api.wait_for("/invocation/next", 60)
    assert env.api.record.restore_error is None, env.api.record.restore_error
    event = _event("rest-v1-systemone-base64-base-path.json")
    status, _ = _answer(env.api.invoke(_with_key(event, ROTATED)))
    assert status == 200
    status, _ = _answer(env.api.invoke(_with_key(event, KEY)))
    assert status == 401  # the snapshot's key stopped working


@pytest.mark.parametrize("snapstart", [False, True], ids=["on-demand", "snapstart"])
def test_a_checkpoint_sized_artifact_loads_within_the_default_memory_and_a_512_mb_tmp(
        environment: Any, moto_server: str, synth: Any, modernbert_base_fp32: Path, tmp_path: Path,
        snapstart: bool) -> None:
    """The stack's defaults (cpu-int8, SnapStart, the memory it sizes for the graph) with a ModernBERT-base-shaped
    checkpoint (the cloud tier's largest; not a published checkpoint's size, docs/deploy.md#memory): its int8
    artifact gated on other kernels is refused from its manifest, and the FP32 graph it falls back to (stored
    compactly: 313 MiB of FP16 weights, 626 MiB once loaded as FP32) streams into memory, never into /tmp."""
    graph_mb = (modernbert_base_fp32 / "model.onnx").stat().st_size / 2**20
    assert graph_mb * 2 > lr.TMP_SIZE_MB  # the case: as loaded, the weights would not fit /tmp
    deployed = _deploy(synth, modernbert_base_fp32, tmp_path, moto_server, graph_mb="%d" % -(-graph_mb // 1))
    env = environment(deployed, snapstart=snapstart)
    init = env.init_seconds(snapstart=snapstart)
    if snapstart:
        env.api.restore()
    status, body = _answer(env.api.invoke(_event("rest-v1-systemone-base64-base-path.json")))
    assert status == 200 and body["answers"], body
    status, health = _answer(env.api.invoke(_authorized_health()))
    assert status == 200 and health["target_fallbacks"]["english"]["served"] == "cpu-fp32", health
    peak = env.memory.peak_mb()
    assert env.process.poll() is None and not env.memory.oom_killed(), env.log()[-3000:]
    assert peak <= deployed.memory_mb, "peak %.0f MB over the function's %d MB" % (peak, deployed.memory_mb)
    print("\n%s: graph %.0f MiB, INIT %.2f s, peak %.0f MB of %d MB (%s)" % (
        "SnapStart" if snapstart else "on demand", graph_mb, init, peak, deployed.memory_mb,
        "memory cgroup v%d, tmpfs /tmp included" % env.memory.version))



def test_the_deploy_gate_replays_in_steps_under_the_runtime_interface_client(
        moto_server: str, synth: Any, tiny_fp32: Path, tmp_path: Path) -> None:
    """The gate function's package as Lambda runs it, driven as the CDK Provider framework drives it (onEvent, then
    isComplete until complete), each invocation's deadline leaving no time past the step's margin: one chunk a
    step, the progress carried in the store from one invocation to the next, and the record written at the end."""
    from laya_infra.deploy_gate import GATE_HANDLER
    from laya_serverless.artifact.platform import cpu_profile, gate_record_key, int8_kernels
    from laya_serverless.gate.regate import STEP_MARGIN_S
    from tests.provider_framework import run_custom_resource

    from .test_gate_permissions import _int8_elsewhere

    template = synth()[1]  # the default target, cpu-int8, is what creates the gate
    deployed = _deploy(synth, tiny_fp32, tmp_path, moto_server, target="cpu-fp32")
    store = open_store(deployed.environ["LAYA_STORE"], s3_client=boto3.client("s3", region_name=REGION))
    artifact_id = publish(_int8_elsewhere(tiny_fp32, tmp_path / "int8-elsewhere", spoil=False), store)
    gate = function_with_handler(template, GATE_HANDLER)
    [resource] = [r for r in template["Resources"].values() if r["Type"] == "AWS::CloudFormation::CustomResource"]
    properties = resolve(resource["Properties"], bucket_ids(template))
    properties.pop("ServiceToken")
    environ = {k: deployed.environ[k] for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL")}
    memory = lr.MemoryLimit(int(gate["MemorySize"]))
    env = lr.start(deployed.package, GATE_HANDLER, dict(environ, AWS_LAMBDA_FUNCTION_NAME="LayaServerless-Gate"),
                   memory, tmp_path / "gate.log")
    try:
        def invoke(event: dict[str, Any], context: Any) -> dict[str, Any]:
            kind, payload = env.api.invoke(event, remaining_s=STEP_MARGIN_S)
            assert kind == "response", "the gate raised: %s\n%s" % (payload, env.log()[-3000:])
            return dict(payload)

        request = {"RequestType": "Create", "RequestId": "deploy-1", "ResourceProperties": properties}
        response, polls = run_custom_resource(invoke, request)
        peak = memory.peak_mb()
        assert env.process.poll() is None and not memory.oom_killed(), env.log()[-3000:]
    finally:
        env.stop()
        memory.close()
    results = {r["checkpoint"]: r for r in json.loads(response["Data"]["Results"])}
    assert response["Data"]["Passed"] == "true" and polls > 2 and results["demo"]["steps"] == polls, results
    assert results["demo"]["recorded"] == gate_record_key(artifact_id, int8_kernels(cpu_profile()))
    assert store.read(results["demo"]["recorded"]) is not None and peak <= int(gate["MemorySize"])
