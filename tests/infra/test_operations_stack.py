"""Template assertions for how the functions run: SnapStart behind the live alias (or provisioned
concurrency), active tracing, and every function's async failures dead-lettered."""

from __future__ import annotations

import json
import re

import pytest

from laya_infra import constants as c

from .test_stack import api_function, resources


def _alias(raw):
    [alias] = resources(raw, "AWS::Lambda::Alias").values()
    return alias["Properties"]


def test_snapstart_on_published_versions_behind_the_alias_the_gateway_invokes(synth):
    _, raw, _ = synth()
    assert api_function(raw)["SnapStart"] == {"ApplyOn": "PublishedVersions"}
    [version_id] = resources(raw, "AWS::Lambda::Version")
    alias = _alias(raw)
    assert alias["Name"] == c.ALIAS_NAME and alias["FunctionVersion"] == {"Fn::GetAtt": [version_id, "Version"]}
    assert "ProvisionedConcurrencyConfig" not in alias
    [alias_id] = resources(raw, "AWS::Lambda::Alias")
    integrations = [m["Properties"]["Integration"] for m in resources(raw, "AWS::ApiGateway::Method").values()]
    uris = {json.dumps(i["Uri"]) for i in integrations}
    assert uris and all(alias_id in uri for uri in uris)   # every route invokes the alias, never $LATEST
    permissions = [p["Properties"] for p in resources(raw, "AWS::Lambda::Permission").values()
                   if p["Properties"]["Principal"] == "apigateway.amazonaws.com"
                   and "Authorizer" not in json.dumps(p["Properties"]["FunctionName"])]
    assert permissions and all(p["FunctionName"] == {"Ref": alias_id} for p in permissions)


def test_provisioned_concurrency_is_the_alternative(synth):
    _, raw, _ = synth(snapstart="false", provisioned_concurrency="3")
    assert "SnapStart" not in api_function(raw)
    assert _alias(raw)["ProvisionedConcurrencyConfig"] == {"ProvisionedConcurrentExecutions": 3}
    _, raw, _ = synth(provisioned_concurrency="2")   # asking for it alone turns SnapStart off
    assert "SnapStart" not in api_function(raw)


def test_snapstart_and_provisioned_concurrency_are_refused_together_naming_the_flag(asset_dir):
    from laya_infra.config import ConfigError, DeployConfig

    values = {"asset_dir": str(asset_dir), "snapstart": "true", "provisioned_concurrency": "2"}
    with pytest.raises(ConfigError, match=re.escape("-c snapstart=false")):
        DeployConfig.from_context(values.get)
    with pytest.raises(ConfigError, match=re.escape("-c provisioned_concurrency=2")):
        DeployConfig.from_context({**values, "provisioned_concurrency": "0"}.get)


def test_tracing_is_active_on_the_functions_and_the_stage(synth):
    template, raw, _ = synth()
    for function in resources(raw, "AWS::Lambda::Function").values():
        assert function["Properties"]["TracingConfig"] == {"Mode": "Active"}
    template.has_resource_properties("AWS::ApiGateway::Stage", {"TracingEnabled": True})


@pytest.mark.parametrize("context", [{}, {"auth": "false"}])
def test_every_function_dead_letters_its_async_failures(synth, context):
    template, raw, _ = synth(**context)
    [queue_id] = [q for q in resources(raw, "AWS::SQS::Queue") if q.startswith("AsyncFailures")]
    queue = raw["Resources"][queue_id]["Properties"]
    assert queue["SqsManagedSseEnabled"] is True and queue["MessageRetentionPeriod"] == 14 * 86400
    configs = [r["Properties"] for r in resources(raw, "AWS::Lambda::EventInvokeConfig").values()]
    functions = resources(raw, "AWS::Lambda::Function")
    configured = {json.dumps(cfg["FunctionName"]) for cfg in configs}
    assert all(any(fid in name for name in configured) for fid in functions), (functions.keys(), configured)
    [alias_id] = resources(raw, "AWS::Lambda::Alias")
    assert any(alias_id in json.dumps(cfg["Qualifier"]) for cfg in configs)   # the alias too, not only $LATEST
    # The jobs function's own config (retries, its dead-letter queue) is test_jobs_stack.py's.
    for cfg in (one for one in configs if not json.dumps(one["FunctionName"]).startswith('{"Ref": "Jobs')):
        assert cfg["MaximumRetryAttempts"] == 0 and cfg["MaximumEventAgeInSeconds"] == 3600
        assert cfg["DestinationConfig"]["OnFailure"]["Destination"] == {"Fn::GetAtt": [queue_id, "Arn"]}
    assert "AsyncFailureQueueUrl" in raw["Outputs"]
    [alarm] = [a for a in _alarms(raw).values() if a.get("MetricName") == "ApproximateNumberOfMessagesVisible"
               and queue_id in json.dumps(a["Dimensions"])]
    [topic_id] = resources(raw, "AWS::SNS::Topic")
    assert alarm["Threshold"] == 1 and alarm["AlarmActions"] == [{"Ref": topic_id}]


# ----------------------------------------------------------------- alarms on degraded serving, rollout, signing

_PINS = "demo/cpu-int8=%s,demo/cpu-fp32=%s" % ("a" * 64, "b" * 64)
_KEY_ARN = "arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
_SIGNED = {"signing": "true", "artifact_pins": _PINS, "rollout": "all-at-once", "gpu": "true"}


def _alarms(raw):
    return {logical: a["Properties"] for logical, a in resources(raw, "AWS::CloudWatch::Alarm").items()}


def test_degraded_serving_alarms_read_the_runtimes_metrics_and_notify_the_topic(synth):
    from laya_serverless import observe
    from laya_serverless.lambda_edge.powertools import NAMESPACE, SERVICE

    _, raw, _ = synth()
    alarms = {a.get("MetricName"): a for a in _alarms(raw).values()}
    [topic_id] = resources(raw, "AWS::SNS::Topic")
    for name in (observe.NOT_READY, observe.REFUSED_ARTIFACTS, observe.TARGET_FALLBACKS, observe.CLASS_SWITCHES):
        alarm = alarms[name]   # the names, namespace and dimension Powertools writes the EMF metric with
        assert alarm["Namespace"] == NAMESPACE and alarm["Dimensions"] == [{"Name": "service", "Value": SERVICE}]
        assert alarm["Statistic"] == "Sum" and alarm["Threshold"] == 1
        assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    for name, threshold in (("5XXError", c.API_5XX_RATE_ALARM), ("4XXError", c.API_4XX_RATE_ALARM)):
        alarm = alarms[name]
        assert alarm["Namespace"] == "AWS/ApiGateway" and alarm["Statistic"] == "Average"  # a rate, not a count
        assert alarm["Threshold"] == threshold and alarm["Dimensions"][0]["Name"] == "ApiName"
    # No address given: the topic is there anyway, every alarm on it, and its ARN is an output to subscribe to.
    assert all(a["AlarmActions"] == [{"Ref": topic_id}] for a in alarms.values())
    assert any(key.startswith("AlarmsAlarmTopicArn") for key in raw["Outputs"])
    assert not resources(raw, "AWS::SNS::Subscription")


def test_the_runtime_counts_a_not_ready_answer(monkeypatch):
    """The metric the NotReady alarm reads is emitted on every 503 not ready."""
    from fastapi.testclient import TestClient

    from laya_serverless import observe
    from laya_serverless.http.app import create_app
    from laya_serverless.settings import Settings

    seen = []

    class Recorder:
        def span(self, *args):
            return None

        def metric(self, name, value, unit):
            seen.append(name)

    observe.install(Recorder())
    try:
        app = create_app({}, Settings.of(), unavailable="the model artifacts are not available")
        response = TestClient(app).post("/v1/systemone", json={"state": "x", "questions": {}})
    finally:
        observe.install(None)
    assert response.status_code == 503 and seen == [observe.NOT_READY]


def test_new_versions_roll_out_as_a_canary_and_roll_back_on_the_alarms(synth):
    _, raw, _ = synth()
    [group] = resources(raw, "AWS::CodeDeploy::DeploymentGroup").values()
    group = group["Properties"]
    assert group["DeploymentConfigName"] == "CodeDeployDefault.LambdaCanary10Percent5Minutes"
    assert set(group["AutoRollbackConfiguration"]["Events"]) == {"DEPLOYMENT_FAILURE", "DEPLOYMENT_STOP_ON_ALARM"}
    watched = {a["Name"]["Ref"] for a in group["AlarmConfiguration"]["Alarms"]}
    by_metric = {a.get("MetricName"): logical for logical, a in _alarms(raw).items()}
    # Notified only: a restore's doing, an FP32 fallback that serves exact answers, and the 4XX rate (the callers',
    # not the release's): docs/operations.md.
    assert {by_metric[m] for m in ("Errors", "NotReady", "RefusedArtifacts", "5XXError")} == watched
    assert not {by_metric["ClassSwitches"], by_metric["TargetFallbacks"], by_metric["4XXError"]} & watched
    window = 60 * min(minutes for minutes in c.ROLLOUT_WINDOW_MINUTES.values() if minutes)
    for logical in watched:   # each can fire inside the shortest rollout window...
        alarm = _alarms(raw)[logical]
        assert alarm["Period"] * alarm["EvaluationPeriods"] <= window, logical
        if alarm["MetricName"] in ("Errors", "NotReady", "5XXError"):   # ...and never on one bad minute
            assert (alarm["DatapointsToAlarm"], alarm["EvaluationPeriods"]) == (2, 3), logical
    [alias] = resources(raw, "AWS::Lambda::Alias").values()
    assert "CodeDeployLambdaAliasUpdate" in alias["UpdatePolicy"]   # the alias moves through CodeDeploy


def test_signing_and_pins_off_by_default(synth):
    from laya_serverless import settings as env

    _, raw, _ = synth()
    assert not resources(raw, "AWS::KMS::Key")
    variables = api_function(raw)["Environment"]["Variables"]
    assert env.ARTIFACT_KEYS not in variables and env.ARTIFACT_PINS not in variables


def test_signing_key_pins_and_rollout_from_context(synth):
    from laya_serverless import settings as env

    from .test_stack import as_list, role_statements

    _, raw, _ = synth(**_SIGNED)
    [(key_id, key)] = resources(raw, "AWS::KMS::Key").items()
    assert key["Properties"]["KeySpec"] == "ECC_NIST_P256" and key["Properties"]["KeyUsage"] == "SIGN_VERIFY"
    assert key["DeletionPolicy"] == "Retain"
    functions = resources(raw, "AWS::Lambda::Function")
    trusting = [f for f in functions.values()
                if env.ARTIFACT_KEYS in f["Properties"].get("Environment", {}).get("Variables", {})]
    assert len(trusting) == 2   # the API and the jobs function
    for function in trusting:
        variables = function["Properties"]["Environment"]["Variables"]
        assert variables[env.ARTIFACT_KEYS] == {"Fn::GetAtt": [key_id, "Arn"]}
        assert variables[env.ARTIFACT_PINS] == _PINS
        statements = role_statements(raw, function["Properties"]["Role"]["Fn::GetAtt"][0])
        listed = json.dumps([s for s in statements if "s3:ListBucket" in as_list(s["Action"])])
        assert "releases/*" in listed   # the latest signed release is found by listing its folder
        kms = [s for s in statements if any(a.startswith("kms:") for a in as_list(s["Action"]))]
        assert kms == [{"Action": "kms:GetPublicKey", "Effect": "Allow", "Resource": {"Fn::GetAtt": [key_id, "Arn"]}}]
    [policy] = resources(raw, "AWS::IAM::ManagedPolicy").values()  # only publishers may sign
    [statement] = policy["Properties"]["PolicyDocument"]["Statement"]
    assert sorted(statement["Action"]) == ["kms:GetPublicKey", "kms:Sign"]
    assert statement["Resource"] == {"Fn::GetAtt": [key_id, "Arn"]}
    signers = [s for r in resources(raw, "AWS::IAM::Policy").values() for s in r["Properties"]["PolicyDocument"][
        "Statement"] if "kms:Sign" in as_list(s["Action"])]
    assert not signers   # no function's role can sign
    assert any(key.startswith("SigningSigningKeyArn") for key in raw["Outputs"])
    [group] = resources(raw, "AWS::CodeDeploy::DeploymentGroup").values()
    assert group["Properties"]["DeploymentConfigName"] == "CodeDeployDefault.LambdaAllAtOnce"
    [model] = resources(raw, "AWS::SageMaker::Model").values()   # the GPU endpoint refuses unsigned ones too
    model = model["Properties"]
    assert model["PrimaryContainer"]["Environment"][env.ARTIFACT_KEYS] == {"Fn::GetAtt": [key_id, "Arn"]}
    kms = [s for s in role_statements(raw, model["ExecutionRoleArn"]["Fn::GetAtt"][0])
           if any(a.startswith("kms:") for a in as_list(s["Action"]))]
    assert kms == [{"Action": "kms:GetPublicKey", "Effect": "Allow", "Resource": {"Fn::GetAtt": [key_id, "Arn"]}}]


def test_cfn_lint_finds_nothing_but_w3005_with_signing_and_rollout(synth):
    import subprocess
    import sys
    from pathlib import Path

    _, _, out = synth(**_SIGNED)
    cfn_lint = Path(sys.executable).parent / "cfn-lint"
    template = out / "LayaServerless.template.json"
    result = subprocess.run([str(cfn_lint), "--ignore-checks", "W3005", "--", str(template)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_an_existing_signing_key_is_trusted_by_arn_and_none_is_created(synth):
    from laya_serverless import settings as env

    _, raw, _ = synth(signing_key=_KEY_ARN)
    assert not resources(raw, "AWS::KMS::Key")
    assert api_function(raw)["Environment"]["Variables"][env.ARTIFACT_KEYS] == _KEY_ARN


@pytest.mark.parametrize(("context", "message"), [
    ({"signing_key": "alias/mine"}, "-c signing_key=arn:aws:kms:"),
    ({"signing_key": _KEY_ARN, "signing": "false"}, "drop -c signing=false"),
    ({"rollout": "blue-green"}, "-c rollout=all-at-once"),
    ({"artifact_pins": "demo=abc"}, "-c artifact_pins=demo/cpu-int8="),
])
def test_bad_rollout_and_signing_context_fails_naming_the_flag(context, message, asset_dir):
    from laya_infra.config import ConfigError, DeployConfig

    values = {"asset_dir": str(asset_dir), **context}
    with pytest.raises(ConfigError, match=re.escape(message)):
        DeployConfig.from_context(values.get)
