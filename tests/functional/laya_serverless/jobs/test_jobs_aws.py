"""Jobs on the AWS engine with moto (S3 with conditional writes, Step Functions): the jobs function on saved
events (a direct async submission, the state machine's answer / give-up / finish tasks), driven the way
the state machine drives it, and POST /v1/jobs through the Mangum handler on a saved REST API event."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Iterator
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest
from mangum import Mangum

from laya_serverless.artifact.store import S3Store
from laya_serverless.errors import Conflict, SettingsError, ShardFailed
from laya_serverless.http.app import create_app
from laya_serverless.jobs.stepfunctions import StepFunctionsEngine
from laya_serverless.lambda_edge.job_events import dispatch
from laya_serverless.lambda_edge.jobs_handler import make_handler
from laya_serverless.protocol.routing import Registry
from laya_serverless.settings import HttpSettings
from tests.functional.laya_serverless.jobs.jobs_support import SETTINGS, decider, job_service, make_worker, states
from tests.paths import EVENTS

BUCKET, PREFIX, JOB = "laya-jobs-test", "laya-artifacts", "tickets-2026-12"
N_STATES = 200

pytestmark = pytest.mark.usefixtures("close_mangums_loop")


def event(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((EVENTS / name).read_text())
    return loaded


def context(request_id: str = "6f1c0c33-2bd5-4a3e-8a9e-0d3b7f0e9a51") -> Any:
    return SimpleNamespace(aws_request_id=request_id, function_name="LayaServerless-Jobs",
                           get_remaining_time_in_millis=lambda: 300_000)


@pytest.fixture
def aws(moto_aws: Any) -> Iterator[SimpleNamespace]:
    from laya_infra.config import DeployConfig
    from laya_infra.jobs import definition

    s3 = moto_aws("s3")
    s3.create_bucket(Bucket=BUCKET)
    sfn = moto_aws("stepfunctions")
    asl = json.dumps(definition(DeployConfig())).replace("${Bucket}", BUCKET)
    arn = sfn.create_state_machine(name="LayaServerless-jobs", definition=asl,
                                   roleArn="arn:aws:iam::123456789012:role/engine")["stateMachineArn"]
    store = S3Store(BUCKET, PREFIX, s3)
    worker = make_worker(".unused")
    worker.store = store
    service = job_service(store, StepFunctionsEngine(sfn, arn, store))
    yield SimpleNamespace(s3=s3, sfn=sfn, arn=arn, store=store, worker=worker, service=service)


def upload_input(aws: SimpleNamespace, data: list[Any]) -> None:
    body = b"".join(json.dumps(s).encode() + b"\n" for s in data)
    aws.s3.put_object(Bucket=BUCKET, Key="%s/jobs/input/tickets.jsonl" % PREFIX, Body=body)


def executions(aws: SimpleNamespace) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = aws.sfn.list_executions(stateMachineArn=aws.arn)["executions"]
    return found


def items(aws: SimpleNamespace, execution: dict[str, Any]) -> list[dict[str, int]]:
    """What the Map's S3 item reader reads: the manifest the execution's input names."""
    given = json.loads(aws.sfn.describe_execution(executionArn=execution["executionArn"])["input"])
    listed: list[dict[str, int]] = json.loads(aws.s3.get_object(Bucket=BUCKET, Key=given["manifest"])["Body"].read())
    assert given == {"job": execution["name"], "manifest": "%s/jobs/%s/manifest.json" % (PREFIX, execution["name"]),
                     "map_results": "%s/jobs/%s/map" % (PREFIX, execution["name"]), "error": None}
    return listed


def call(aws: SimpleNamespace, payload: dict[str, Any], request_id: str = "r") -> dict[str, Any]:
    return dispatch(aws.worker, aws.service, json.loads(json.dumps(payload)), context(request_id))


def keys(aws: SimpleNamespace) -> list[str]:
    return aws.store.list("jobs/")


def test_a_direct_submission_starts_one_execution_and_a_retry_the_same_one(aws: SimpleNamespace) -> None:
    upload_input(aws, states(N_STATES))
    accepted = call(aws, event("jobs-direct-submission.json"))
    assert accepted["id"] == JOB and accepted["status"] == "queued" and accepted["states"] == N_STATES
    assert accepted["shards"] >= 8
    [execution] = executions(aws)
    assert execution["name"] == JOB and len(items(aws, execution)) == accepted["shards"]
    stored = keys(aws)
    assert call(aws, event("jobs-direct-submission.json")) == accepted  # Lambda's async retry of the same event
    assert executions(aws) == [execution] and keys(aws) == stored


def test_without_an_id_the_request_id_names_the_job(aws: SimpleNamespace) -> None:
    upload_input(aws, states(10))
    named = {k: v for k, v in event("jobs-direct-submission.json").items() if k != "id"}
    first = call(aws, named, request_id="0a1b-2c3d")
    assert first["id"] == "direct-0a1b2c3d" and call(aws, named, request_id="0a1b-2c3d") == first
    with pytest.raises(Conflict, match="already the output of another job"):   # one job per output
        call(aws, named, request_id="eeee")
    unnamed = {k: v for k, v in named.items() if k != "output"}
    assert call(aws, unnamed, request_id="ffff")["id"] == "direct-ffff"


def test_the_state_machine_s_tasks_end_the_job_with_every_index_once(aws: SimpleNamespace) -> None:
    upload_input(aws, states(N_STATES))
    accepted = call(aws, event("jobs-direct-submission.json"))
    answered = call(aws, event("jobs-answer-batch.json"))
    assert answered == {"job": JOB, "answered": [0, 1, 2, 3], "replayed": [], "refused": []}
    again = call(aws, event("jobs-answer-batch.json"))  # a redelivered batch (a retry after a timeout)
    assert again["replayed"] == [0, 1, 2, 3] and not again["answered"]
    given_up = call(aws, event("jobs-give-up-batch.json"))  # the catch, after the batch failed three times
    assert given_up == {"job": JOB, "given_up": [4, 5, 6, 7]}
    for start in range(8, accepted["shards"], 4):
        call(aws, {"action": "answer", "job": JOB,
                   "Items": [{"shard": n} for n in range(start, min(start + 4, accepted["shards"]))]})
    done = call(aws, event("jobs-finish.json"))
    assert done["status"] == "partial" and done["done"] + done["failed"] == N_STATES
    assert done["output"] == "s3://%s/%s/jobs/output/tickets.jsonl" % (BUCKET, PREFIX)
    output = aws.s3.get_object(Bucket=BUCKET, Key="%s/jobs/output/tickets.jsonl" % PREFIX)["Body"].read()
    lines = [json.loads(line) for line in output.splitlines()]
    assert [line["index"] for line in lines] == list(range(N_STATES))
    errors = {line["error"]["detail"] for line in lines if "error" in line}
    assert errors == {"this shard failed 3 times: shard 5: inference failed"}
    assert call(aws, event("jobs-finish.json")) == done  # Finish retried: nothing changes


def test_a_poison_shard_fails_its_batch_and_is_given_up_alone(aws: SimpleNamespace) -> None:
    aws.worker = make_worker(".unused", poison=True)
    aws.worker.store = aws.store
    accepted = call(aws, {"id": "poisoned", "states": states(60, poison_at=(25,)),
                          "questions": event("jobs-direct-submission.json")["questions"], "lang": "en"})
    bounds = json.loads(aws.store.read("jobs/poisoned/spec.json")[0])["bounds"]  # type: ignore[index]
    bad = next(n for n in range(accepted["shards"]) if bounds[n] <= 25 < bounds[n + 1])
    batch = {"action": "answer", "job": "poisoned", "Items": [{"shard": n} for n in range(accepted["shards"])]}
    with pytest.raises(ShardFailed, match="shard %d: inference failed" % bad) as failed:
        call(aws, batch)
    cause = json.dumps({"errorMessage": str(failed.value), "errorType": "ShardFailed"})
    call(aws, dict(batch, action="give_up", attempts=3, error={"Error": "ShardFailed", "Cause": cause}))
    done = call(aws, {"action": "finish", "job": "poisoned"})
    assert done["status"] == "partial" and done["failed"] == bounds[bad + 1] - bounds[bad]


def test_a_map_that_failed_still_ends_the_job(aws: SimpleNamespace) -> None:
    upload_input(aws, states(30))
    call(aws, event("jobs-direct-submission.json"))
    done = call(aws, {"action": "finish", "job": JOB, "error": {"Error": "States.ItemReaderFailed", "Cause": "x"}})
    assert done["status"] == "failed" and done["failed"] == 30 and done["shards_done"] == done["shards_total"]
    output = aws.s3.get_object(Bucket=BUCKET, Key="%s/jobs/output/tickets.jsonl" % PREFIX)["Body"].read()
    detail = "this shard was never answered: the job's map failed (States.ItemReaderFailed)"
    assert json.loads(output.splitlines()[0]) == {"index": 0, "error": {"detail": detail}}


def test_bad_events_and_refused_submissions_raise(aws: SimpleNamespace) -> None:
    from laya_serverless.errors import InvalidRequest, JobError

    with pytest.raises(JobError, match="unknown action"):
        call(aws, {"action": "dance", "job": JOB})
    with pytest.raises(JobError, match="must name a job"):
        call(aws, {"action": "answer", "job": "../x", "Items": []})
    with pytest.raises(InvalidRequest, match="outside this deployment's job input prefix"):  # Lambda retries -> DLQ
        call(aws, dict(event("jobs-direct-submission.json"), input="s3://other-bucket/jobs/input/x.jsonl"))
    give_up = event("jobs-give-up-batch.json")
    for attempts in ("three", -1, 0, True, 1.5, [3]):  # was ValueError / a silent default
        with pytest.raises(JobError, match="'attempts' must be the number of tries"):
            call(aws, dict(give_up, attempts=attempts))
    with pytest.raises(JobError, match="must name a job"):
        call(aws, {"action": "answer", "job": "abc\n", "Items": []})


@pytest.mark.parametrize("error", ["a string", ["a", "list"], 7, None, {"Error": "ShardFailed", "Cause": [1]},
                                   {"Error": "ShardFailed", "Cause": "not json"}])
def test_a_give_up_with_a_malformed_error_still_gives_the_batch_up(aws: SimpleNamespace, error: Any) -> None:
    upload_input(aws, states(N_STATES))
    call(aws, event("jobs-direct-submission.json"))
    given_up = call(aws, dict(event("jobs-give-up-batch.json"), error=error))  # was AttributeError
    assert given_up == {"job": JOB, "given_up": [4, 5, 6, 7]}


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # a loop boto3/moto leave unclosed
def test_post_v1_jobs_through_the_mangum_handler_starts_an_execution(aws: SimpleNamespace) -> None:
    upload_input(aws, states(40))
    settings = replace(SETTINGS, http=HttpSettings(api_key="local-test-key", api_base_path="/laya"))
    app = create_app({"english": decider()}, settings, registry=Registry(), jobs=aws.service, inline_inference=True)
    handler = Mangum(app, lifespan="off", api_gateway_base_path="/laya")
    loop = asyncio.new_event_loop()  # Mangum runs on the thread's loop; this test owns it and closes it
    asyncio.set_event_loop(loop)
    try:
        response, polled = _submit_then_poll(aws, handler)
    finally:
        asyncio.set_event_loop(None)
        loop.close()
    body = json.loads(base64.b64decode(response["body"]) if response.get("isBase64Encoded") else response["body"])
    assert body["status"] == "queued" and body["states"] == 40
    assert [e["name"] for e in executions(aws)] == [body["id"]]
    assert polled["statusCode"] == 200 and json.loads(polled["body"])["status"] == "queued"


def _submit_then_poll(aws: SimpleNamespace, handler: Mangum) -> tuple[dict[str, Any], dict[str, Any]]:
    response = handler(event("rest-v1-jobs-submit.json"), context())
    assert response["statusCode"] == 202, response
    body = json.loads(base64.b64decode(response["body"]) if response.get("isBase64Encoded") else response["body"])
    status = dict(event("rest-v1-jobs-submit.json"), httpMethod="GET", path="/laya/v1/jobs/%s" % body["id"],
                  body=None, isBase64Encoded=False)
    return response, handler(status, context())


def test_the_jobs_function_needs_its_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SettingsError, match="LAYA_JOBS_STATE_MACHINE"):
        make_handler({"LAYA_STORE": "s3://%s/%s" % (BUCKET, PREFIX)})
    with pytest.raises(SettingsError, match="LAYA_STORE=s3://"):
        make_handler({"LAYA_JOBS_STATE_MACHINE": "arn:aws:states:us-east-1:1:stateMachine:x"})
