"""The served app, assembled from settings (`assembly.loader.assemble_deployment`), then wrapped in the app."""

from __future__ import annotations

from fastapi import FastAPI

from ..artifact.store import ObjectStore
from ..assembly.loader import assemble_deployment
from ..core.providers import ONNXRUNTIME, Placement
from ..protocol.detect import analyse
from ..protocol.jobs_port import JobsPort
from ..settings import Settings
from .app import build_app
from .catalog import CATALOG_STATE
from .serving import Serving

LOAD_REFUSAL_STATE = "load_refusal"  # app.state: why the deployment did not load, paths included (local edges only)


def build_service(settings: Settings, store: ObjectStore | None = None, inline_inference: bool = False,
                  placement: Placement = ONNXRUNTIME, jobs: JobsPort | None = None,
                  log_refusal: bool = True) -> FastAPI:
    """The app over `settings`' deployment; still an app (503s, `/health` not ready) when it cannot be loaded.
    `log_refusal=False`: the edge reports a refusal itself (`LOAD_REFUSAL_STATE`), in one line."""
    assembled = assemble_deployment(settings.deployment, store, placement, processes=settings.jobs.local_processes,
                                    log_refusal=log_refusal)
    serve = Serving(settings, assembled.deployment, assembled.registry, analyse, assembled.unavailable,
                    inline_inference)
    app = build_app(serve, jobs)
    setattr(app.state, CATALOG_STATE, assembled.loaded.catalog)
    setattr(app.state, LOAD_REFUSAL_STATE, assembled.detail)
    return app
