"""The deploy-time gate's real code (`laya_serverless.gate.regate`, as its custom resource runs it on Lambda) under
exactly the permissions the synthesized template gives its role (moto, IAM enforced, S3's 403-for-absent
encoded as in conftest): it records a pass under gates/, records nothing for a failure, and can write
nothing but gate records.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from laya_artifacts.deploy.publish import publish
from laya_infra.constants import HANDLER
from laya_serverless.artifact.layout import MANIFEST_FILE
from laya_serverless.artifact.manifest import sha256_bytes
from laya_serverless.artifact.platform import cpu_profile, gate_record_key, int8_kernels
from laya_serverless.artifact.store import open_store
from laya_serverless.gate import regate
from laya_serverless.gate.regate import GOLDENS_SUFFIX, canonical_goldens, goldens_sidecar, regate_published
from laya_serverless.gate.stepwise import progress_key

from .conftest import BUCKET, S3AsDocumented, as_role, function_environment, function_with_handler, role_statements
from .test_api_permissions import _api, _relabelled

pytestmark = pytest.mark.slow
GATE_HANDLER = "laya_serverless.gate.regate.handler"


def _gate_role(template: dict[str, Any]) -> list[dict[str, Any]]:
    return role_statements(template, function_with_handler(template, GATE_HANDLER)["Role"]["Fn::GetAtt"][0])


def _int8_elsewhere(tiny_fp32: Path, out: Path, spoil: bool) -> Path:
    """The tiny artifact as an int8 one gated on other kernels, with its goldens (spoiled: logits negated, so
    that no graph can match them, under a manifest that pins the spoiled corpus)."""
    artifact = _relabelled(tiny_fp32, out, "demo", int8=True)
    goldens = json.loads(goldens_sidecar(tiny_fp32).read_bytes())
    if spoil:
        for row in goldens["rows"]:
            row["logits"] = [[-x for x in option] for option in row["logits"]]
    corpus = canonical_goldens(goldens)
    manifest = json.loads((artifact / MANIFEST_FILE).read_text())
    manifest["parity"]["goldens_sha256"] = sha256_bytes(corpus)
    (artifact / MANIFEST_FILE).write_text(json.dumps(manifest))
    artifact.with_name(artifact.name + GOLDENS_SUFFIX).write_bytes(corpus)
    return artifact


def _gate_as_its_role(template: dict[str, Any], tmp_path: Path,
                      role: str = "deploy-gate") -> tuple[dict[str, Any], Any]:
    statements = _gate_role(template)
    environ = function_environment(template, function_with_handler(template, HANDLER))
    with as_role(statements, role) as session:
        client = S3AsDocumented(session.client("s3"), statements)
        store = open_store(environ["LAYA_STORE"], s3_client=client)
        return regate_published(store, "demo", "cpu-int8", tmp_path / "cache"), client


@pytest.mark.parametrize("spoil", [False, True], ids=["pass", "failure"])
def test_the_deploy_gate_records_a_pass_and_only_a_pass_with_its_role(aws: Any, synth: Any, tiny_fp32: Path,
                                                                       tmp_path: Path, spoil: bool) -> None:
    regate._opened.clear()
    template = synth()[1]  # the default target, cpu-int8, is what creates the gate
    _, environ = _api(template)
    artifact_id = publish(_int8_elsewhere(tiny_fp32, tmp_path / "int8", spoil),
                          open_store(environ["LAYA_STORE"], s3_client=aws))
    summary, client = _gate_as_its_role(template, tmp_path)
    assert client.denied_absences == []  # "no record yet" read as absent (404), not denied (403)
    key = "laya-artifacts/" + gate_record_key(artifact_id, int8_kernels(cpu_profile()))
    listed = aws.list_objects_v2(Bucket=BUCKET, Prefix="laya-artifacts/gates/").get("Contents", [])
    stored = [o["Key"] for o in listed if "/gates/progress/" not in o["Key"]]  # the replay's progress aside
    if spoil:
        assert summary["passed"] is False and summary["failures"] and stored == []
    else:
        assert summary["passed"] is True and summary["recorded"] == gate_record_key(artifact_id, int8_kernels(
            cpu_profile()))
        assert stored == [key]
        again, _ = _gate_as_its_role(template, tmp_path / "again", "deploy-gate-again")
        assert again["recorded"] == "already"  # the create-only check saw the record through its role


def test_a_replay_in_steps_saves_its_progress_with_its_role_and_records_once_whole(aws: Any, synth: Any,
                                                                                  tiny_fp32: Path,
                                                                                  tmp_path: Path) -> None:
    """Each step reads and compare-and-swaps gates/progress/... (If-None-Match, then If-Match) under the role."""
    regate._opened.clear()
    template = synth()[1]
    _, environ = _api(template)
    artifact_id = publish(_int8_elsewhere(tiny_fp32, tmp_path / "int8", spoil=False),
                          open_store(environ["LAYA_STORE"], s3_client=aws))
    statements = _gate_role(template)
    kernels = int8_kernels(cpu_profile())
    steps = []
    with as_role(statements, "deploy-gate-steps") as session:
        client = S3AsDocumented(session.client("s3"), statements)
        store = open_store(environ["LAYA_STORE"], s3_client=client)
        for _ in range(200):
            summary = regate_published(store, "demo", "cpu-int8", tmp_path / "cache", deadline=-1.0,
                                       clock=lambda: 0.0)
            steps.append(summary)
            if "pending" not in summary:
                break
    assert client.denied_absences == [] and len(steps) > 2 and all("replayed" in s["pending"] for s in steps[:-1])
    assert steps[-1]["passed"] is True and steps[-1]["steps"] == len(steps)
    stored = [o["Key"] for o in aws.list_objects_v2(Bucket=BUCKET, Prefix="laya-artifacts/gates/")["Contents"]]
    assert sorted(stored) == sorted(["laya-artifacts/" + gate_record_key(artifact_id, kernels),
                                     "laya-artifacts/" + progress_key(artifact_id, kernels)])


@pytest.mark.parametrize("key", ["laya-artifacts/artifacts/x", "laya-artifacts/pointers/demo/cpu-int8.json",
                                 "laya-artifacts/goldens/x.json", "laya-artifacts/jobs/x"])
def test_the_deploy_gate_writes_nothing_but_gate_records(aws: Any, synth: Any, key: str) -> None:
    with as_role(_gate_role(synth()[1]), "deploy-gate") as session, pytest.raises(ClientError) as denied:
        session.client("s3").put_object(Bucket=BUCKET, Key=key, Body=b"{}")
    assert denied.value.response["Error"]["Code"] == "AccessDenied"
