"""AWS Lambda entry point of the jobs function (not Mangum): Step Functions tasks and direct async job
submissions. The worker (deciders fetched and verified) is built once at INIT."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from ..artifact.store import open_store
from ..errors import SettingsError
from ..jobs.runtime import load_worker
from ..jobs.stepfunctions import stepfunctions_jobs
from ..settings import JOBS_STATE_MACHINE, Settings
from .job_events import dispatch

Handler = Callable[[Any, Any], dict[str, Any]]


def make_handler(environ: Mapping[str, str] | None = None, s3_client: Any = None,
                 sfn_client: Any = None) -> Handler:
    settings = Settings.from_environ(environ)
    # The process's one store, shared by both.
    store = open_store(settings.deployment.store, s3_client, settings.deployment.download_parts)
    service = stepfunctions_jobs(settings, store, sfn_client)
    if service is None:
        raise SettingsError("the jobs function needs %s (the stack sets it)" % JOBS_STATE_MACHINE)
    return partial(dispatch, load_worker(settings, store), service)


handler = make_handler() if os.environ.get("AWS_LAMBDA_FUNCTION_NAME") else None
