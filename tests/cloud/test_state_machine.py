"""The jobs state machine as synthesized, executed by moto's Amazon States Language interpreter (a port of
LocalStack's), under the stack's own roles, with its Lambda tasks delivered to the real jobs handler.

- The definition is the template's `DefinitionString` with its `DefinitionSubstitutions` resolved to this
  test's bucket, queue and function: nothing is rewritten.
- The interpreter's own calls (the S3 item reader, the ResultWriter, the SQS dead-letter task) are made with
  the engine role's credentials under moto's IAM enforcement; its Lambda tasks are checked against the engine
  role's policy (moto enforces resource ARNs only for S3 and SQS) and delivered in process to the jobs handler
  built as Lambda INIT builds it, with the jobs role's credentials and the function's environment from the
  template, over a real (tiny) artifact published to the bucket.
- The 1,000-state job is submitted as the API function's POST /v1/jobs does it (its settings, its role),
  the others as direct submissions to the jobs function.
- A task's failure comes back as Lambda's invoke integration reports it: `FunctionError: Unhandled` and the
  `{"errorType", "errorMessage"}` payload the runtime interface client writes.

Where the interpreter differs from Step Functions, the difference is patched here and named:
- it evaluates the ResultWriter's `Parameters` against the map's results, where Step Functions evaluates
  them against the state's input (so `Prefix.$` would fail); `_result_writer_on_state_input` restores that;
- it parses `ToleratedFailurePercentage` (the definition gives 100.0) but does not apply it, and it does not
  parse `ItemBatcher` (the definition has none: one shard a child);
- it runs children as threads of this process; Step Functions' exactly-once Standard children, its
  timeouts and its redrive are AWS's to prove (docs/operations.md).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import boto3
import pytest

from laya_artifacts.deploy.publish import publish
from laya_serverless.artifact.store import open_store
from laya_serverless.jobs.stepfunctions import stepfunctions_jobs
from laya_serverless.lambda_edge.jobs_handler import make_handler
from laya_serverless.settings import Settings

from .conftest import (
    ACCOUNT,
    BUCKET,
    REGION,
    allows,
    bucket_ids,
    function_environment,
    function_with_handler,
    resolve,
    role_session,
    role_statements,
)
from .test_api_permissions import _api, _relabelled

pytestmark = pytest.mark.slow
JOBS_HANDLER = "laya_serverless.lambda_edge.jobs_handler.handler"
QUESTIONS = {"team": {"type": "choice", "instructions": "which team handles it ?",
                      "criteria": {"billing": "refunds and charges", "tech": None}},
             "urgent": {"type": "noul", "instructions": "is it urgent ?"}}
FUNCTION_ARN = "arn:aws:lambda:%s:%s:function:LayaServerless-Jobs" % (REGION, ACCOUNT)


def _logical_id(template: dict[str, Any], kind: str, suffix: str = "") -> str:
    [found] = [lid for lid, r in template["Resources"].items() if r["Type"] == kind and lid.startswith("Jobs")
               and lid[:-8].endswith(suffix)]  # CDK appends an 8-character hash to each id
    return found


def _definition(template: dict[str, Any], known: dict[str, str]) -> tuple[str, str, str]:
    """(name, definition with its substitutions applied, engine role logical id) of the jobs state machine."""
    props = template["Resources"][_logical_id(template, "AWS::StepFunctions::StateMachine")]["Properties"]
    text = resolve(props["DefinitionString"], bucket_ids(template), known)
    for name, value in props["DefinitionSubstitutions"].items():
        text = text.replace("${%s}" % name, str(resolve(value, bucket_ids(template), known)))
    return props["StateMachineName"], text, props["RoleArn"]["Fn::GetAtt"][0]


def _result_writer_on_state_input(monkeypatch: pytest.MonkeyPatch) -> None:
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.result_writer import result_writer_decl

    def eval_body(self: Any, env: Any) -> None:
        results = env.stack.pop()
        env.stack.append(env.states.get_input())
        self.parargs.eval(env=env)
        parameters = env.stack.pop()
        env.stack.pop()
        env.stack.extend([results, parameters])
        self.resource_eval.eval_resource(env=env)

    monkeypatch.setattr(result_writer_decl.ResultWriter, "_eval_body", eval_body)


def _interpreter_as(monkeypatch: pytest.MonkeyPatch, session: Any) -> None:
    """The interpreter's S3 and SQS calls made with `session`'s credentials (it otherwise signs as "ak")."""
    from botocore.config import Config
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.item_reader.eval import (
        resource_eval_s3 as reader,
    )
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.result_writer.resource_eval import (
        resource_eval_s3 as writer,
    )
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service import state_task_service_sqs as sqs

    def client_for(region: str, service: str, state_credentials: Any = None) -> Any:
        return session.client(service, region_name=region, config=Config(retries={"total_max_attempts": 1}))

    for module in (reader, writer, sqs):
        monkeypatch.setattr(module, "boto_client_for", client_for)


class CheckedStates:
    """The jobs role's Step Functions client: moto enforces only `"*"` resources there, so each StartExecution
    is checked against the role's policy here, then made with unrestricted credentials."""

    def __init__(self, client: Any, statements: list[dict[str, Any]]) -> None:
        self._client, self._statements = client, statements

    def start_execution(self, **kwargs: Any) -> Any:
        assert allows(self._statements, "states:StartExecution", kwargs["stateMachineArn"])
        return self._client.start_execution(**kwargs)


@pytest.fixture
def engine(aws: Any, synth: Any, tiny_fp32: Path, tmp_path: Path,
           monkeypatch: pytest.MonkeyPatch) -> Iterator[SimpleNamespace]:
    """The stack's jobs engine in moto: the state machine as synthesized, the roles, the DLQ, the handler."""
    from moto.core import enable_iam_authentication

    template = synth(target="cpu-fp32")[1]
    queue_url = boto3.client("sqs", region_name=REGION).create_queue(QueueName="jobs-dead-letters")["QueueUrl"]
    queue_id, function_id = (_logical_id(template, "AWS::SQS::Queue", "DeadLetters"),
                             _logical_id(template, "AWS::Lambda::Function", "Function"))
    known = {queue_id: queue_url, queue_id + ".Arn": "arn:aws:sqs:%s:%s:jobs-dead-letters" % (REGION, ACCOUNT),
             function_id: "LayaServerless-Jobs", function_id + ".Arn": FUNCTION_ARN}
    name, definition, engine_role = _definition(template, known)
    admin = role_session([{"Effect": "Allow", "Action": "*", "Resource": "*"}], "test-observer")
    states = admin.client("stepfunctions")
    machine_arn = states.create_state_machine(
        name=name, definition=definition, roleArn="arn:aws:iam::%s:role/engine" % ACCOUNT)["stateMachineArn"]
    function = function_with_handler(template, JOBS_HANDLER)
    jobs_statements = role_statements(template, function["Role"]["Fn::GetAtt"][0], known)
    engine_statements = role_statements(template, engine_role, known)
    environ = function_environment(template, function)
    assert environ["LAYA_JOBS_STATE_MACHINE"] == machine_arn  # the function's variable names this machine
    # The stack's token rate at a smaller time budget, so that 1,000 short states make tens of shards.
    environ.update(LAYA_JOBS_TIME_BUDGET="2", LAYA_CACHE_DIR=str(tmp_path / "cache"))
    artifact = _relabelled(tiny_fp32, tmp_path / "fp32", "demo", int8=False)
    publish(artifact, open_store(environ["LAYA_STORE"], s3_client=aws))

    api_statements, api_environ = _api(template)
    api_session = role_session(api_statements, "api-function")
    jobs_session = role_session(jobs_statements, "jobs-function")
    engine_session = role_session(engine_statements, "jobs-engine")
    _result_writer_on_state_input(monkeypatch)
    _interpreter_as(monkeypatch, engine_session)
    with enable_iam_authentication():
        handler = make_handler(environ, s3_client=jobs_session.client("s3"),
                               sfn_client=CheckedStates(states, jobs_statements))
        deliveries: list[dict[str, Any]] = []
        fault: list[Callable[[dict[str, Any]], str | None]] = []
        _deliver_to(monkeypatch, handler, engine_statements, deliveries, fault)
        # POST /v1/jobs as the API function runs it: its settings, its role's credentials
        api_settings = Settings.from_environ({**api_environ, "LAYA_JOBS_TIME_BUDGET": "2"})
        api_store = open_store(api_settings.deployment.store, s3_client=api_session.client("s3"))
        api_jobs = stepfunctions_jobs(api_settings, api_store, CheckedStates(states, api_statements))
        yield SimpleNamespace(handler=handler, states=states, machine_arn=machine_arn, admin=admin,
                              queue_url=queue_url, deliveries=deliveries, fault=fault, store=environ["LAYA_STORE"],
                              api_jobs=api_jobs)


def _deliver_to(monkeypatch: pytest.MonkeyPatch, handler: Any, engine_statements: list[dict[str, Any]],
                deliveries: list[dict[str, Any]], fault: list[Callable[[dict[str, Any]], str | None]]) -> None:
    """The `lambda:invoke` integration, delivered to `handler` in process, as to one warm execution environment
    (Lambda's concurrency is many environments; this tier runs one, and moto's S3 is not safe under
    concurrent requests from one client either). `fault(payload)` may name a Lambda
    error to report instead ("Sandbox.Timedout": the function timed out; "after:<type>": the handler ran, then
    the invocation failed with <type>, as when its response is lost)."""
    from moto.stepfunctions.parser.asl.component.state.exec.state_task import lambda_eval_utils

    sandbox = threading.Lock()

    def invoke(parameters: dict[str, Any], region: str, state_credentials: Any) -> dict[str, Any]:
        assert allows(engine_statements, "lambda:InvokeFunction", parameters["FunctionName"])
        raw = parameters.get("Payload")
        payload = json.loads(raw) if isinstance(raw, str | bytes) else raw
        deliveries.append(payload)
        injected = fault[0](payload) if fault else None
        if injected and not injected.startswith("after:"):
            return _lambda_error(injected, "Task timed out after 300.00 seconds")
        try:
            with sandbox:  # one execution environment answers one invocation at a time
                result = handler(payload, SimpleNamespace(aws_request_id="sfn-%d" % len(deliveries)))
        except Exception as exc:  # noqa: BLE001 (what the runtime interface client reports for any raise)
            return _lambda_error(type(exc).__name__, str(exc))
        if injected:
            return _lambda_error(injected.split(":", 1)[1], "the invocation's response was lost")
        return {"StatusCode": 200, "Payload": json.loads(json.dumps(result))}

    monkeypatch.setattr(lambda_eval_utils, "_invoke_lambda_function", invoke)


def _lambda_error(error_type: str, message: str) -> dict[str, Any]:
    return {"StatusCode": 200, "FunctionError": "Unhandled",
            "Payload": {"errorType": error_type, "errorMessage": message}}


def _run(engine: SimpleNamespace, n_states: int, job_id: str,
         through_api: bool = False) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Submit `n_states` as a direct job (or as the API's POST /v1/jobs), wait for its execution, and return
    (description, output lines)."""
    body = {"states": ["ticket %d: i was charged twice" % i for i in range(n_states)], "questions": QUESTIONS}
    if through_api:
        worker = engine.handler.args[0]
        accepted = engine.api_jobs.submit(body, worker.registry, worker.deployment.names, job_id=job_id)
    else:
        accepted = engine.handler({"id": job_id, **body}, SimpleNamespace(aws_request_id="submit"))
    assert accepted["status"] == "queued" and accepted["states"] == n_states
    execution_arn = "%s:%s" % (engine.machine_arn.replace(":stateMachine:", ":execution:"), job_id)
    deadline = time.monotonic() + 120
    while True:
        described = engine.states.describe_execution(executionArn=execution_arn)
        if described["status"] != "RUNNING" or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert described["status"] == "SUCCEEDED", described
    job = json.loads(described["output"])
    bucket, _, prefix = engine.store[len("s3://"):].partition("/")
    body = engine.admin.client("s3").get_object(Bucket=bucket, Key="%s/jobs/output/%s.jsonl" % (prefix, job_id))
    return job, [json.loads(line) for line in body["Body"].read().splitlines()]


def _dead_letters(engine: SimpleNamespace) -> list[dict[str, Any]]:
    got = engine.admin.client("sqs").receive_message(QueueUrl=engine.queue_url, MaxNumberOfMessages=10)
    return [json.loads(m["Body"]) for m in got.get("Messages", [])]


def _answers(engine: SimpleNamespace) -> list[int]:
    return [item["shard"] for d in engine.deliveries if d.get("action") == "answer" for item in d["Items"]]


def test_a_1000_state_job_runs_through_the_state_machine_with_every_index_once(engine: SimpleNamespace) -> None:
    job, lines = _run(engine, 1000, "thousand", through_api=True)  # submitted by the API function's role
    assert job["status"] == "succeeded" and job["done"] == 1000 and job["failed"] == 0
    assert [line["index"] for line in lines] == list(range(1000))
    assert all("error" not in line and set(line["result"]["answers"]) == set(QUESTIONS) for line in lines)
    shards = job["shards_total"]
    assert shards > 4 and job["shards_done"] == shards
    assert sorted(_answers(engine)) == list(range(shards))  # each shard delivered once
    assert [d["action"] for d in engine.deliveries].count("finish") == 1 and _dead_letters(engine) == []
    listed = engine.admin.client("s3").list_objects_v2(Bucket=BUCKET, Prefix="laya-artifacts/jobs/thousand/map/")
    assert any(o["Key"].endswith("/manifest.json") for o in listed.get("Contents", []))  # the ResultWriter's


def test_a_shard_failing_every_try_is_dead_lettered_and_the_job_ends_partial(engine: SimpleNamespace) -> None:
    engine.fault.append(lambda p: "Sandbox.Timedout" if p.get("action") == "answer"
                        and p["Items"] == [{"shard": 1}] else None)
    job, lines = _run(engine, 300, "one-bad-shard")
    assert job["status"] == "partial" and job["done"] + job["failed"] == 300 and job["failed"] > 0
    assert [line["index"] for line in lines] == list(range(300))
    errors = {line["error"]["detail"] for line in lines if "error" in line}
    assert errors == {"this shard failed 3 times: the worker failed (Sandbox.Timedout)"}
    assert _answers(engine).count(1) == 3  # the first try and the two retries
    [letter] = _dead_letters(engine)
    assert letter["job"] == "one-bad-shard" and letter["Items"] == [{"shard": 1}]
    assert letter["error"]["Error"] == "Sandbox.Timedout"


def test_a_shard_replayed_after_it_succeeded_doubles_nothing(engine: SimpleNamespace) -> None:
    replays = iter(["after:Lambda.ServiceException"])
    engine.fault.append(lambda p: next(replays, None) if p.get("action") == "answer"
                        and p["Items"] == [{"shard": 2}] else None)
    job, lines = _run(engine, 300, "replayed-shard")
    assert job["status"] == "succeeded" and job["done"] == 300
    assert [line["index"] for line in lines] == list(range(300))
    assert _answers(engine).count(2) == 2 and _dead_letters(engine) == []
