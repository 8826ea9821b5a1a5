"""The API function's cold start under exactly the permissions its synthesized role grants (moto, IAM enforced).

The runtime's real loader (`assemble_deployment`, as Lambda INIT runs it) reads the store with the role's
credentials: a cpu-fp32 deployment; an int8 one whose artifact was gated on other int8 kernels (the FP32
fallback must be readable and a missing gate record must read as absent, not denied); an int8 one with a
gate record for this CPU. And what the role must not do is denied.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from laya_artifacts.deploy.publish import publish
from laya_serverless.artifact.layout import MANIFEST_FILE
from laya_serverless.artifact.platform import cpu_profile, gate_record, gate_record_key, int8_kernels
from laya_serverless.artifact.store import open_store
from laya_serverless.assembly.loader import assemble_deployment
from laya_serverless.settings import Settings

from .conftest import S3AsDocumented, as_role, function_environment, function_with_handler, role_statements

pytestmark = pytest.mark.slow
API_HANDLER = "laya_serverless.lambda_edge.api_handler.handler"
ELSEWHERE = {"machine": "x86_64", "model": "a CPU of other int8 kernels", "isa": ["avx2", "avx512_vnni", "amx_int8"]}


def _api(template: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, str]]:
    function = function_with_handler(template, API_HANDLER)
    return role_statements(template, function["Role"]["Fn::GetAtt"][0]), function_environment(template, function)


def _relabelled(fp32: Path, out: Path, checkpoint: str, int8: bool) -> Path:
    """The tiny FP32 artifact published as `checkpoint` (the stack deploys the demo's name); with `int8`, as
    an int8 artifact gated on a CPU of other int8 kernels than this one's."""
    shutil.copytree(fp32, out)
    manifest = json.loads((out / MANIFEST_FILE).read_text())
    manifest["configuration"]["checkpoint"]["name"] = checkpoint
    if int8:
        elsewhere = ELSEWHERE if int8_kernels(cpu_profile()) != "amx-int8" else {"machine": "x86_64", "isa": ["avx2"]}
        manifest["configuration"].update(target="cpu-int8", precision={"weights": "int8"}, build_cpu=elsewhere)
    (out / MANIFEST_FILE).write_text(json.dumps(manifest))
    return out


def _cold_start(template: dict[str, Any], tmp_path: Path) -> tuple[Any, S3AsDocumented]:
    statements, env = _api(template)
    settings = Settings.from_environ({**env, "LAYA_CACHE_DIR": str(tmp_path / "cache")})
    with as_role(statements) as session:
        client = S3AsDocumented(session.client("s3"), statements)
        return assemble_deployment(settings.deployment, open_store(settings.deployment.store, s3_client=client)), client


def _publish(aws: Any, template: dict[str, Any], artifact: Path) -> str:
    _, env = _api(template)
    return publish(artifact, open_store(env["LAYA_STORE"], s3_client=aws))


def test_a_cpu_fp32_deployment_starts_with_its_role(aws: Any, synth: Any, tiny_fp32: Path, tmp_path: Path) -> None:
    template = synth(target="cpu-fp32")[1]
    _publish(aws, template, _relabelled(tiny_fp32, tmp_path / "fp32", "demo", int8=False))
    assembled, _ = _cold_start(template, tmp_path)
    assert assembled.unavailable is None and assembled.deployment is not None
    assert assembled.deployment.target_fallbacks == {}


def test_an_int8_deployment_gated_elsewhere_falls_back_to_fp32_with_its_role(aws: Any, synth: Any, tiny_fp32: Path,
                                                                             tmp_path: Path) -> None:
    template = synth()[1]  # the stack's default target: cpu-int8
    _publish(aws, template, _relabelled(tiny_fp32, tmp_path / "fp32", "demo", int8=False))
    int8_id = _publish(aws, template, _relabelled(tiny_fp32, tmp_path / "int8", "demo", int8=True))
    assembled, client = _cold_start(template, tmp_path)
    assert assembled.unavailable is None, "the API role cannot read what the FP32 fallback needs"
    assert assembled.deployment is not None
    assert assembled.deployment.target_fallbacks["english"]["served"] == "cpu-fp32"
    assert client.denied_absences == []  # the missing gate record read as absent (404), not denied (403)
    # refused from its manifest: the int8 graph never moved (Lambda's /tmp could not hold both graphs)
    assert [k for k in client.read_keys if k.startswith("laya-artifacts/artifacts/%s/" % int8_id)] == [
        "laya-artifacts/artifacts/%s/manifest.json" % int8_id]


def test_an_int8_deployment_with_a_gate_record_for_this_cpu_serves_int8(aws: Any, synth: Any, tiny_fp32: Path,
                                                                         tmp_path: Path) -> None:
    template = synth()[1]
    artifact_id = _publish(aws, template, _relabelled(tiny_fp32, tmp_path / "int8", "demo", int8=True))
    _, env = _api(template)
    here = cpu_profile()
    open_store(env["LAYA_STORE"], s3_client=aws).create(gate_record_key(artifact_id, int8_kernels(here)),
                                                        gate_record(artifact_id, here, {
        "target": "cpu-int8", "passed": True, "rows": 10, "max_probability_error": 0.001, "max_action_error": 0.0}))
    assembled, _ = _cold_start(template, tmp_path)
    assert assembled.unavailable is None and assembled.deployment is not None
    assert assembled.deployment.target_fallbacks == {}


@pytest.mark.parametrize("key", ["laya-artifacts/artifacts/x", "laya-artifacts/gates/x/avx2.json",
                                 "laya-artifacts/pointers/demo/cpu-int8.json", "laya-artifacts/goldens/x.json"])
def test_the_api_role_never_writes_artifacts_pointers_or_gate_records(aws: Any, synth: Any, key: str) -> None:
    # (it does write jobs/: POST /v1/jobs stores the job's spec and shards)
    statements, _ = _api(synth()[1])
    with as_role(statements) as session, pytest.raises(ClientError) as denied:
        session.client("s3").put_object(Bucket="laya-cloud-tier", Key=key, Body=b"{}")
    assert denied.value.response["Error"]["Code"] == "AccessDenied"


def test_a_missing_key_outside_gates_reads_as_denied_as_on_s3(aws: Any, synth: Any) -> None:
    statements, _ = _api(synth()[1])
    client = S3AsDocumented(aws, statements)  # S3's documented answer, where the role may not list
    with pytest.raises(ClientError) as absent:
        client.get_object(Bucket="laya-cloud-tier", Key="laya-artifacts/artifacts/missing")
    assert absent.value.response["Error"]["Code"] == "AccessDenied"
