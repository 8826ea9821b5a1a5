"""The AWS engine: one Step Functions execution per job, named by the job id (a second start of the same
job is the same execution), over the job's item manifest in S3. The state machine itself is defined
in the CDK app (`infra/laya_infra/jobs.py`); these are the names both sides share."""

from __future__ import annotations

import json
from typing import Any

from ..artifact.store import ObjectStore, S3Store, open_store
from ..errors import JobError, SettingsError
from ..settings import JOBS_STATE_MACHINE, STORE, Settings
from .job_service import JobService
from .store_keys import manifest_key, map_results_prefix, shard_failure

# The jobs function's task payloads, as the state machine sends them.
ACTION, JOB, ITEMS, ERROR, ATTEMPTS = "action", "job", "Items", "error", "attempts"
ANSWER, GIVE_UP, FINISH = "answer", "give_up", "finish"
# The execution's input.
MANIFEST, MAP_RESULTS = "manifest", "map_results"


def full_key(store: S3Store, key: str) -> str:
    return "%s/%s" % (store.prefix, key) if store.prefix else key


def execution_input(store: S3Store, job_id: str) -> dict[str, str | None]:
    """`error` is null until the map's catch sets it: `Finish` reads `$.error`, and a JSONPath to a missing
    field fails the state (States.Runtime), so without it every job whose map succeeded would never end."""
    return {JOB: job_id, MANIFEST: full_key(store, manifest_key(job_id)),
            MAP_RESULTS: full_key(store, map_results_prefix(job_id)), ERROR: None}


class StepFunctionsEngine:
    def __init__(self, client: Any, state_machine_arn: str, store: S3Store) -> None:
        self.client, self.state_machine_arn, self.store = client, state_machine_arn, store

    def start(self, job_id: str) -> None:
        try:
            self.client.start_execution(stateMachineArn=self.state_machine_arn, name=job_id,
                                        input=json.dumps(execution_input(self.store, job_id)))
        except Exception as exc:
            code = str(getattr(exc, "response", {}).get("Error", {}).get("Code", ""))
            if code == "ExecutionAlreadyExists":  # started before: a replayed submission of the same job
                return
            raise JobError("cannot start the execution of job %r (%s)" % (job_id, code or type(exc).__name__)) from exc

    def open(self) -> None:
        """Nothing to run here: AWS runs the engine."""

    def close(self) -> None:
        """Nothing to stop here."""


def error_detail(error: Any, attempts: int) -> str:
    """A Step Functions catch's `{"Error", "Cause"}` as a client may read it: our refusal text or the error's name."""
    error = error if isinstance(error, dict) else {}
    name = str(error.get("Error") or "unknown error")
    why = "the worker failed (%s)" % name
    if name == "ShardFailed":
        try:
            why = str(json.loads(str(error.get("Cause") or "{}")).get("errorMessage") or why)
        except (ValueError, AttributeError):
            pass
    elif name == "States.Timeout":
        why = "the worker ran out of time"
    return shard_failure(attempts, why)


def stepfunctions_jobs(settings: Settings, store: ObjectStore | None = None,
                       sfn_client: Any = None) -> JobService | None:
    """The jobs of a Lambda deployment whose stack created the state machine (`LAYA_JOBS_STATE_MACHINE`), over the
    process's one `store` (opened from the deployment's store when none is given)."""
    state_machine = settings.jobs.jobs_state_machine
    if state_machine is None:
        return None
    store = open_store(settings.deployment.store, parts=settings.deployment.download_parts) if store is None else store
    if not isinstance(store, S3Store):
        raise SettingsError("%s needs %s=s3://bucket/prefix" % (JOBS_STATE_MACHINE, STORE))
    if sfn_client is None:
        import boto3

        sfn_client = boto3.client("stepfunctions")
    return JobService(store, StepFunctionsEngine(sfn_client, state_machine, store), settings.jobs, settings.protocol,
                      settings.limits)
