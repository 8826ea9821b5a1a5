"""AWS Lambda entry point: the app is built once at INIT (artifacts fetched and verified then) and
wrapped by Mangum. Lifespan is off: Mangum would otherwise run it on every invocation."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from mangum import Mangum

from .service import build_service
from .settings import Settings


def make_handler(environ: Mapping[str, str] | None = None, s3_client: Any = None) -> Mangum:
    settings = Settings.from_environ(environ)
    app = build_service(settings, s3_client, inline_inference=True)  # one event per instance at a time
    return Mangum(app, lifespan="off", api_gateway_base_path=settings.api_base_path)


handler = make_handler() if os.environ.get("AWS_LAMBDA_FUNCTION_NAME") else None
