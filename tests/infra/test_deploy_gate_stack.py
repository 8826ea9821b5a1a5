"""Template assertions for the deploy-time gate: an int8 target is re-gated on the API function's own CPU."""

from __future__ import annotations

import json

from laya_infra.config import DeployConfig
from laya_infra.deploy_gate import GATE_HANDLER, STEP_MARKER
from laya_serverless.gate import regate

from .test_stack import api_function, resources, role_statements


def _gate_function(raw):
    [(logical_id, function)] = [(k, r) for k, r in resources(raw, "AWS::Lambda::Function").items()
                                if r["Properties"]["Handler"] == GATE_HANDLER]
    return logical_id, function["Properties"]


def test_int8_deploys_run_the_gate_on_the_api_functions_architecture_and_memory(synth):
    _, raw, _ = synth(arch="arm64", memory="3008")
    _, gate = _gate_function(raw)
    api = api_function(raw)
    assert gate["Architectures"] == api["Architectures"] == ["arm64"]
    assert gate["MemorySize"] == api["MemorySize"] == 3008 and gate["Layers"] == api["Layers"]
    assert gate["Timeout"] == 900
    [resource] = resources(raw, "AWS::CloudFormation::CustomResource").values()
    properties = resource["Properties"]
    deployed = DeployConfig().checkpoints
    assert properties["Artifacts"] == [{"checkpoint": name, "target": "cpu-int8"} for name in deployed]
    assert properties["Strict"] == "false"
    [alias] = resources(raw, "AWS::Lambda::Alias").values()  # the API serves after the gate has run
    assert any(d.startswith("DeployGate") for d in alias.get("DependsOn", []))
    # and its version is published after it too: that publication runs the INIT SnapStart snapshots
    versions = [v for v in resources(raw, "AWS::Lambda::Version").values()
                if v["Properties"]["FunctionName"] == {"Ref": next(k for k, r in raw["Resources"].items()
                                                                   if r.get("Properties") is api)}]
    assert versions and all(any(d.startswith("DeployGate") for d in v.get("DependsOn", [])) for v in versions)
    assert "DeployGateFunctionName" in raw["Outputs"]


def test_the_gate_reads_artifacts_and_goldens_and_writes_only_gate_records(synth):
    _, raw, _ = synth()
    logical_id, gate = _gate_function(raw)
    role_id = gate["Role"]["Fn::GetAtt"][0]
    statements = role_statements(raw, role_id)
    writes = [s for s in statements if "s3:PutObject" in json.dumps(s["Action"])]
    assert len(writes) == 1 and "/gates/*" in json.dumps(writes[0]["Resource"])
    reads = json.dumps([s["Resource"] for s in statements if s["Action"] == "s3:GetObject"])
    assert "/artifacts/*" in reads and "/goldens/*" in reads
    assert not any(a in json.dumps(statements) for a in ("s3:*", "s3:DeleteObject"))
    # ListBucket on gates/ only: without it S3 answers 403 for the absent record a create-only write checks
    listings = [s for s in statements if s["Action"] == "s3:ListBucket"]
    assert listings and all(s["Condition"] == {"StringLike": {"s3:prefix": ["laya-artifacts/gates/*"]}}
                            for s in listings)


def test_strict_gates_and_fp32_deploys(synth):
    _, raw, _ = synth(deploy_gate_strict="true")
    [resource] = resources(raw, "AWS::CloudFormation::CustomResource").values()
    assert resource["Properties"]["Strict"] == "true"
    for context in ({"target": "cpu-fp32"}, {"deploy_gate": "false"}):  # nothing to re-gate, or turned off
        _, raw, _ = synth(**context)
        assert not resources(raw, "AWS::CloudFormation::CustomResource")
        assert all(r["Properties"]["Handler"] != GATE_HANDLER for r in resources(raw, "AWS::Lambda::Function").values())


def test_the_gate_runs_in_steps_polled_by_the_providers_waiter_within_cloudformations_hour(synth):
    """A replay longer than one invocation (the published English shape's) goes on over isComplete polls."""
    _, raw, _ = synth()
    assert STEP_MARKER == regate.STEP_MARKER  # what onEvent returns is what the steps look for
    logical_id, _ = _gate_function(raw)
    framework = {k: r["Properties"] for k, r in resources(raw, "AWS::Lambda::Function").items()
                 if "Provider" in k and "framework" in k}
    [is_complete] = [p for k, p in framework.items() if "isComplete" in k]
    assert is_complete["Environment"]["Variables"]["USER_IS_COMPLETE_FUNCTION_ARN"] == {
        "Fn::GetAtt": [logical_id, "Arn"]}  # the same function answers onEvent and every poll
    [properties] = [r["Properties"] for k, r in resources(raw, "AWS::StepFunctions::StateMachine").items()
                    if k.startswith("DeployGate")]
    assert properties["TracingConfiguration"] == {"Enabled": True}
    assert properties["LoggingConfiguration"]["Level"] == "ALL"
    assert properties["LoggingConfiguration"]["IncludeExecutionData"] is False
    definition = json.loads("".join(p if isinstance(p, str) else "ARN" for p in
                                    properties["DefinitionString"]["Fn::Join"][1]))
    [retry] = definition["States"]["framework-isComplete-task"]["Retry"]
    assert retry["IntervalSeconds"] == 30 and retry["IntervalSeconds"] * retry["MaxAttempts"] == 55 * 60


def test_a_pinned_artifact_is_named_to_the_gate_so_a_new_one_re_runs_it(synth):
    """`laya-artifacts deploy` pins what it published: a new artifact changes the resource, and CloudFormation
    runs the gate again."""
    name = DeployConfig().checkpoints[0]
    runs = []
    for artifact_id in ("a" * 64, "b" * 64):
        _, raw, _ = synth(artifact_pins="%s/cpu-int8=%s" % (name, artifact_id))
        [resource] = resources(raw, "AWS::CloudFormation::CustomResource").values()
        runs.append(resource["Properties"]["Artifacts"])
    assert runs[0] != runs[1] and {"checkpoint": name, "target": "cpu-int8", "artifact": "b" * 64} in runs[1]
