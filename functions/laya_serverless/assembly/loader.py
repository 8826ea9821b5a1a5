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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import observe
from ..artifact.fetch import DEFAULT_CACHE_DIR, fetch_verified, missing_folder
from ..artifact.gpu import cpu_retry_proven, gpu_profile, unproven_on_this_gpu
from ..artifact.manifest import Manifest
from ..artifact.platform import cpu_profile, gated_elsewhere, int8_kernels, unproven_here
from ..artifact.store import ObjectStore, open_store, pointer_key
from ..artifact.targets import FALLBACK_TARGET
from ..artifact.trust import load_keys, pin_key, trusted_artifact
from ..core.cpu_share import CpuShare, size_threads
from ..core.decider import Decider
from ..core.providers import CPU, ONNXRUNTIME, Placement, require_device
from ..core.session import Threads
from ..errors import ArtifactError, DeviceUnavailable, SettingsError, StorageUnavailable
from ..protocol.deployment import Deployment, ServedOn
from ..protocol.routing import Registry, canonical_name
from ..settings import ARTIFACT_KEYS, DeploymentSettings

_log = logging.getLogger("laya_serverless")
UNAVAILABLE = "the model artifacts are not available (missing or refused by verification); try again later"
# What an unreadable store or cache says to callers (the log names the folder and the error; callers get no paths).
STORAGE_UNAVAILABLE = ("the artifact store or the local cache folder cannot be read, or the cache is not this "
                       "user's own; the server log names it")
CpuReader = Callable[[], dict[str, Any]]  # this CPU's profile (`artifact.cpu.cpu_profile`); tests pass another




@dataclass
class Loaded:
    """What a deployment loaded: deciders and revisions by routing name, and where it served another target."""

    deciders: dict[str, Decider] = field(default_factory=dict)
    revisions: dict[str, str | None] = field(default_factory=dict)
    fallbacks: dict[str, dict[str, str]] = field(default_factory=dict)
    catalog: dict[str, dict[str, str]] = field(default_factory=dict)  # GET /v1/models entries
    served_on: ServedOn | None = None  # the CPU class they were chosen for, each artifact, the threads' sizing


def _load_on_device(store: ObjectStore, stored: str, settings: DeploymentSettings, cache: Path, here: dict[str, Any],
                    placement: Placement, threads: Threads) -> tuple[Decider, Manifest, str]:
    """A cuda artifact, only on the GPU and onnxruntime it was gated on, and only with its session on the GPU."""
    artifact_id, manifest = trusted_artifact(store, stored, settings.target, settings.artifact_keys,
                                             settings.artifact_pins)
    refused = unproven_on_this_gpu(manifest[1], artifact_id, store, here)
    if refused is not None:
        raise DeviceUnavailable(refused)
    # On disk, never in memory: a granted CPU retry opens the graph again later, on the first out-of-memory.
    fetched = fetch_verified(store, artifact_id, manifest, cache)
    # The handles stay open with the decider: a CPU retry reopens the graph through its verified handle.
    decider = Decider.from_artifact(fetched.directory, threads=threads, verify=False,
                                    device=settings.device, cpu_retry=cpu_retry_proven(fetched.manifest),
                                    placement=placement, files=fetched.files)
    return decider, fetched.manifest, artifact_id


def choose_artifact(store: ObjectStore, stored: str, settings: DeploymentSettings,
                    here: dict[str, Any]) -> tuple[str, tuple[bytes, Manifest], dict[str, str] | None]:
    """The CPU artifact to serve for `stored` on the CPU `here`: the configured target where it is published and its
    gate holds here, else the checkpoint's cpu-fp32 (with why, as `target_fallbacks` reports it). The manifest
    decides first: an int8 artifact unproven here is refused before its graph moves."""
    try:
        artifact_id, manifest = trusted_artifact(store, stored, settings.target, settings.artifact_keys,
                                                 settings.artifact_pins)
    except ArtifactError:
        if settings.target == FALLBACK_TARGET or _published(store, stored, settings):
            raise   # a refused artifact (signature, manifest, binding) is never stepped around
        # The quickstart publishes cpu-fp32 alone: a cpu-int8 deployment serves the best target present.
        missing = "no %s artifact is published for %s" % (settings.target, stored)
        _log.info("%s; serving %s/%s", missing, stored, FALLBACK_TARGET)
        return _fallback(store, stored, settings, missing)
    mismatch = gated_elsewhere(manifest[1], artifact_id)
    if mismatch is not None:  # no fallback: the FP32 artifact was gated under the same other runtime
        raise ArtifactError(mismatch)
    refused = unproven_here(manifest[1], artifact_id, store, here)
    if refused is None:
        return artifact_id, manifest, None
    if settings.target == FALLBACK_TARGET:
        raise ArtifactError(refused)
    _log.warning("%s; serving %s/%s instead", refused, stored, FALLBACK_TARGET)
    return _fallback(store, stored, settings, refused)


def _published(store: ObjectStore, stored: str, settings: DeploymentSettings) -> bool:
    """Whether (stored, target) is pinned or has a pointer (or the store is missing): only an absent pointer in a
    store that exists makes way for cpu-fp32."""
    return (pin_key(stored, settings.target) in settings.artifact_pins or missing_folder(store) is not None
            or store.read(pointer_key(stored, settings.target)) is not None)


def _fallback(store: ObjectStore, stored: str, settings: DeploymentSettings,
              why: str) -> tuple[str, tuple[bytes, Manifest], dict[str, str]]:
    try:
        artifact_id, manifest = trusted_artifact(store, stored, FALLBACK_TARGET, settings.artifact_keys,
                                                 settings.artifact_pins)
    except ArtifactError as exc:
        raise ArtifactError("%s; and no %s artifact to serve instead: %s" % (why, FALLBACK_TARGET, exc)) from exc
    return artifact_id, manifest, {"served": FALLBACK_TARGET, "reason": why}


def open_artifact(store: ObjectStore, artifact_id: str, manifest: tuple[bytes, Manifest], settings: DeploymentSettings,
                  cache: Path, threads: Threads) -> tuple[Decider, Manifest]:
    """Fetch a chosen CPU artifact verified and open its decider."""
    fetched = fetch_verified(store, artifact_id, manifest, cache, settings.graph_in_memory)
    try:  # fetch verified every file
        memory = fetched.graph_in_memory   # freed once parsed: not held beside the session's copies at INIT
        decider = Decider.from_artifact(fetched.directory, threads=threads, verify=False, graph=fetched.graph,
                                        files=fetched.files, release_graph=memory.close if memory else None)
    finally:
        fetched.release()
    return decider, fetched.manifest


def _load_one(store: ObjectStore, stored: str, settings: DeploymentSettings, cache: Path, here: dict[str, Any],
              placement: Placement = ONNXRUNTIME,
              threads: Threads = None) -> tuple[Decider, Manifest, dict[str, str] | None, str]:
    if settings.device != CPU:
        on_device, proven, device_artifact = _load_on_device(store, stored, settings, cache, here, placement,
                                                             threads)
        return on_device, proven, None, device_artifact
    artifact_id, manifest, fallback = choose_artifact(store, stored, settings, here)
    decider, proven = open_artifact(store, artifact_id, manifest, settings, cache, threads)
    return decider, proven, fallback, artifact_id


def process_share(settings: DeploymentSettings, processes: int = 1) -> CpuShare:
    """This process's threads (`core.cpu_share`): `processes` on this machine share the quota (the local jobs
    engine's workers, `JobSettings.local_processes`)."""
    share = size_threads(settings.threads, settings.spinning, processes)
    _log.info("ONNX Runtime: %d intra-op threads (%s; CPU quota %s vCPUs from %s, %d usable cores, %d processes), "
              "spinning %s", share.threads, share.threads_from,
              "none" if share.quota_vcpus is None else "%.2f" % share.quota_vcpus, share.quota_from,
              share.usable_cores, share.processes, "on" if share.spinning else "off")
    return share


def load_deciders(settings: DeploymentSettings, store: ObjectStore, placement: Placement = ONNXRUNTIME,
                  share: CpuShare | None = None, cpu: CpuReader = cpu_profile, processes: int = 1) -> Loaded:
    """Every deployed checkpoint's decider, each verified, and proven on this CPU (or its FP32 artifact served),
    or with `settings.device` cuda, proven on this GPU and running there (`DeviceUnavailable` otherwise)."""
    require_device(settings.device, placement)  # before any download: a CPU-only onnxruntime is refused at once
    cache = Path(settings.cache_dir) if settings.cache_dir else DEFAULT_CACHE_DIR
    share = share or process_share(settings, processes)
    profile = cpu()
    here = profile if settings.device == CPU else gpu_profile()
    served_on = ServedOn(int8_kernels(profile), {}, share)
    loaded = Loaded(served_on=served_on)
    for name, stored in settings.deployed.items():
        key = canonical_name(name)
        decider, manifest, fallback, artifact_id = _load_one(store, stored, settings, cache, here, placement,
                                                             share.threading())
        loaded.deciders[key], loaded.revisions[key] = decider, manifest.revision
        served_on.artifacts[key] = (stored, artifact_id, manifest.target)
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
    detail: str | None = None   # the refusal itself, paths included: for a local edge's one line, never callers


def assemble_deployment(settings: DeploymentSettings, store: ObjectStore | None = None,
                        placement: Placement = ONNXRUNTIME, cpu: CpuReader = cpu_profile,
                        processes: int = 1, log_refusal: bool = True) -> Assembled:
    """The deployment of `settings` (see the module's docstring), for the app and the jobs worker alike, over the
    process's one `store` (opened here from `settings.store` when the edge passed none)."""
    store = open_store(settings.store, parts=settings.download_parts) if store is None else store
    if settings.artifact_keys:  # a key that cannot be loaded is the configuration's fault: refused at start
        try:
            load_keys(settings.artifact_keys)
        except ArtifactError as exc:
            raise SettingsError("invalid %s: %s" % (ARTIFACT_KEYS, exc)) from None
    try:
        loaded = load_deciders(settings, store, placement, cpu=cpu, processes=processes)
    except (ArtifactError, OSError) as exc:
        if log_refusal:  # a local edge says it in its own one line instead
            _log.error("cannot load the deployed artifacts from %s: %s", settings.store, exc)  # expected: no traceback
        observe.metric(observe.REFUSED_ARTIFACTS)
        # A device refusal names only providers and GPU models, and says what to fix: it is the answer.
        why = str(exc) if isinstance(exc, DeviceUnavailable) else (
            STORAGE_UNAVAILABLE if isinstance(exc, StorageUnavailable | OSError) else UNAVAILABLE)
        return Assembled(None, Registry(), Loaded(), store, why, str(exc))
    if loaded.fallbacks:  # an int8 artifact unproven on this CPU, its FP32 one served: a fallback, not a refusal
        observe.metric(observe.TARGET_FALLBACKS, len(loaded.fallbacks))

    def reload() -> tuple[dict[str, Decider], dict[str, str | None]]:
        share = loaded.served_on.cpu_share if loaded.served_on is not None else None
        again = load_deciders(settings, store, placement, share, cpu)
        if deployment.served_on is not None and again.served_on is not None:  # chosen again, for today's CPU
            deployment.served_on.cpu_class = again.served_on.cpu_class
            deployment.served_on.artifacts = again.served_on.artifacts
        return again.deciders, again.revisions

    # routing.repo names what serves: the stored checkpoint (`demo`, a user's folder, a hub id), never upstream's
    # bundle for a checkpoint that is not it.
    served = loaded.served_on.artifacts if loaded.served_on is not None else {}
    registry = Registry({name: served[name][0] if name in served else name for name in loaded.deciders})
    deployment = Deployment(loaded.deciders, registry, settings.default_model, loaded.revisions, reload,
                            loaded.fallbacks, loaded.served_on)
    return Assembled(deployment, registry, loaded, store)
