"""AWS Lambda entry point: the app is built once at INIT (artifacts fetched and verified then) and
wrapped by Mangum, behind the guard that answers every event (`guard`). Lifespan is off: Mangum
would otherwise run it on every invocation."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from mangum import Mangum

from ..artifact.store import open_store
from ..http.service import build_service
from ..jobs.stepfunctions import stepfunctions_jobs
from ..settings import Settings
from . import snapstart
from .api_key import read_api_key
from .guard import GuardedHandler
from .powertools import Handler, Instrumentation, in_lambda


def with_secret_key(settings: Settings, secrets_client: Any = None) -> Settings:
    """Settings whose `api_key` comes from Secrets Manager when only the secret's ARN is configured.

    The key then never sits in the function's environment, where anyone allowed to read the
    function's configuration would see it. A secret that cannot be read fails INIT loudly rather
    than serving without auth."""
    if settings.http.api_key is not None or settings.http.api_key_secret is None:
        return settings
    key = read_api_key(settings.http.api_key_secret, secrets_client)
    return replace(settings, http=replace(settings.http, api_key=key))


def lambda_handler(app: Any, settings: Settings) -> GuardedHandler:
    """The guarded Mangum adapter over an ASGI `app` (tests pass one built on fakes)."""
    return GuardedHandler(Mangum(app, lifespan="off", api_gateway_base_path=settings.http.api_base_path),
                          strict=settings.protocol.jev_strict)


def make_handler(environ: Mapping[str, str] | None = None, s3_client: Any = None,
                 secrets_client: Any = None) -> Handler:
    """The deployed handler: Powertools set up first (so INIT is logged and traced), then the app, guarded."""
    instrumentation = Instrumentation(environ)
    settings = with_secret_key(Settings.from_environ(environ), secrets_client)
    # The process's one store: the app and /v1/jobs share it.
    store = open_store(settings.deployment.store, s3_client, settings.deployment.download_parts)
    jobs = stepfunctions_jobs(settings, store)  # /v1/jobs where the stack created the engine
    app = build_service(settings, store, inline_inference=True, jobs=jobs)  # one event per instance at a time
    if in_lambda(environ):
        snapstart.register(app.state.serving, settings, secrets_client, store)
    return instrumentation.wrap(lambda_handler(app, settings))


handler = make_handler() if os.environ.get("AWS_LAMBDA_FUNCTION_NAME") else None
