"""The served app, assembled from settings: every deployed artifact fetched and verified, then the app.

Runs once per process (Lambda INIT, or `laya-serverless serve`). If an artifact is missing or
refused, the app still starts: decision routes answer 503 with `Retry-After` and `/health` says
not ready. Never a traceback to a client, never a silent fallback to another model. An int8
artifact whose gate never ran on this CPU's int8 kernels is not served: the same checkpoint's
cpu-fp32 artifact is, and `/health` says so under `target_fallbacks`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi import FastAPI

from ..artifact.fetch import DEFAULT_CACHE_DIR, fetch_published
from ..artifact.manifest import Manifest
from ..artifact.platform import cpu_profile, unproven_here
from ..artifact.store import ObjectStore, open_store
from ..core.decider import Decider
from ..errors import ArtifactError
from ..jobs.service import JobService
from ..settings import Settings
from .app import create_app
from .routing import Registry, canonical_name

_log = logging.getLogger("laya_serverless")
UNAVAILABLE = "the model artifacts are not available (missing or refused by verification); try again later"


FALLBACK_TARGET = "cpu-fp32"


@dataclass
class Loaded:
    """What a deployment loaded: deciders and revisions by routing name, and where it served another target."""

    deciders: dict[str, Decider] = field(default_factory=dict)
    revisions: dict[str, str | None] = field(default_factory=dict)
    fallbacks: dict[str, dict[str, str]] = field(default_factory=dict)


def _load_one(store: ObjectStore, stored: str, settings: Settings, cache: Path,
              here: dict[str, Any]) -> tuple[Decider, Manifest, dict[str, str] | None]:
    artifact_id, path, manifest = fetch_published(store, stored, settings.target, cache)
    refused = unproven_here(manifest, artifact_id, store, here)
    fallback = None
    if refused is not None:
        if settings.target == FALLBACK_TARGET:
            raise ArtifactError(refused)
        _log.warning("%s; serving %s/%s instead", refused, stored, FALLBACK_TARGET)
        try:
            artifact_id, path, manifest = fetch_published(store, stored, FALLBACK_TARGET, cache)
        except ArtifactError as exc:
            raise ArtifactError("%s; and no %s artifact to serve instead: %s"
                                % (refused, FALLBACK_TARGET, exc)) from exc
        fallback = {"served": FALLBACK_TARGET, "reason": refused}
    decider = Decider.from_artifact(path, threads=settings.threads, verify=False)  # fetch verified every file
    return decider, manifest, fallback


def load_deciders(settings: Settings, s3_client: Any = None) -> Loaded:
    """Every deployed checkpoint's decider, each verified, and proven on this CPU (or its FP32 artifact served)."""
    store = open_store(settings.store, s3_client=s3_client)
    cache = Path(settings.cache_dir) if settings.cache_dir else DEFAULT_CACHE_DIR
    here = cpu_profile()
    loaded = Loaded()
    for name, stored in settings.deployed.items():
        key = canonical_name(name)
        decider, manifest, fallback = _load_one(store, stored, settings, cache, here)
        loaded.deciders[key], loaded.revisions[key] = decider, manifest.revision
        if fallback is not None:
            loaded.fallbacks[key] = fallback
    return loaded


def build_service(settings: Settings, s3_client: Any = None, inline_inference: bool = False,
                  jobs: JobService | None = None) -> FastAPI:
    try:
        loaded = load_deciders(settings, s3_client)
    except ArtifactError:
        _log.exception("cannot load the deployed artifacts from %s", settings.store)
        return create_app({}, settings, unavailable=UNAVAILABLE, jobs=jobs)

    def reload() -> tuple[dict[str, Decider], dict[str, str | None]]:
        again = load_deciders(settings, s3_client)
        return again.deciders, again.revisions

    extra = {name: name for name in loaded.deciders if name not in Registry().sources}
    return create_app(loaded.deciders, settings, registry=Registry(extra), revisions=loaded.revisions,
                      inline_inference=inline_inference, reload=reload, target_fallbacks=loaded.fallbacks, jobs=jobs)
