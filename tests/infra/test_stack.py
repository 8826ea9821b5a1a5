"""Template assertions on the synthesized stack: resources, least-privilege IAM, auth, prefix, env wiring."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from aws_cdk.assertions import Match

from laya_serverless import settings as env

API_FUNCTION_HANDLER = "laya_serverless.lambda_edge.api_handler.handler"


def resources(raw: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in raw["Resources"].items() if v["Type"] == kind}


def api_function(raw: dict[str, Any]) -> dict[str, Any]:
    [function] = [r for r in resources(raw, "AWS::Lambda::Function").values()
                  if r["Properties"]["Handler"] == API_FUNCTION_HANDLER]
    return function["Properties"]


def role_statements(raw: dict[str, Any], role_logical_id: str) -> list[dict[str, Any]]:
    statements = []
    for policy in resources(raw, "AWS::IAM::Policy").values():
        if {"Ref": role_logical_id} in policy["Properties"]["Roles"]:
            statements.extend(policy["Properties"]["PolicyDocument"]["Statement"])
    return statements


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def path_of(raw: dict[str, Any], logical_id: str) -> str:
    """A REST resource's full path, rebuilt from its ParentId chain."""
    parts = []
    while logical_id in raw["Resources"] and raw["Resources"][logical_id]["Type"] == "AWS::ApiGateway::Resource":
        props = raw["Resources"][logical_id]["Properties"]
        parts.append(props["PathPart"])
        parent = props["ParentId"]
        logical_id = parent.get("Ref", "") if isinstance(parent, dict) else ""
    return "/" + "/".join(reversed(parts))


def methods(raw: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    out = {}
    for method in resources(raw, "AWS::ApiGateway::Method").values():
        props = method["Properties"]
        resource = props["ResourceId"].get("Ref") if "Ref" in props["ResourceId"] else None
        out[(props["HttpMethod"], path_of(raw, resource) if resource else "/")] = props
    return out


# ---------------------------------------------------------------------------- artifact bucket

def test_artifact_bucket_is_private_encrypted_versioned_and_tls_only(synth):
    template, raw, _ = synth()
    template.has_resource("AWS::S3::Bucket", {
        "Properties": Match.object_like({
            "VersioningConfiguration": {"Status": "Enabled"},
            "PublicAccessBlockConfiguration": {"BlockPublicAcls": True, "BlockPublicPolicy": True,
                                               "IgnorePublicAcls": True, "RestrictPublicBuckets": True},
            "BucketEncryption": {"ServerSideEncryptionConfiguration": [
                {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]},
            "LoggingConfiguration": Match.object_like({"LogFilePrefix": "artifact-bucket/"}),
        }),
        "DeletionPolicy": "Retain",
    })
    policies = resources(raw, "AWS::S3::BucketPolicy").values()
    tls = [s for p in policies for s in p["Properties"]["PolicyDocument"]["Statement"]
           if s.get("Condition", {}).get("Bool", {}).get("aws:SecureTransport") == "false"]
    assert len(tls) == 2 and all(s["Effect"] == "Deny" for s in tls)   # artifact and access-log buckets


def _artifact_bucket_rules(raw):
    [bucket] = [r for r in resources(raw, "AWS::S3::Bucket").values()
                if r["Properties"].get("VersioningConfiguration")]
    return {rule["Id"]: rule for rule in bucket["Properties"]["LifecycleConfiguration"]["Rules"]}


def test_job_data_expires_after_the_retention_days_and_artifacts_never(synth):
    from laya_artifacts.deploy.bucket import lifecycle_rules

    for context, days, prefix in (({}, 30, "laya-artifacts"), ({"jobs_retention_days": "7",
                                                                 "artifact_prefix": "team/laya"}, 7, "team/laya")):
        rules = _artifact_bucket_rules(synth(**context)[1])
        assert rules == {
            "laya-jobs-expire": {"Id": "laya-jobs-expire", "Prefix": prefix + "/jobs/", "Status": "Enabled",
                                 "ExpirationInDays": days, "NoncurrentVersionExpiration": {"NoncurrentDays": 1}},
            "laya-jobs-delete-markers": {"Id": "laya-jobs-delete-markers", "Prefix": prefix + "/jobs/",
                                         "Status": "Enabled", "ExpiredObjectDeleteMarker": True},
            "laya-abort-multipart": {"Id": "laya-abort-multipart", "Status": "Enabled",
                                     "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 7}},
        }
        # the same rules as the deploy command puts on the bucket it creates (S3's API spelling there)
        api = {rule["ID"]: rule for rule in lifecycle_rules(prefix, days)}
        assert api["laya-jobs-expire"]["Expiration"]["Days"] == rules["laya-jobs-expire"]["ExpirationInDays"]
        assert api["laya-jobs-expire"]["Filter"]["Prefix"] == rules["laya-jobs-expire"]["Prefix"]
        assert api["laya-jobs-expire"]["NoncurrentVersionExpiration"] == rules["laya-jobs-expire"][
            "NoncurrentVersionExpiration"]
        assert api["laya-abort-multipart"]["AbortIncompleteMultipartUpload"] == rules["laya-abort-multipart"][
            "AbortIncompleteMultipartUpload"]
        assert set(api) == set(rules)


def test_an_existing_bucket_is_used_by_name_and_none_is_created(synth):
    template, raw, _ = synth(artifact_bucket="my-laya-artifacts", artifact_prefix="team/laya")
    template.resource_count_is("AWS::S3::Bucket", 0)
    variables = api_function(raw)["Environment"]["Variables"]
    assert variables[env.STORE] == "s3://my-laya-artifacts/team/laya"
    role = api_function(raw)["Role"]["Fn::GetAtt"][0]
    s3_resources = [r for s in role_statements(raw, role) if s["Action"] == "s3:GetObject"
                    for r in as_list(s["Resource"])]
    rendered = json.dumps(s3_resources)
    assert "my-laya-artifacts/team/laya/pointers/demo/cpu-int8.json" in rendered
    assert "my-laya-artifacts/team/laya/artifacts/*" in rendered


# ------------------------------------------------------------------------------- API function

def test_api_function_runtime_architecture_sizes_and_layer(synth):
    _, raw, _ = synth()
    props = api_function(raw)
    assert props["Runtime"] == "python3.12"
    assert props["Architectures"] == ["x86_64"]
    assert props["MemorySize"] == 2048 and props["Timeout"] == 29
    assert len(props["Layers"]) == 1
    assert props["LoggingConfig"]["LogFormat"] == "JSON"
    [layer] = resources(raw, "AWS::Lambda::LayerVersion").values()
    assert layer["Properties"]["CompatibleRuntimes"] == ["python3.12"]
    assert layer["Properties"]["CompatibleArchitectures"] == ["x86_64"]


def test_arm64_memory_timeout_and_reserved_concurrency_come_from_context(synth):
    _, raw, _ = synth(arch="arm64", memory="4096", timeout="20", reserved_concurrency="7")
    props = api_function(raw)
    assert props["Architectures"] == ["arm64"]
    assert props["MemorySize"] == 4096 and props["Timeout"] == 20
    assert props["ReservedConcurrentExecutions"] == 7
    # no hard-coded thread count: the runtime sizes its sessions to the CPU quota this memory buys (cpu_share)
    assert env.THREADS not in props["Environment"]["Variables"]
    [layer] = resources(raw, "AWS::Lambda::LayerVersion").values()
    assert layer["Properties"]["CompatibleArchitectures"] == ["arm64"]


def test_environment_uses_the_runtime_settings_names(synth):
    _, raw, _ = synth(prefix="/laya", deployed="english=demo,legal=legal-v2", jev_strict="true", graph_mb="101")
    variables = api_function(raw)["Environment"]["Variables"]
    store = variables[env.STORE]["Fn::Join"][1]
    assert store[0] == "s3://" and "Ref" in store[1] and store[2] == "/laya-artifacts"
    assert variables[env.DEPLOYED] == "english=demo,legal=legal-v2"
    assert variables[env.TARGET] == "cpu-int8"
    assert variables[env.CACHE_DIR] == "/tmp/laya-artifacts"
    assert variables[env.JEV_STRICT] == "1"
    assert variables[env.API_BASE_PATH] == "/laya"
    assert variables[env.ROOT_PATH] == "/prod/laya"
    assert "Ref" in variables[env.API_KEY_SECRET]
    assert env.API_KEY not in variables   # the key itself never sits in the function's configuration
    # What the stack sets is what the runtime reads: Settings accepts it.
    plain = {k: v for k, v in variables.items() if isinstance(v, str)}
    parsed = env.Settings.from_environ(plain)
    assert parsed.deployment.deployed == {"english": "demo", "legal": "legal-v2"} and parsed.protocol.jev_strict


# ---------------------------------------------------------------------------------- IAM

def test_api_role_is_least_privilege(synth):
    _, raw, _ = synth(deployed="english=demo,legal=legal-v2", graph_mb="101")
    role_id = api_function(raw)["Role"]["Fn::GetAtt"][0]
    role = raw["Resources"][role_id]["Properties"]
    assert "ManagedPolicyArns" not in role   # no AWSLambdaBasicExecutionRole: logs go to its own group
    statements = role_statements(raw, role_id)
    # Active tracing: X-Ray's two write actions have no resource-level permissions, hence "*" for them only.
    tracing = [s for s in statements if all(a.startswith("xray:") for a in as_list(s["Action"]))]
    assert [sorted(as_list(s["Action"])) for s in tracing] == [["xray:PutTelemetryRecords", "xray:PutTraceSegments"]]
    statements = [s for s in statements if s not in tracing]
    actions = [a for s in statements for a in as_list(s["Action"])]
    assert all("*" not in a for a in actions), actions
    # Read artifacts and pointers; read, write and list only under jobs/ (batch jobs are submitted here).
    assert {a for a in actions if a.startswith("s3:")} == {"s3:GetObject", "s3:PutObject", "s3:ListBucket"}
    assert all(s["Effect"] == "Allow" for s in statements)
    for statement in statements:
        for resource in as_list(statement["Resource"]):
            assert resource != "*"
    s3 = [json.dumps(r) for s in statements if s["Action"] == "s3:GetObject" for r in as_list(s["Resource"])]
    for checkpoint in ("demo", "legal-v2"):  # its target's pointer, and its FP32 fallback's
        for target in ("cpu-int8", "cpu-fp32"):
            assert any("/laya-artifacts/pointers/%s/%s.json" % (checkpoint, target) in r for r in s3)
    wildcards = [r for r in s3 if "*" in r]
    assert wildcards and all(("/laya-artifacts/artifacts/*" in r or "/laya-artifacts/gates/*" in r) for r in wildcards)
    writes = [json.dumps(r) for s in statements if "s3:PutObject" in as_list(s["Action"])
              for r in as_list(s["Resource"])]
    assert writes and all(r.endswith('"/laya-artifacts/jobs/*"]]}') for r in writes), writes
    listings = [s["Condition"] for s in statements if s["Action"] == "s3:ListBucket"]
    # jobs/ for the job routes; gates/ so that an absent gate record reads as 404 (S3 answers 403 without it)
    wanted = [{"StringLike": {"s3:prefix": [p]}} for p in ("laya-artifacts/jobs/*", "laya-artifacts/gates/*")]
    assert sorted(json.dumps(c) for c in listings) == sorted(json.dumps(c) for c in wanted)
    secret_reads = [s for s in statements if "secretsmanager:GetSecretValue" in as_list(s["Action"])]
    assert secret_reads and all("Ref" in s["Resource"] for s in secret_reads)
    logs = [s for s in statements if "logs:PutLogEvents" in as_list(s["Action"])]
    assert logs and all("Fn::GetAtt" in s["Resource"] for s in logs)


# --------------------------------------------------------------------------- gateway and auth

def test_decision_routes_need_the_authorizer_and_health_does_not(synth):
    template, raw, _ = synth()
    template.has_resource_properties("AWS::ApiGateway::Authorizer", {
        "Type": "TOKEN", "IdentitySource": "method.request.header.Authorization",
        "AuthorizerResultTtlInSeconds": 300,
    })
    routes = methods(raw)
    jobs = {("POST", "/v1/jobs"), ("GET", "/v1/jobs/{id}"), ("GET", "/v1/jobs/{id}/results")}
    assert set(routes) == {("GET", "/health"), ("POST", "/v1/systemone"), ("POST", "/v1/systemone/batch"),
                           ("GET", "/v1/models")} | jobs
    for route in {("POST", "/v1/systemone"), ("POST", "/v1/systemone/batch"), ("GET", "/v1/models")} | jobs:
        assert routes[route]["AuthorizationType"] == "CUSTOM"
        assert "AuthorizerId" in routes[route]
    assert routes[("GET", "/health")]["AuthorizationType"] == "NONE"
    assert "AuthorizerId" not in routes[("GET", "/health")]
    [authorizer] = [r["Properties"] for r in resources(raw, "AWS::Lambda::Function").values()
                    if r["Properties"]["Handler"] == "authorizer.handler"]
    source = (Path(__file__).resolve().parents[2] / "functions" / "gateway_authorizer" / "authorizer.py").read_text()
    assert 'SECRET_ENV = "%s"' % env.API_KEY_SECRET in source
    assert set(authorizer["Environment"]["Variables"]) == {env.API_KEY_SECRET}
    template.has_resource_properties("AWS::SecretsManager::Secret", {
        "GenerateSecretString": Match.object_like({"PasswordLength": 48, "ExcludePunctuation": True})})


def test_gateway_denials_answer_like_the_protocol(synth):
    _, raw, _ = synth()
    responses = {r["Properties"]["ResponseType"]: r["Properties"] for r in
                 resources(raw, "AWS::ApiGateway::GatewayResponse").values()}
    for kind in ("UNAUTHORIZED", "ACCESS_DENIED"):
        assert responses[kind]["StatusCode"] == "401"
        assert json.loads(responses[kind]["ResponseTemplates"]["application/json"]) == {
            "detail": "invalid or missing bearer token"}
    assert responses["MISSING_AUTHENTICATION_TOKEN"]["StatusCode"] == "404"


def test_routes_live_under_the_prefix(synth):
    _, raw, _ = synth(prefix="/laya/v2", stage="live")
    assert set(methods(raw)) == {("GET", "/laya/v2/health"), ("POST", "/laya/v2/v1/systemone"),
                                 ("POST", "/laya/v2/v1/systemone/batch"), ("GET", "/laya/v2/v1/models"),
                                 ("POST", "/laya/v2/v1/jobs"), ("GET", "/laya/v2/v1/jobs/{id}"),
                                 ("GET", "/laya/v2/v1/jobs/{id}/results")}
    variables = api_function(raw)["Environment"]["Variables"]
    assert variables[env.API_BASE_PATH] == "/laya/v2"
    assert variables[env.ROOT_PATH] == "/live/laya/v2"
    parts = raw["Outputs"]["ApiUrl"]["Value"]["Fn::Join"][1]
    assert parts[-1] == "/laya/v2" and "Stagelive" in parts[-2]["Ref"]


def test_without_auth_there_is_no_authorizer_or_secret_and_the_docs_are_routed(synth):
    template, raw, _ = synth(auth="false")
    template.resource_count_is("AWS::ApiGateway::Authorizer", 0)
    template.resource_count_is("AWS::SecretsManager::Secret", 0)
    routes = methods(raw)
    assert {("GET", "/docs"), ("GET", "/redoc"), ("GET", "/openapi.json")} <= set(routes)
    assert all(r["AuthorizationType"] == "NONE" for r in routes.values())
    assert env.API_KEY_SECRET not in api_function(raw)["Environment"]["Variables"]


def test_an_existing_secret_is_read_by_arn(synth):
    arn = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:laya-key-AbCdEf"
    template, raw, _ = synth(api_key_secret=arn)
    template.resource_count_is("AWS::SecretsManager::Secret", 0)
    assert api_function(raw)["Environment"]["Variables"][env.API_KEY_SECRET] == arn


def test_throttling_and_access_logs_on_the_stage(synth):
    template, _, _ = synth(throttle_rate="12", throttle_burst="34")
    template.has_resource_properties("AWS::ApiGateway::Stage", {
        "StageName": "prod",
        "MethodSettings": Match.array_with([Match.object_like({
            "ThrottlingRateLimit": 12, "ThrottlingBurstLimit": 34, "HttpMethod": "*", "ResourcePath": "/*"})]),
        "AccessLogSetting": Match.object_like({"DestinationArn": Match.any_value()}),
    })
    template.has_resource_properties("AWS::ApiGateway::RestApi", {"BinaryMediaTypes": ["*/*"]})


def test_alarms_cover_errors_throttles_duration_and_cold_starts(synth):
    template, raw, _ = synth(alarm_email="ops@example.com", init_alarm_ms="3000")
    alarms = {a["Properties"].get("MetricName"): a["Properties"]
              for a in resources(raw, "AWS::CloudWatch::Alarm").values()}
    assert {"Errors", "Throttles", "Duration", "InitDurationMs"} <= set(alarms)
    assert alarms["InitDurationMs"]["Threshold"] == 3000
    assert all(len(a["AlarmActions"]) == 1 for a in alarms.values())
    template.has_resource_properties("AWS::Logs::MetricFilter", {
        "FilterPattern": Match.string_like_regexp("initDurationMs"),
        "MetricTransformations": [Match.object_like({"MetricValue": "$.record.metrics.initDurationMs"})],
    })
    template.has_resource_properties("AWS::SNS::Subscription", {"Protocol": "email", "Endpoint": "ops@example.com"})


def test_outputs_name_the_url_bucket_store_and_secret(synth):
    from laya_artifacts.deploy.command import OUTPUTS

    _, raw, _ = synth()
    assert {"ApiUrl", "ArtifactBucketName", "ArtifactStore", "ApiKeySecretArn", "JobsInputPrefix",
            "JobsOutputPrefix", "JobsFunctionName"} <= set(raw["Outputs"])
    assert set(OUTPUTS) <= set(raw["Outputs"])  # what `laya-artifacts deploy` reads (the default target is int8)


@pytest.mark.parametrize("context, message", [
    ({"arch": "sparc"}, "-c arch=arm64"),
    ({"memory": "lots"}, "-c memory=3008"),
    ({"memory": "128"}, "must be an integer 512-10240"),
    ({"timeout": "60"}, "-c timeout=29"),
    ({"prefix": "/has space"}, "-c prefix=/laya"),
    ({"stage": "a/b"}, "-c stage=prod"),
    ({"auth": "maybe"}, "-c auth=true"),
    ({"artifact_bucket": "Bad_Bucket"}, "-c artifact_bucket="),
    ({"deployed": "=demo"}, "-c deployed=english=demo"),
    ({"graph_mb": "626", "memory": "1024"}, "context 'memory' is 1024 MB, but the checkpoints it holds need 1984 MB "
                                            "at INIT (english 1,778 MB (626 MiB graph), +10% headroom"),
    ({"graph_mb": "626", "jobs_memory": "1536"}, "use -c jobs_memory=1984"),
    ({"graph_mb": "big"}, "-c graph_mb=laya-en=1608,laya-m=1229"),
    ({"graph_mb": "demo=0"}, "entry 'demo=0': graph must be a MiB above 0"),
    ({"expands_at_load": "demo=0.5"}, "a factor from 1 to 4, got 'demo=0.5' (use -c expands_at_load=laya-en=2)"),
    ({"init_peak_mb": "demo=lots"}, "(use -c init_peak_mb=laya-en=3500)"),
    ({"deployed": "english=laya-en"}, "context 'deployed' serves english=laya-en, whose graph size is unknown, so "
                                      "synth cannot size the functions' memory (use -c graph_mb=laya-en=<MiB"),
    ({"deployed": "english=demo,legal=legal-v2", "graph_mb": "demo=101"}, "serves legal=legal-v2, whose graph size"),
    ({"memory": "11000"}, "must be an integer 512-10240"),
    ({"jobs_retention_days": "0"}, "'jobs_retention_days' must be an integer 1-3650, got '0' "
                                   "(use -c jobs_retention_days=30)"),
    ({"jobs_retention_days": "a month"}, "-c jobs_retention_days=30"),
])
def test_bad_context_fails_early_naming_the_flag(context, message, asset_dir):
    from laya_infra.config import ConfigError, DeployConfig

    values = {"asset_dir": str(asset_dir), **context}
    with pytest.raises(ConfigError, match=re.escape(message)):
        DeployConfig.from_context(values.get)


def test_the_functions_memory_is_sized_for_the_deployed_graphs(synth):
    """`-c graph_mb` (the deploy command passes each graph): the default memory grows to what INIT needs."""
    assert api_function(synth(graph_mb="626")[1])["MemorySize"] == 2048  # a ModernBERT-base FP32 graph: 1,984 MB
    raw = synth(graph_mb="900")[1]
    assert api_function(raw)["MemorySize"] == 2816                      # (2.68 x 900 + 100) x 1.1, up to 64
    assert api_function(synth(graph_mb="900", memory="3008")[1])["MemorySize"] == 3008


def test_missing_lambda_package_says_how_to_build_it(tmp_path):
    from laya_infra.config import ConfigError, DeployConfig

    with pytest.raises(ConfigError, match=r"laya-artifacts package --arch x86_64"):
        DeployConfig.from_context({"asset_dir": str(tmp_path)}.get)


def test_jev_confidence_is_a_flag_of_the_stack(synth):
    _, raw, _ = synth(jev_confidence="jev")
    assert api_function(raw)["Environment"]["Variables"]["LAYA_JEV_CONFIDENCE"] == "jev"
    assert api_function(synth()[1])["Environment"]["Variables"]["LAYA_JEV_CONFIDENCE"] == "laya"
    with pytest.raises(Exception, match="jev_confidence.*must be one of laya, jev.*-c jev_confidence=jev"):
        synth(jev_confidence="strictest")
