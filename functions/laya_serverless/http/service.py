"""The served app, assembled from settings (`protocol.loader.assemble_deployment`), then wrapped in the app."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from ..core.providers import ONNXRUNTIME, Placement
from ..protocol.detect import analyse
from ..protocol.jobs_port import JobsPort
from ..protocol.loader import assemble_deployment
from ..settings import Settings
from .app import build_app
from .catalog import CATALOG_STATE
from .serving import Serving


def build_service(settings: Settings, s3_client: Any = None, inline_inference: bool = False,
                  placement: Placement = ONNXRUNTIME, jobs: JobsPort | None = None) -> FastAPI:
    """The app over `settings`' deployment; still an app (503s, `/health` not ready) when it cannot be loaded."""
    assembled = assemble_deployment(settings, s3_client, placement)
    serve = Serving(settings, assembled.deployment, assembled.registry, analyse, assembled.unavailable,
                    inline_inference)
    app = build_app(serve, jobs)
    setattr(app.state, CATALOG_STATE, assembled.loaded.catalog)
    return app
