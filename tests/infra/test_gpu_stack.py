"""`-c gpu=true`: the CUDA image as an asset, the SageMaker endpoint and its scaling, `/gpu` routes behind the
same authorizer, InvokeEndpoint granted on that endpoint only; flags checked early with the `-c` to use."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from laya_infra.config import ConfigError
from laya_infra.gpu_config import GpuConfig
from laya_serverless import settings as env

from .test_stack import as_list, methods, resources, role_statements

GPU = {"gpu": "true", "prefix": "/laya", "gpu_min_instances": "2", "gpu_max_instances": "4",
       "gpu_instance_type": "ml.g6.xlarge", "gpu_target": "cuda-fp32"}
ZERO = {"gpu": "true", "gpu_min_instances": "0", "gpu_max_instances": "3"}


def one(raw: dict[str, Any], kind: str) -> tuple[str, dict[str, Any]]:
    [(logical_id, resource)] = resources(raw, kind).items()
    return logical_id, resource["Properties"]


def test_without_the_flag_there_is_no_gpu_endpoint(synth: Any) -> None:
    _, raw, _ = synth()
    assert not [r for r in raw["Resources"].values() if r["Type"].startswith("AWS::SageMaker")]
    assert not any(path.startswith("/gpu") for _, path in methods(raw))


def test_the_endpoint_serves_the_image_asset_on_the_chosen_gpu(synth: Any) -> None:
    _, raw, out = synth(**GPU)
    _, model = one(raw, "AWS::SageMaker::Model")
    container = model["PrimaryContainer"]
    assert "container-assets" in json.dumps(container["Image"])
    assert container["Environment"][env.DEVICE] == "cuda" and container["Environment"][env.TARGET] == "cuda-fp32"
    assert env.API_KEY not in container["Environment"] and env.API_KEY_SECRET not in container["Environment"]
    _, config = one(raw, "AWS::SageMaker::EndpointConfig")
    [variant] = config["ProductionVariants"]
    assert (variant["InstanceType"], variant["InitialInstanceCount"]) == ("ml.g6.xlarge", 2)
    assert variant["InferenceAmiVersion"].startswith("al2-ami-sagemaker-inference-gpu")
    [image] = json.loads((out / "LayaServerless.assets.json").read_text())["dockerImages"].values()
    assert image["source"]["dockerFile"] == "layers/gpu/Dockerfile"
    staged = Path(out) / image["source"]["directory"]
    top = {p.relative_to(staged).parts[:2] for p in staged.rglob("*") if p.is_file()}
    assert top == {("functions", "laya_serverless"), ("layers", "gpu")}   # the context is the two folders


def test_target_tracking_scales_between_the_context_bounds(synth: Any) -> None:
    _, raw, _ = synth(**GPU)
    _, target = one(raw, "AWS::ApplicationAutoScaling::ScalableTarget")
    assert (target["MinCapacity"], target["MaxCapacity"]) == (2, 4)
    assert target["ScalableDimension"] == "sagemaker:variant:DesiredInstanceCount"
    _, policy = one(raw, "AWS::ApplicationAutoScaling::ScalingPolicy")
    tracking = policy["TargetTrackingScalingPolicyConfiguration"]
    assert tracking["PredefinedMetricSpecification"]["PredefinedMetricType"] == "SageMakerVariantInvocationsPerInstance"


def test_gpu_routes_sit_under_the_prefix_behind_the_same_authorizer(synth: Any) -> None:
    _, raw, _ = synth(**GPU)
    found = methods(raw)
    cpu = found[("POST", "/laya/v1/systemone")]
    for key in (("POST", "/laya/gpu/v1/systemone"), ("POST", "/laya/gpu/v1/systemone/batch"),
                ("GET", "/laya/gpu/health")):
        method = found[key]
        assert method["AuthorizationType"] == "CUSTOM" and method["AuthorizerId"] == cpu["AuthorizerId"], key
        assert method["Integration"]["Type"] == "AWS_PROXY"
        assert method["Integration"]["Uri"] != cpu["Integration"]["Uri"]   # the proxy function, not the API's


def test_invoke_endpoint_is_granted_on_that_endpoint_only(synth: Any) -> None:
    _, raw, _ = synth(**GPU)
    endpoint, _ = one(raw, "AWS::SageMaker::Endpoint")
    grants = [(policy["Properties"]["Roles"], s) for policy in resources(raw, "AWS::IAM::Policy").values()
              for s in policy["Properties"]["PolicyDocument"]["Statement"]
              if any(a.startswith("sagemaker:") for a in as_list(s["Action"]))]
    [(roles, statement)] = grants
    assert as_list(statement["Action"]) == ["sagemaker:InvokeEndpoint"] and statement["Resource"] == {"Ref": endpoint}
    [proxy] = [f["Properties"] for f in resources(raw, "AWS::Lambda::Function").values()
               if f["Properties"]["Handler"] == "proxy.handler"]
    assert roles == [{"Ref": proxy["Role"]["Fn::GetAtt"][0]}]
    assert proxy["Environment"]["Variables"][env.GPU_ENDPOINT] == {"Fn::GetAtt": [endpoint, "EndpointName"]}


def test_the_execution_role_reads_the_gpu_targets_pointers_and_pulls_the_image(synth: Any) -> None:
    _, raw, _ = synth(**GPU)
    _, model = one(raw, "AWS::SageMaker::Model")
    statements = role_statements(raw, model["ExecutionRoleArn"]["Fn::GetAtt"][0])
    text = json.dumps(statements)
    assert "pointers/demo/cuda-fp32.json" in text and "cpu-int8" not in text
    actions = {a for s in statements for a in as_list(s["Action"])}
    assert {"ecr:BatchGetImage", "s3:GetObject", "logs:PutLogEvents"} <= actions
    assert not any(a.startswith(("s3:Put", "s3:Delete", "sagemaker:")) for a in actions)


def test_cdk_nag_passes_with_gpu_and_auth_off(synth: Any) -> None:
    _, raw, _ = synth(gpu="true", auth="false")
    assert ("POST", "/gpu/v1/systemone") in methods(raw)
    assert methods(raw)[("POST", "/gpu/v1/systemone")]["AuthorizationType"] == "NONE"


@pytest.mark.parametrize(("context", "message"), [
    ({"gpu": "maybe"}, r"context 'gpu' must be true or false, got 'maybe' \(use -c gpu=true\)"),
    ({"gpu_instance_type": "ml.g5.xlarge"}, r"'gpu_instance_type' only applies .* \(use -c gpu=true with it\)"),
    ({"gpu": "true", "gpu_instance_type": "ml.m5.xlarge"},
     r"must be a SageMaker GPU instance .* got 'ml.m5.xlarge' \(use -c gpu_instance_type=ml.g5.xlarge\)"),
    ({"gpu": "true", "gpu_min_instances": "-1"}, r"'gpu_min_instances' must be an integer 0-20, got '-1'"),
    ({"gpu": "true", "gpu_min_instances": "0", "gpu_max_instances": "0"},
     r"'gpu_max_instances' must be an integer 1-20, got '0'"),   # scale to zero still needs a copy to scale to
    ({"gpu": "true", "gpu_min_instances": "0", "gpu_invocations_per_instance": "600"},
     r"'gpu_invocations_per_instance' does not apply with gpu_min_instances=0.*\(use -c gpu_min_instances=1 with it\)"),
    ({"gpu": "true", "gpu_min_instances": "3", "gpu_max_instances": "2"},
     r"'gpu_max_instances' \(2\) is below 'gpu_min_instances' \(3\) \(use -c gpu_max_instances=3\)"),
    ({"gpu": "true", "gpu_target": "cpu-int8"}, r"'gpu_target' must be one of cuda-fp16, cuda-fp32"),
    ({"gpu": "true", "gpu_invocations_per_instance": "lots"}, r"'gpu_invocations_per_instance' must be an integer"),
])
def test_gpu_flags_are_checked_early_with_the_flag_to_use(context: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        GpuConfig.from_context(context.get)


def test_the_lambda_api_refuses_a_cuda_target_and_points_at_the_gpu_flags() -> None:
    from laya_infra.config import DeployConfig

    with pytest.raises(ConfigError, match=r"'target' needs a GPU.*-c gpu=true -c gpu_target=cuda-fp16.*"
                                          r"got 'cuda-fp16' \(use -c target=cpu-int8\)"):
        DeployConfig.from_context({"target": "cuda-fp16"}.get)


def test_a_bad_gpu_flag_stops_the_app_before_any_construct(asset_dir: Path, tmp_path: Path) -> None:
    from app import build_app

    with pytest.raises(ConfigError, match="gpu_target"):
        build_app({"asset_dir": str(asset_dir), "gpu": "true", "gpu_target": "fp16"}, outdir=str(tmp_path))
    assert GpuConfig.from_context({"gpu": "false"}.get) is None and GpuConfig.from_context({}.get) is None


def test_scale_to_zero_hosts_the_model_as_an_inference_component_whose_copies_go_to_zero(synth: Any) -> None:
    _, raw, _ = synth(**ZERO)
    model_id, _ = one(raw, "AWS::SageMaker::Model")
    _, config = one(raw, "AWS::SageMaker::EndpointConfig")
    [variant] = config["ProductionVariants"]
    assert "ModelName" not in variant and "ExecutionRoleArn" in config   # the model lives in the component
    assert variant["ManagedInstanceScaling"] == {"Status": "ENABLED", "MinInstanceCount": 0, "MaxInstanceCount": 3}
    assert variant["RoutingConfig"] == {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"}
    component_id, component = one(raw, "AWS::SageMaker::InferenceComponent")
    spec = component["Specification"]
    assert spec["ModelName"] == {"Fn::GetAtt": [model_id, "ModelName"]}
    assert spec["ComputeResourceRequirements"]["NumberOfAcceleratorDevicesRequired"] == 1
    assert component["RuntimeConfig"] == {"CopyCount": 1}
    _, target = one(raw, "AWS::ApplicationAutoScaling::ScalableTarget")
    assert (target["MinCapacity"], target["MaxCapacity"]) == (0, 3)
    assert target["ScalableDimension"] == "sagemaker:inference-component:DesiredCopyCount"
    policies = {p["PolicyType"]: p for p in (r["Properties"] for r in resources(
        raw, "AWS::ApplicationAutoScaling::ScalingPolicy").values())}
    tracking = policies["TargetTrackingScaling"]["TargetTrackingScalingPolicyConfiguration"]
    assert tracking["PredefinedMetricSpecification"]["PredefinedMetricType"] == (
        "SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution")   # reads 0 when idle: scales in to 0
    [step] = policies["StepScaling"]["StepScalingPolicyConfiguration"]["StepAdjustments"]
    assert step["ScalingAdjustment"] == 1 and step["MetricIntervalLowerBound"] == 0
    step_id = [k for k, r in resources(raw, "AWS::ApplicationAutoScaling::ScalingPolicy").items()
               if r["Properties"]["PolicyType"] == "StepScaling"][0]
    [alarm] = [r["Properties"] for r in resources(raw, "AWS::CloudWatch::Alarm").values()
               if r["Properties"].get("MetricName") == "NoCapacityInvocationFailures"]
    assert alarm["AlarmActions"] == [{"Ref": step_id}] and alarm["Threshold"] == 1
    name = component_name(component_id)
    assert alarm["Dimensions"] == [{"Name": "InferenceComponentName", "Value": name}]
    assert target["ResourceId"] == {"Fn::Join": ["", ["inference-component/", name]]}
    [proxy] = [f["Properties"] for f in resources(raw, "AWS::Lambda::Function").values()
               if f["Properties"]["Handler"] == "proxy.handler"]
    assert proxy["Environment"]["Variables"][env.GPU_INFERENCE_COMPONENT] == name


def component_name(component_id: str) -> dict[str, Any]:
    """The component's name, read off its ARN (CloudFormation returns no name attribute for it)."""
    arn = {"Fn::GetAtt": [component_id, "InferenceComponentArn"]}
    return {"Fn::Select": [1, {"Fn::Split": ["inference-component/", arn]}]}


def test_at_one_instance_or_more_the_endpoint_stays_a_plain_variant(synth: Any) -> None:
    _, raw, _ = synth(**GPU)
    assert not resources(raw, "AWS::SageMaker::InferenceComponent")
    _, config = one(raw, "AWS::SageMaker::EndpointConfig")
    assert "ManagedInstanceScaling" not in config["ProductionVariants"][0]


@pytest.mark.parametrize("context", [GPU, ZERO], ids=["min-2", "scale-to-zero"])
def test_cfn_lint_finds_nothing_but_w3005_in_the_gpu_template(synth: Any, context: dict[str, str]) -> None:
    import subprocess
    import sys

    _, _, out = synth(**context)
    cfn_lint = Path(sys.executable).parent / "cfn-lint"
    template = out / "LayaServerless.template.json"
    result = subprocess.run([str(cfn_lint), "--ignore-checks", "W3005", "--", str(template)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_container_starts_without_a_jobs_engine(synth: Any) -> None:
    # `laya-serverless serve` (the image's CMD) builds a local jobs engine from the environment, and that engine
    # lists jobs/ at start, which the endpoint's role may not: from the synthesized environment it builds none.
    from laya_serverless.local_edge.jobs_engine import local_jobs
    from laya_serverless.settings import Settings

    _, raw, _ = synth(**GPU)
    _, model = one(raw, "AWS::SageMaker::Model")
    variables = {k: v for k, v in model["PrimaryContainer"]["Environment"].items() if isinstance(v, str)}
    variables[env.STORE] = "s3://bucket/laya-artifacts"  # a Join of the bucket's name in the template
    assert local_jobs(Settings.from_environ(variables)) is None
