"""Batch jobs: many states, one question set, answered in shards across invocations (docs/jobs.md).

    layout    where a job lives in the store          spec     a job request, checked
    plan      estimated work; shard bounds            state    the job document (compare-and-swap)
    results   result lines, create-only, in order     worker   answers shards as /batch would
    merge     ends a job: sweep, merge, status        service  submit / status / results
    local     the local engine (worker processes)     stepfunctions  the AWS engine (one execution a job)
    events, handler: the jobs Lambda function         cli      `laya-serverless job ...`

`local` (the engine over worker processes) is imported on its own: it assembles workers from the HTTP
service's loader, which itself imports this package.
"""

from .job_service import Engine, JobService
from .merge import finish
from .stepfunctions import StepFunctionsEngine
from .worker import Worker

__all__ = ["Engine", "JobService", "StepFunctionsEngine", "Worker", "finish"]
