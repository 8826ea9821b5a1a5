"""The served app, assembled from settings: every deployed artifact fetched and verified, then the app.

Runs once per process (Lambda INIT, or `laya-serverless serve`). If an artifact is missing or
refused, the app still starts: decision routes answer 503 with `Retry-After` and `/health` says
not ready. Never a traceback to a client, never a silent fallback to another model.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from fastapi import FastAPI

from ..artifact.fetch import DEFAULT_CACHE_DIR, fetch_published
from ..artifact.store import open_store
from ..core.decider import Decider
from ..errors import ArtifactError
from ..settings import Settings
from .app import create_app
from .routing import Registry, canonical_name

_log = logging.getLogger("laya_serverless")
UNAVAILABLE = "the model artifacts are not available (missing or refused by verification); try again later"


def load_deciders(settings: Settings, s3_client: Any = None) -> tuple[dict[str, Decider], dict[str, str | None]]:
    """(routing name -> decider, routing name -> checkpoint revision) for every deployed checkpoint."""
    store = open_store(settings.store, s3_client=s3_client)
    cache = Path(settings.cache_dir) if settings.cache_dir else DEFAULT_CACHE_DIR
    deciders: dict[str, Decider] = {}
    revisions: dict[str, str | None] = {}
    for name, stored in settings.deployed.items():
        key = canonical_name(name)
        _, path, manifest = fetch_published(store, stored, settings.target, cache)
        deciders[key] = Decider.from_artifact(path, threads=settings.threads, verify=False)  # fetch verified it
        revisions[key] = manifest.revision
    return deciders, revisions


def build_service(settings: Settings, s3_client: Any = None, inline_inference: bool = False) -> FastAPI:
    try:
        deciders, revisions = load_deciders(settings, s3_client)
    except ArtifactError:
        _log.exception("cannot load the deployed artifacts from %s", settings.store)
        return create_app({}, settings, unavailable=UNAVAILABLE)
    extra = {name: name for name in deciders if name not in Registry().sources}
    return create_app(deciders, settings, registry=Registry(extra), revisions=revisions,
                      inline_inference=inline_inference, reload=lambda: load_deciders(settings, s3_client))
