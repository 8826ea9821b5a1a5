"""`/health`'s device block, measured from the resident sessions (upstream's semantics).

`device` is where the first resident checkpoint really computes, and the configured preference
only while nothing is resident (`device_is_preference` true exactly then); `checkpoint_devices`
gives each one; `cpu_fallbacks` counts each one's requests retried on the CPU after the GPU ran out
of memory. A GPU deployment whose sessions could not reach the GPU is refused at load, so it
never reports `cpu` here while answering: it is not ready, and `/health` says why. `int8_kernels`
(an extension) names this CPU's int8 kernel class, the one an int8 artifact must be proven on to
serve here (`artifact.platform`), as the deployment last chose its artifacts for it (a SnapStart restore
reads it again); `target_fallbacks` says where it was not, `class_switches` where a restore on another
class changed the choice. `cpu_share` (an extension) gives the sessions' threads and spinning, and the
CPU quota they were sized to (`core.cpu_share`).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from ..artifact.platform import cpu_profile, int8_kernels
from ..core.fallback import device_of, fallbacks_of
from ..protocol.deployment import Deployment


def device_report(deployment: Deployment, preference: str) -> dict[str, Any]:
    names = list(deployment.deciders)
    devices = {name: device_of(deployment.deciders[name].session) for name in names}
    return {"device": devices[names[0]] if names else preference, "device_is_preference": not names,
            "checkpoint_devices": devices,
            "cpu_fallbacks": {name: fallbacks_of(deployment.deciders[name].session) for name in names},
            **served_on_report(deployment)}


def served_on_report(deployment: Deployment) -> dict[str, Any]:
    served = deployment.served_on
    if served is None:  # a deployment assembled by hand (tests, embedding): only this CPU's class is known
        return {"int8_kernels": this_cpu_int8_kernels()}
    report: dict[str, Any] = {"int8_kernels": served.cpu_class, "class_switches": list(served.class_switches)}
    if served.cpu_share is not None:
        report["cpu_share"] = served.cpu_share.report()
    return report


@lru_cache(maxsize=1)
def this_cpu_int8_kernels() -> str:
    return int8_kernels(cpu_profile())


def preference_report(preference: str) -> dict[str, Any]:
    """What a deployment that loaded nothing can say: the device it was asked for."""
    return {"device": preference, "device_is_preference": True}
