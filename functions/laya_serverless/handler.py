"""AWS Lambda entry point: the app is built once at INIT (artifacts fetched and verified then) and
wrapped by Mangum. Lifespan is off: Mangum would otherwise run it on every invocation."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from mangum import Mangum

from .errors import SettingsError
from .http.service import build_service
from .jobs.stepfunctions import stepfunctions_jobs
from .settings import API_KEY_SECRET, Settings


def with_secret_key(settings: Settings, secrets_client: Any = None) -> Settings:
    """Settings whose `api_key` comes from Secrets Manager when only the secret's ARN is configured.

    The key then never sits in the function's environment, where anyone allowed to read the
    function's configuration would see it. A secret that cannot be read fails INIT loudly rather
    than serving without auth."""
    if settings.api_key is not None or settings.api_key_secret is None:
        return settings
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    client = secrets_client or boto3.client("secretsmanager")
    try:
        value = client.get_secret_value(SecretId=settings.api_key_secret).get("SecretString") or ""
    except (BotoCoreError, ClientError) as exc:
        raise SettingsError("%s: cannot read the API key secret (%s)" % (API_KEY_SECRET, type(exc).__name__)) from exc
    if not value:
        raise SettingsError("%s: the API key secret has no string value" % API_KEY_SECRET)
    return replace(settings, api_key=value)


def make_handler(environ: Mapping[str, str] | None = None, s3_client: Any = None,
                 secrets_client: Any = None) -> Mangum:
    settings = with_secret_key(Settings.from_environ(environ), secrets_client)
    jobs = stepfunctions_jobs(settings, s3_client)  # /v1/jobs where the stack created the engine
    app = build_service(settings, s3_client, inline_inference=True, jobs=jobs)  # one event per instance at a time
    return Mangum(app, lifespan="off", api_gateway_base_path=settings.api_base_path)


handler = make_handler() if os.environ.get("AWS_LAMBDA_FUNCTION_NAME") else None
