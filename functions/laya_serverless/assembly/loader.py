"""The deployment, assembled from settings: every deployed artifact fetched, verified and proven for this machine.

Runs once per process: Lambda INIT, a server's start, a jobs worker's start; the app and the worker
call the same `assemble_deployment`. If an artifact is missing or refused, the result says why
(`unavailable`) and holds no deployment: decision routes answer 503 and `/health` says not ready,
shards fail and are given up. Never a silent fallback to another model. An int8 artifact whose gate
never ran on this CPU's int8 kernels is not served: the same checkpoint's cpu-fp32 artifact is, and
`target_fallbacks` says so.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import observe
from ..artifact.fetch import DEFAULT_CACHE_DIR, fetch_verified, published_id, read_manifest
from ..artifact.gpu import cpu_retry_proven, gpu_profile, unproven_on_this_gpu
from ..artifact.manifest import Manifest
from ..artifact.platform import cpu_profile, unproven_here
from ..artifact.store import ObjectStore, open_store
from ..artifact.targets import FALLBACK_TARGET
from ..core.decider import Decider
from ..core.providers import CPU, ONNXRUNTIME, Placement, require_device
from ..errors import ArtifactError, DeviceUnavailable
from ..protocol.deployment import Deployment
from ..protocol.routing import Registry, canonical_name
from ..settings import Settings

_log = logging.getLogger("laya_serverless")
UNAVAILABLE = "the model artifacts are not available (missing or refused by verification); try again later"




@dataclass
class Loaded:
    """What a deployment loaded: deciders and revisions by routing name, and where it served another target."""

    deciders: dict[str, Decider] = field(default_factory=dict)
    revisions: dict[str, str | None] = field(default_factory=dict)
    fallbacks: dict[str, dict[str, str]] = field(default_factory=dict)
    catalog: dict[str, dict[str, str]] = field(default_factory=dict)  # GET /v1/models entries


def _load_on_device(store: ObjectStore, stored: str, settings: Settings, cache: Path, here: dict[str, Any],
                    placement: Placement) -> tuple[Decider, Manifest, str]:
    """A cuda artifact, only on the GPU and onnxruntime it was gated on, and only with its session on the GPU."""
    artifact_id = published_id(store, stored, settings.target)
    manifest = read_manifest(store, artifact_id)
    refused = unproven_on_this_gpu(manifest[1], artifact_id, store, here)
    if refused is not None:
        raise DeviceUnavailable(refused)
    # On disk, never in memory: a granted CPU retry opens the graph again later, on the first out-of-memory.
    fetched = fetch_verified(store, artifact_id, manifest, cache)
    decider = Decider.from_artifact(fetched.directory, threads=settings.threads, verify=False,
                                    device=settings.device, cpu_retry=cpu_retry_proven(fetched.manifest),
                                    placement=placement)
    return decider, fetched.manifest, artifact_id


def _load_one(store: ObjectStore, stored: str, settings: Settings, cache: Path, here: dict[str, Any],
              placement: Placement = ONNXRUNTIME) -> tuple[Decider, Manifest, dict[str, str] | None, str]:
    if settings.device != CPU:
        on_device, proven, device_artifact = _load_on_device(store, stored, settings, cache, here, placement)
        return on_device, proven, None, device_artifact
    # The manifest decides first: an int8 artifact unproven here is refused before its graph moves.
    artifact_id = published_id(store, stored, settings.target)
    manifest = read_manifest(store, artifact_id)
    refused = unproven_here(manifest[1], artifact_id, store, here)
    fallback = None
    if refused is not None:
        if settings.target == FALLBACK_TARGET:
            raise ArtifactError(refused)
        _log.warning("%s; serving %s/%s instead", refused, stored, FALLBACK_TARGET)
        try:
            artifact_id = published_id(store, stored, FALLBACK_TARGET)
            manifest = read_manifest(store, artifact_id)
        except ArtifactError as exc:
            raise ArtifactError("%s; and no %s artifact to serve instead: %s"
                                % (refused, FALLBACK_TARGET, exc)) from exc
        fallback = {"served": FALLBACK_TARGET, "reason": refused}
    fetched = fetch_verified(store, artifact_id, manifest, cache, settings.graph_in_memory)
    try:  # fetch verified every file
        decider = Decider.from_artifact(fetched.directory, threads=settings.threads, verify=False, graph=fetched.graph)
    finally:
        fetched.release()
    return decider, fetched.manifest, fallback, artifact_id


def load_deciders(settings: Settings, store: ObjectStore, placement: Placement = ONNXRUNTIME) -> Loaded:
    """Every deployed checkpoint's decider, each verified, and proven on this CPU (or its FP32 artifact served),
    or with `settings.device` cuda, proven on this GPU and running there (`DeviceUnavailable` otherwise)."""
    require_device(settings.device, placement)  # before any download: a CPU-only onnxruntime is refused at once
    cache = Path(settings.cache_dir) if settings.cache_dir else DEFAULT_CACHE_DIR
    here = cpu_profile() if settings.device == CPU else gpu_profile()
    loaded = Loaded()
    for name, stored in settings.deployed.items():
        key = canonical_name(name)
        decider, manifest, fallback, artifact_id = _load_one(store, stored, settings, cache, here, placement)
        loaded.deciders[key], loaded.revisions[key] = decider, manifest.revision
        loaded.catalog[key] = describe(key, stored, artifact_id, manifest)
        _log.info("serving %s: checkpoint %s, target %s, artifact %s", key, stored, manifest.target, artifact_id[:12])
        if fallback is not None:
            loaded.fallbacks[key] = fallback
    return loaded


def describe(name: str, stored: str, artifact_id: str, manifest: Manifest,
             today: dt.date | None = None) -> dict[str, str]:
    """One `/v1/models` entry for a loaded artifact."""
    created = manifest.raw.get("created")
    day = created[:10] if isinstance(created, str) and len(created) >= 10 else (today or dt.date.today()).isoformat()
    revision = manifest.revision
    return {"name": name,
            "description": "Laya typed decisions (choice, score, noul): checkpoint %s, target %s, artifact %s%s"
                           % (stored, manifest.target, artifact_id[:12],
                              ", revision %s" % revision[:12] if revision else ""),
            "release_date": day}



@dataclass
class Assembled:
    """A process's deployment (None when `unavailable` says why not), the registry it routes with, what it loaded."""

    deployment: Deployment | None
    registry: Registry
    loaded: Loaded
    store: ObjectStore
    unavailable: str | None = None


def assemble_deployment(settings: Settings, store: ObjectStore | None = None,
                        placement: Placement = ONNXRUNTIME) -> Assembled:
    """The deployment of `settings` (see the module's docstring), for the app and the jobs worker alike, over the
    process's one `store` (opened here from `settings.store` when the edge passed none)."""
    store = open_store(settings.store) if store is None else store
    try:
        loaded = load_deciders(settings, store, placement)
    except ArtifactError as exc:
        _log.exception("cannot load the deployed artifacts from %s", settings.store)
        observe.metric(observe.REFUSED_ARTIFACTS)
        # A device refusal names only providers and GPU models, and says what to fix: it is the answer.
        why = str(exc) if isinstance(exc, DeviceUnavailable) else UNAVAILABLE
        return Assembled(None, Registry(), Loaded(), store, why)
    if loaded.fallbacks:  # an int8 artifact refused on this CPU, its FP32 one served
        observe.metric(observe.REFUSED_ARTIFACTS, len(loaded.fallbacks))

    def reload() -> tuple[dict[str, Decider], dict[str, str | None]]:
        again = load_deciders(settings, store, placement)
        return again.deciders, again.revisions

    registry = Registry({name: name for name in loaded.deciders if name not in Registry().sources})
    deployment = Deployment(loaded.deciders, registry, settings.default_model, loaded.revisions, reload,
                            loaded.fallbacks)
    return Assembled(deployment, registry, loaded, store)
