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
