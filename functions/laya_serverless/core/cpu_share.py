"""How many intra-op threads this process's ONNX Runtime sessions get, from the CPU time it is really granted.

Lambda sells CPU time by memory (1,769 MB buys one vCPU) while showing the function two or more
cores; a pool sized to the visible cores then runs more threads than it has time for, and ONNX
Runtime's spinning threads burn that time waiting. So, unless `LAYA_THREADS` says otherwise:
threads = min(usable cores, ceil(CPU quota in vCPUs)), the quota read from cgroup v2 `cpu.max`,
else cgroup v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us`, else `AWS_LAMBDA_FUNCTION_MEMORY_SIZE` / 1769;
usable cores are this process's CPU affinity; the result is shared between the local jobs engine's
worker processes. Spinning is off unless asked for. The filesystem root, the environment and the
affinity are parameters, so tests feed fake cgroup trees (docs/operations.md#threads-and-cpu-quota).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .session import Threading

LAMBDA_MEMORY = "AWS_LAMBDA_FUNCTION_MEMORY_SIZE"
MB_PER_VCPU = 1769  # Lambda grants one vCPU of time per 1,769 MB of memory
# Where the quota came from, as the start-up log and /health name it.
CGROUP_V2, CGROUP_V1, LAMBDA, NO_QUOTA = "cgroup-v2 cpu.max", "cgroup-v1 cfs", LAMBDA_MEMORY, "none"
_V1_CPU_MOUNTS = ("cpu,cpuacct", "cpuacct,cpu", "cpu")


@dataclass(frozen=True)
class Quota:
    """CPU time this process may use, in vCPUs (None: unlimited), and where that figure came from."""

    vcpus: float | None
    source: str


@dataclass(frozen=True)
class CpuShare:
    """The figures a process's sessions run with, and why: reported at start-up and in `/health`."""

    threads: int
    spinning: bool
    threads_from: str  # "LAYA_THREADS" or "quota" (the rule above)
    quota_vcpus: float | None
    quota_from: str
    usable_cores: int
    processes: int  # how many processes the quota is shared between

    def threading(self) -> Threading:
        return Threading(self.threads, self.spinning)

    def report(self) -> dict[str, Any]:
        return asdict(self)


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return None


def _own_cgroups(root: Path) -> dict[str, str]:
    """This process's cgroup path per controller list ("" for the v2 unified hierarchy)."""
    paths: dict[str, str] = {}
    for line in (_read(root / "proc/self/cgroup") or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            paths[parts[1]] = parts[2]
    return paths


def _levels(mount: Path, own: str) -> list[Path]:
    """The cgroup directories from this process's own up to the mount's root: a limit on any of them binds.
    A path that does not exist under the mount (a container whose cgroup is the mount's root) reads the root."""
    parts = [p for p in own.split("/") if p]
    levels = [mount.joinpath(*parts[:n]) for n in range(len(parts), -1, -1)]
    return [level for level in levels if level.is_dir()] or [mount]


def _v2_quota(root: Path, own: str) -> float | None:
    limits = []
    for level in _levels(root / "sys/fs/cgroup", own):
        fields = (_read(level / "cpu.max") or "").split()
        if len(fields) == 2 and fields[0] != "max":
            try:
                quota, period = float(fields[0]), float(fields[1])
            except ValueError:
                continue
            if quota > 0 and period > 0:
                limits.append(quota / period)
    return min(limits) if limits else None


def _v1_quota(root: Path, own: str) -> float | None:
    for name in _V1_CPU_MOUNTS:
        mount = root / "sys/fs/cgroup" / name
        if not (mount / "cpu.cfs_quota_us").is_file():
            continue
        limits = []
        for level in _levels(mount, own):
            try:
                quota = float(_read(level / "cpu.cfs_quota_us") or "-1")
                period = float(_read(level / "cpu.cfs_period_us") or "0")
            except ValueError:
                continue
            if quota > 0 and period > 0:
                limits.append(quota / period)
        return min(limits) if limits else None
    return None


def read_quota(root: Path = Path("/"), environ: Mapping[str, str] | None = None) -> Quota:
    """The CPU quota: cgroup v2, else cgroup v1, else Lambda's memory size; `NO_QUOTA` when none says."""
    env = os.environ if environ is None else environ
    cgroups = _own_cgroups(root)
    if "" in cgroups and (vcpus := _v2_quota(root, cgroups[""])) is not None:
        return Quota(vcpus, CGROUP_V2)
    v1_own = next((path for controllers, path in cgroups.items() if "cpu" in controllers.split(",")), "/")
    if (vcpus := _v1_quota(root, v1_own)) is not None:
        return Quota(vcpus, CGROUP_V1)
    memory = env.get(LAMBDA_MEMORY, "").strip()
    if memory.isdigit() and int(memory) > 0:
        return Quota(int(memory) / MB_PER_VCPU, LAMBDA)
    return Quota(None, NO_QUOTA)


def usable_cores() -> int:
    """The cores this process may run on (its affinity), or every core where affinity is not exposed."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - macOS and Windows have no sched_getaffinity
        return os.cpu_count() or 1


def size_threads(threads: int | None, spinning: bool, processes: int = 1, *, root: Path = Path("/"),
                 environ: Mapping[str, str] | None = None, cores: Callable[[], int] = usable_cores) -> CpuShare:
    """This process's share: `threads` (LAYA_THREADS) when given, else the rule in the module's docstring,
    divided between `processes` (each keeps at least one thread)."""
    quota = read_quota(root, environ)
    usable = max(1, cores())
    processes = max(1, processes)
    if threads:
        return CpuShare(threads, spinning, "LAYA_THREADS", quota.vcpus, quota.source, usable, processes)
    granted = usable if quota.vcpus is None else min(usable, max(1, math.ceil(round(quota.vcpus, 6))))
    return CpuShare(max(1, granted // processes), spinning, "quota", quota.vcpus, quota.source, usable, processes)


__all__ = ["CGROUP_V1", "CGROUP_V2", "LAMBDA", "MB_PER_VCPU", "NO_QUOTA", "CpuShare", "Quota", "read_quota",
           "size_threads", "usable_cores"]
