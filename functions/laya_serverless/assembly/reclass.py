"""The CPU class re-checked after a SnapStart restore: an int8 artifact serves only where its gate holds.

INIT chose each checkpoint's artifact for the snapshot host's int8 kernel class (`loader.choose_artifact`).
A snapshot may be restored on a CPU of another class, where that int8 artifact's results were never
gated. So after every restore the class is read again; when it differs, each checkpoint's artifact is
chosen again for the new class (its int8 where the gate covers that class, else its cpu-fp32), and a
changed choice is fetched, verified and swapped in before the first request. Each switch is kept in
the deployment's `served_on.class_switches` (`/health`) and counted in the `ClassSwitches` metric.

A restore's hooks have 10 s, and at the published checkpoints' size fetching and opening a graph takes
longer (a 0.84 GB compact graph: tens of seconds), so a switch fetches at most `fetch_budget` bytes; past
it the checkpoint cannot be served here, and the caller withdraws the instance (503, saying why) rather
than let the hook time out. Under SnapStart such a checkpoint should serve an artifact that holds on every
class: its cpu-fp32, or an int8 whose build proved the other classes (docs/operations.md, SnapStart).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from .. import observe
from ..artifact.fetch import DEFAULT_CACHE_DIR
from ..artifact.manifest import Manifest
from ..artifact.platform import int8_kernels
from ..artifact.store import ObjectStore
from ..core.providers import CPU
from ..errors import ArtifactError
from ..protocol.deployment import Deployment
from ..settings import DeploymentSettings
from .loader import choose_artifact, open_artifact

_log = logging.getLogger("laya_serverless")
# What a restore may fetch and open within its hooks' 10 s: a demo-sized graph, never a published checkpoint's.
RESTORE_FETCH_BUDGET = 256 * 2**20


def artifact_bytes(manifest: Manifest) -> int:
    return sum(int(entry["bytes"]) for entry in manifest.files.values())


def recheck_class(deployment: Deployment, settings: DeploymentSettings, here: dict[str, Any],
                  store: ObjectStore, fetch_budget: int | None = None) -> list[dict[str, str]]:
    """Choose every checkpoint's artifact again for the CPU `here` when its int8 class is not the one the
    deployment's artifacts were chosen for; the switches made. `ArtifactError` when a checkpoint has nothing
    this class may serve, or (`fetch_budget`, bytes) only an artifact too large to fetch now: the caller must
    then stop serving it."""
    served = deployment.served_on
    now = int8_kernels(here)
    if served is None or settings.device != CPU or now == served.cpu_class:
        return []
    cache = Path(settings.cache_dir) if settings.cache_dir else DEFAULT_CACHE_DIR
    threads = served.cpu_share.threading() if served.cpu_share is not None else None
    switches = []
    for name, (stored, artifact_id, target) in list(served.artifacts.items()):
        chosen, manifest, fallback = choose_artifact(store, stored, settings, here)
        if chosen == artifact_id:  # its gate covers both classes (or it is FP32): nothing to change
            continue
        size = artifact_bytes(manifest[1])
        if fetch_budget is not None and size > fetch_budget and name in deployment.deciders:
            raise ArtifactError("restored on %s int8 kernels, where %s must serve artifact %s (%s, %d MB), more than "
                                "a restore fetches (%d MB); serve an artifact that holds on every class under SnapStart"
                                % (now, name, chosen[:12], manifest[1].target, size // 2**20, fetch_budget // 2**20))
        if name in deployment.deciders:  # an idle-unloaded deployment chooses again when it reloads
            decider, proven = open_artifact(store, chosen, manifest, settings, cache, threads)
            deployment.swap(name, decider, proven.revision, fallback)
        switch = {"checkpoint": name, "from_class": served.cpu_class, "to_class": now,
                  "from_artifact": artifact_id[:12], "from_target": target,
                  "to_artifact": chosen[:12], "to_target": manifest[1].target}
        served.artifacts[name] = (stored, chosen, manifest[1].target)
        served.class_switches.append(switch)
        switches.append(switch)
        _log.warning("restored on %s int8 kernels, chosen for %s: %s now serves %s (artifact %s) instead of %s (%s)",
                     now, served.cpu_class, name, switch["to_target"], chosen[:12], target, artifact_id[:12])
    served.cpu_class = now
    if switches:
        observe.metric(observe.CLASS_SWITCHES, len(switches))
    return switches


__all__ = ["RESTORE_FETCH_BUDGET", "artifact_bytes", "recheck_class"]
