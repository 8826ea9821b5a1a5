"""The batch-jobs engine in the synthesized template: the state machine's definition, the jobs function and
its async-invoke config, the dead-letter queue and its alarm, least-privilege roles, outputs, and the off switch."""

from __future__ import annotations

import json
from typing import Any

import pytest

from laya_serverless import settings as env
from laya_serverless.jobs import stepfunctions as task

from .test_stack import api_function, as_list, methods, resources, role_statements

JOBS_HANDLER = "laya_serverless.lambda_edge.jobs_handler.handler"


def jobs_function(raw: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    [(logical_id, function)] = [(k, r) for k, r in resources(raw, "AWS::Lambda::Function").items()
                                if r["Properties"]["Handler"] == JOBS_HANDLER]
    return logical_id, function["Properties"]


def machine(raw: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the state machine's properties, its definition parsed: ASL with ${...} substitutions left in)."""
    [props] = [r["Properties"] for k, r in resources(raw, "AWS::StepFunctions::StateMachine").items()
               if k.startswith("Jobs")]  # the deploy gate's Provider has its own waiter
    text = props["DefinitionString"]
    if isinstance(text, dict):  # Fn::Join of literal parts only
        text = "".join(part for part in text["Fn::Join"][1])
    return props, json.loads(text)


@pytest.fixture(scope="module")
def stack(synth: Any) -> dict[str, Any]:
    return synth(jobs_concurrency="25", jobs_timeout="600", jobs_memory="3584")[1]


def test_a_distributed_map_over_the_shard_manifest_in_s3(stack: dict[str, Any]) -> None:
    props, asl = machine(stack)
    assert props["StateMachineType"] == "STANDARD" and props["TracingConfiguration"] == {"Enabled": True}
    assert props["LoggingConfiguration"]["Level"] == "ALL"
    shards = asl["States"]["Shards"]
    assert shards["Type"] == "Map" and shards["ItemProcessor"]["ProcessorConfig"] == {
        "Mode": "DISTRIBUTED", "ExecutionType": "STANDARD"}
    assert shards["ItemReader"] == {"Resource": "arn:aws:states:::s3:getObject", "ReaderConfig": {"InputType": "JSON"},
                                    "Parameters": {"Bucket": "${Bucket}", "Key.$": "$." + task.MANIFEST}}
    assert "ItemBatcher" not in shards  # one shard a child (tests/cloud/test_state_machine.py runs it)
    assert shards["ItemSelector"] == {"job.$": "$.job", "Items.$": "States.Array($$.Map.Item.Value)"}
    assert shards["MaxConcurrency"] == 25 and shards["ToleratedFailurePercentage"] == 100.0
    assert shards["ResultWriter"]["Parameters"] == {"Bucket": "${Bucket}", "Prefix.$": "$." + task.MAP_RESULTS}
    assert shards["Catch"][0]["Next"] == "Finish" and shards["Next"] == "Finish"  # the job ends even if the map fails
    assert set(props["DefinitionSubstitutions"]) == {"JobsFunction", "DeadLetterQueue", "Bucket"}


def test_a_batch_is_retried_with_backoff_then_dead_lettered_and_given_up(stack: dict[str, Any]) -> None:
    _, asl = machine(stack)
    states = asl["States"]["Shards"]["ItemProcessor"]["States"]
    answer = states["Answer"]
    assert answer["Parameters"]["Payload"] == {task.ACTION: task.ANSWER, "job.$": "$.job",
                                               "Items.$": "$.Items"}
    retries = {tuple(r["ErrorEquals"]): r for r in answer["Retry"]}
    assert retries[("States.ALL",)]["MaxAttempts"] == 2 and retries[("States.ALL",)]["BackoffRate"] == 2.0
    assert all(r["JitterStrategy"] == "FULL" and r["IntervalSeconds"] >= 1 for r in retries.values())
    assert answer["Catch"] == [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "DeadLetter"}]
    assert states["DeadLetter"]["Resource"] == "arn:aws:states:::sqs:sendMessage"
    assert states["DeadLetter"]["Parameters"]["QueueUrl"] == "${DeadLetterQueue}"
    assert states["DeadLetter"]["Next"] == "GiveUp"
    assert states["GiveUp"]["Parameters"]["Payload"][task.ACTION] == task.GIVE_UP
    assert states["GiveUp"]["Parameters"]["Payload"][task.ATTEMPTS] == 3
    assert asl["States"]["Finish"]["Parameters"]["Payload"][task.ACTION] == task.FINISH


def test_the_jobs_function_shares_the_layer_and_asset_with_its_own_handler(stack: dict[str, Any]) -> None:
    _, props = jobs_function(stack)
    api = api_function(stack)
    assert props["Layers"] == api["Layers"] and props["Code"] == api["Code"]
    assert props["Timeout"] == 600 and props["MemorySize"] == 3584 and props["Runtime"] == "python3.12"
    variables = props["Environment"]["Variables"]
    assert variables[env.JOBS_STATE_MACHINE]["Fn::Join"][1][-1] == ":stateMachine:LayaServerless-jobs"
    assert variables[env.JOBS_TIME_BUDGET] == "300"  # 600 s x 0.5, one shard an invocation
    assert env.THREADS not in variables and variables[env.JOBS_TOKEN_RATE] == "1000"  # 500 a whole vCPU
    assert variables[env.DEPLOYED] == api["Environment"]["Variables"][env.DEPLOYED]


def test_direct_async_submissions_retry_then_land_in_the_dead_letter_queue(stack: dict[str, Any]) -> None:
    logical_id, _ = jobs_function(stack)
    [config] = [r["Properties"] for r in resources(stack, "AWS::Lambda::EventInvokeConfig").values()
                if r["Properties"]["FunctionName"] == {"Ref": logical_id}]
    assert config["MaximumRetryAttempts"] == 2 and config["MaximumEventAgeInSeconds"] == 21600
    [queue] = [q for q in resources(stack, "AWS::SQS::Queue") if q.startswith("Jobs")]
    assert config["DestinationConfig"]["OnFailure"]["Destination"] == {"Fn::GetAtt": [queue, "Arn"]}
    [alarm] = [a["Properties"] for a in resources(stack, "AWS::CloudWatch::Alarm").values()
               if a["Properties"].get("Namespace") == "AWS/SQS" and queue in json.dumps(a["Properties"]["Dimensions"])]
    assert alarm["MetricName"] == "ApproximateNumberOfMessagesVisible" and alarm["Threshold"] == 1
    assert alarm["Dimensions"][0]["Value"] == {"Fn::GetAtt": [queue, "QueueName"]}
    policies = [s for p in resources(stack, "AWS::SQS::QueuePolicy").values()
                for s in p["Properties"]["PolicyDocument"]["Statement"]]
    assert any(s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
               for s in policies)


def _s3_resources(statements: list[dict[str, Any]]) -> list[str]:
    return [json.dumps(r) for s in statements if any(a.startswith("s3:") for a in as_list(s["Action"]))
            for r in as_list(s["Resource"])]


def test_each_role_touches_only_its_prefixes_its_machine_and_its_queue(stack: dict[str, Any]) -> None:
    logical_id, props = jobs_function(stack)
    worker = role_statements(stack, props["Role"]["Fn::GetAtt"][0])
    for resource in _s3_resources(worker):
        assert any(part in resource for part in ('/laya-artifacts/jobs/*"', '/laya-artifacts/artifacts/*"',
                                                 '/laya-artifacts/gates/*"', "/laya-artifacts/pointers/")) \
            or '"Arn"]}' in resource[-10:], resource
    assert not any(r.endswith('"Arn"]}, "/*"]]}') for r in _s3_resources(worker))  # never the whole bucket
    starts = [s for s in worker if s["Action"] == "states:StartExecution"]
    assert starts and all(s["Resource"]["Fn::Join"][1][-1] == ":stateMachine:LayaServerless-jobs" for s in starts)
    [engine_props] = [r["Properties"] for k, r in resources(stack, "AWS::StepFunctions::StateMachine").items()
                      if k.startswith("Jobs")]
    engine = role_statements(stack, engine_props["RoleArn"]["Fn::GetAtt"][0])
    invokes = [r for s in engine if s["Action"] == "lambda:InvokeFunction" for r in as_list(s["Resource"])]
    assert {"Fn::GetAtt": [logical_id, "Arn"]} in invokes and len(invokes) == 2
    assert all('/laya-artifacts/jobs/*"' in r for r in _s3_resources(engine))
    [queue] = [q for q in resources(stack, "AWS::SQS::Queue") if q.startswith("Jobs")]
    assert [s["Resource"] for s in engine if s["Action"] == "sqs:SendMessage"] == [{"Fn::GetAtt": [queue, "Arn"]}]
    stars = [s for s in engine if s["Resource"] == "*"]
    assert all(a.startswith(("logs:", "xray:")) for s in stars for a in as_list(s["Action"]))


def test_the_api_submits_jobs_and_refuses_a_batch_past_its_timeout(stack: dict[str, Any]) -> None:
    variables = api_function(stack)["Environment"]["Variables"]
    assert variables[env.BATCH_TIME_BUDGET] == "25" and variables[env.BATCH_TOKEN_RATE] == "500"
    assert variables[env.JOBS_TIME_BUDGET] == "300" and variables[env.JOBS_TOKEN_RATE] == "1000"  # the workers'
    api_role = role_statements(stack, api_function(stack)["Role"]["Fn::GetAtt"][0])
    assert any(s["Action"] == "states:StartExecution" for s in api_role)


def test_outputs_name_the_jobs_prefixes(stack: dict[str, Any]) -> None:
    outputs = stack["Outputs"]
    for name, tail in (("JobsInputPrefix", "/laya-artifacts/jobs/input/"),
                       ("JobsOutputPrefix", "/laya-artifacts/jobs/output/")):
        parts = outputs[name]["Value"]["Fn::Join"][1]
        assert parts[0] == "s3://" and parts[-1] == tail
    assert {"JobsFunctionName", "JobsStateMachineArn", "JobsDeadLetterQueueUrl"} <= set(outputs)


def test_jobs_can_be_left_out(synth: Any) -> None:
    template, raw, _ = synth(jobs="false")
    assert not [m for m in resources(raw, "AWS::StepFunctions::StateMachine") if m.startswith("Jobs")]
    assert not [q for q in resources(raw, "AWS::SQS::Queue") if q.startswith("Jobs")]
    assert not any(route[1].startswith("/v1/jobs") for route in methods(raw))
    assert env.BATCH_TIME_BUDGET not in api_function(raw)["Environment"]["Variables"]
    assert "JobsInputPrefix" not in raw["Outputs"]


@pytest.mark.parametrize("context, message", [
    ({"jobs_timeout": "1000"}, "-c jobs_timeout=300"),
    ({"jobs_memory": "64"}, "-c jobs_memory=3008"),
    ({"jobs_concurrency": "0"}, "-c jobs_concurrency=10"),
    ({"jobs": "sometimes"}, "-c jobs=true"),
    ({"token_rate": "fast"}, "-c token_rate=500"),
])
def test_bad_jobs_context_names_the_flag(context: dict[str, str], message: str, asset_dir: Any) -> None:
    from laya_infra.config import ConfigError, DeployConfig

    values = {"asset_dir": str(asset_dir), **context}
    with pytest.raises(ConfigError, match=message):
        DeployConfig.from_context(values.get)
