"""`-c compute=managed-instances`: the API function on a capacity provider pinned to instance families whose int8
class the gate covers, with as many processes per environment as copies of the model fit in its memory."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from aws_cdk.assertions import Match

MANAGED = {"compute": "managed-instances"}


def _provider(raw: dict[str, Any]) -> dict[str, Any]:
    (props,) = [r["Properties"] for r in raw["Resources"].values() if r["Type"] == "AWS::Lambda::CapacityProvider"]
    return props


def _api_function(raw: dict[str, Any]) -> dict[str, Any]:
    from laya_infra.constants import HANDLER

    (props,) = [r["Properties"] for r in raw["Resources"].values()
                if r["Type"] == "AWS::Lambda::Function" and r["Properties"].get("Handler") == HANDLER]
    return props


def test_the_default_stack_has_no_capacity_provider(synth):
    _, raw, _ = synth()
    assert not [r for r in raw["Resources"].values() if r["Type"] == "AWS::Lambda::CapacityProvider"]
    assert "CapacityProviderConfig" not in _api_function(raw)


def test_the_api_function_runs_on_a_provider_pinned_to_covered_families(synth):
    template, raw, _ = synth(**MANAGED)
    provider = _provider(raw)
    assert provider["InstanceRequirements"] == {"AllowedInstanceTypes": ["c7i.xlarge", "m7i.xlarge"],
                                                "Architectures": ["x86_64"]}
    assert provider["CapacityProviderScalingConfig"] == {"MaxVCpuCount": 32}
    assert len(provider["VpcConfig"]["SubnetIds"]) >= 2          # private subnets in more than one zone
    function = _api_function(raw)
    config = function["CapacityProviderConfig"]["LambdaManagedInstancesCapacityProviderConfig"]
    # 2048 MB, a copy of the demo needs (2.68 x 101 + 100) x 1.1 -> 448 MB at INIT: four processes fit
    assert (config["PerExecutionEnvironmentMaxConcurrency"], config["ExecutionEnvironmentMemoryGiBPerVCpu"]) == (4, 2)
    assert function["Environment"]["Variables"]["LAYA_THREADS"] == "1"   # one vCPU shared by four processes
    assert "SnapStart" not in function                                   # managed instances run no SnapStart
    template.has_resource_properties("AWS::EC2::FlowLog", {"TrafficType": "ALL"})
    template.has_resource_properties("AWS::EC2::VPCEndpoint", {"ServiceName": Match.any_value(),
                                                               "VpcEndpointType": "Gateway"})


def test_concurrency_follows_the_graph_and_threads_share_the_vcpus(synth):
    _, raw, _ = synth(**MANAGED, memory="8192", graph_mb="626", mi_concurrency="2")
    function = _api_function(raw)
    config = function["CapacityProviderConfig"]["LambdaManagedInstancesCapacityProviderConfig"]
    assert config["PerExecutionEnvironmentMaxConcurrency"] == 2
    assert function["Environment"]["Variables"]["LAYA_THREADS"] == "2"   # 4 vCPUs (8 GiB at 2 GiB each) / 2


def test_graviton_families_for_an_fp32_target_on_arm64(synth):
    _, raw, _ = synth(**MANAGED, arch="arm64", target="cpu-fp32", instance_types="c8g.xlarge,c7g.2xlarge")
    assert _provider(raw)["InstanceRequirements"] == {"AllowedInstanceTypes": ["c8g.xlarge", "c7g.2xlarge"],
                                                      "Architectures": ["arm64"]}


def test_cdk_nag_and_cfn_lint_pass_on_the_managed_instances_stack(synth):
    _, _, out = synth(**MANAGED)
    report = out / "validation-report.json"
    assert not report.exists() or '"conclusion": "failure"' not in report.read_text()
    cfn_lint = Path(sys.executable).parent / "cfn-lint"
    template = out / "LayaServerless.template.json"
    result = subprocess.run([str(cfn_lint), "--ignore-checks", "W3005", "--", str(template)], capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("context, message", [
    ({"compute": "ec2"}, "must be one of lambda, managed-instances, got 'ec2' (use -c compute=managed-instances)"),
    ({"instance_types": "c7i.xlarge"}, "applies to managed instances only (use -c compute=managed-instances)"),
    ({**MANAGED, "instance_types": "c5.xlarge"}, "not a type of a known C/M/R family"),
    ({**MANAGED, "instance_types": "t3.micro"}, "use -c instance_types=c7i.xlarge,m7i.xlarge"),
    ({**MANAGED, "instance_types": "c7g.xlarge"}, "c7g.xlarge is not an x86_64 type"),
    ({**MANAGED, "arch": "arm64", "instance_types": "c7g.xlarge"},
     "c7g.xlarge runs int8 on the arm64-i8mm class, which the gate does not cover"),
    ({**MANAGED, "snapstart": "true"}, "run neither SnapStart nor provisioned concurrency (use -c snapstart=false"),
    ({**MANAGED, "snapstart": "false", "provisioned_concurrency": "2"}, "neither SnapStart nor provisioned"),
    ({**MANAGED, "mi_concurrency": "5"}, "only 4 copies of the deployed checkpoints (448 MB each at INIT) fit in "
                                         "2048 MB (use -c mi_concurrency=4"),
    ({**MANAGED, "graph_mb": "626", "memory": "2048", "mi_concurrency": "2"}, "-c mi_concurrency=1"),
])
def test_bad_managed_instances_context_fails_naming_the_flag(context, message, asset_dir):
    from laya_infra.config import ConfigError, DeployConfig

    values = {"asset_dir": str(asset_dir), **context}
    with pytest.raises(ConfigError, match=re.escape(message)):
        DeployConfig.from_context(values.get)


def test_every_x86_class_the_gate_covers_is_accepted_for_int8(asset_dir):
    from laya_infra.config import DeployConfig

    types = "c7i.large,c6i.large,c7a.large,c6a.large"   # AMX, AVX-512 VNNI (Intel, AMD), AVX2 (proven by emulation)
    values = {"asset_dir": str(asset_dir), **MANAGED, "instance_types": types}
    assert DeployConfig.from_context(values.get).instance_types == tuple(types.split(","))
