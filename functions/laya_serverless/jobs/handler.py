"""AWS Lambda entry point of the jobs function (not Mangum): Step Functions tasks and direct async job
submissions. The worker (deciders fetched and verified) is built once at INIT."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from ..errors import SettingsError
from ..settings import JOBS_STATE_MACHINE, Settings
from .events import dispatch
from .runtime import load_worker
from .stepfunctions import stepfunctions_jobs

Handler = Callable[[Any, Any], dict[str, Any]]


def make_handler(environ: Mapping[str, str] | None = None, s3_client: Any = None,
                 sfn_client: Any = None) -> Handler:
    settings = Settings.from_environ(environ)
    service = stepfunctions_jobs(settings, s3_client, sfn_client)
    if service is None:
        raise SettingsError("the jobs function needs %s (the stack sets it)" % JOBS_STATE_MACHINE)
    return partial(dispatch, load_worker(settings, s3_client), service)


handler = make_handler() if os.environ.get("AWS_LAMBDA_FUNCTION_NAME") else None
