"""What the jobs function does with each event it is sent (the Lambda handler is an adapter over this).

    {"action": "answer",  "job": ID, "Items": [{"shard": n}, ...]}          a Step Functions item batch
    {"action": "give_up", "job": ID, "Items": [...], "error": {...}}        the batch's catch, retries spent
    {"action": "finish",  "job": ID, "error"?: {...}}                       after the map: merge and end
    {"input": URI | "states": [...], "questions": {...}, "output"?: URI, "id"?: ID, <controls>}
                                                                            a direct (async) job submission
"""

from __future__ import annotations

import logging
from typing import Any

from ..errors import JobError, MalformedRequest, RequestError
from ..jobs.job_service import JobService
from ..jobs.merge import finish
from ..jobs.state import public
from ..jobs.stepfunctions import ACTION, ANSWER, ATTEMPTS, ERROR, FINISH, GIVE_UP, ITEMS, JOB, error_detail
from ..jobs.store_keys import is_job_id
from ..jobs.worker import Worker

_log = logging.getLogger("laya_serverless")
DEFAULT_ATTEMPTS = 3


def _shards(event: dict[str, Any]) -> list[int]:
    items = event.get(ITEMS)
    if not isinstance(items, list) or not all(isinstance(i, dict) and isinstance(i.get("shard"), int) for i in items):
        raise JobError("%r must be a list of {\"shard\": n} items" % ITEMS)
    return [item["shard"] for item in items]


def _attempts(event: dict[str, Any]) -> int:
    attempts = event.get(ATTEMPTS, DEFAULT_ATTEMPTS)
    if isinstance(attempts, bool) or not isinstance(attempts, int) or not 1 <= attempts <= 1000:
        raise JobError("%r must be the number of tries spent (1-1000)" % ATTEMPTS)
    return attempts


def submission_id(event: dict[str, Any], context: Any) -> str:
    """The job id of a direct submission: the caller's `id`, else one derived from the request id, which
    Lambda keeps across its own retries of an async invocation, so a retry resubmits the same job."""
    given = event.get("id")
    if given is not None:
        if not isinstance(given, str) or not is_job_id(given):
            raise MalformedRequest("'id' must be 1-80 letters, digits, '-' or '_' (not 'input' or 'output')",
                                   location=("id",))
        return given
    return "direct-" + str(getattr(context, "aws_request_id", "")).replace("-", "")


def dispatch(worker: Worker, service: JobService, event: Any, context: Any) -> dict[str, Any]:
    if not isinstance(event, dict):
        raise JobError("the jobs function takes a JSON object")
    action = event.get(ACTION)
    if action is None:
        job_id = submission_id(event, context)
        try:
            deployment = worker.deployment
            accepted = service.submit(event, worker.registry, deployment.names if deployment else [], job_id=job_id,
                                      deciders=deployment.deciders if deployment else None)
        except RequestError as exc:  # raised: Lambda retries, then the event and this reason land in the DLQ
            _log.error("job %s refused: %s", job_id, exc.detail)
            raise
        _log.info("job %s accepted: %s", job_id, accepted)
        return accepted
    named = event.get(JOB)
    if not isinstance(named, str) or not is_job_id(named):
        raise JobError("%r must name a job" % JOB)
    job_id = named
    if action == ANSWER:
        return worker.answer(job_id, _shards(event)).as_dict()
    if action == GIVE_UP:
        detail = error_detail(event.get(ERROR), _attempts(event))
        return {JOB: job_id, "given_up": worker.give_up(job_id, _shards(event), detail)}
    if action == FINISH:
        error = event.get(ERROR)
        reason = ("this shard was never answered: the job's map failed (%s)" % error.get("Error")
                  if isinstance(error, dict) else None)
        return public(finish(worker.store, job_id, reason))
    raise JobError("unknown action %r" % action)
