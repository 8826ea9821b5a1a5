"""Lambda's CPU share, emulated: a CFS quota per memory size, through cgroup v1 or v2 where this process may.

Lambda sells CPU by memory: 1,769 MB buys one vCPU of time, while the function sees 2 or more cores. A CFS
quota reproduces that here (period 100 ms, quota MB/1769 of it) and a high weight keeps neighbouring processes
from binding first, so the quota is what limits the measured process. Where no cgroup can be made (not root,
no cpu controller), `open_quota` says why and the caller measures unconstrained, marked as such.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from laya_serverless.core.cpu_share import MB_PER_VCPU  # one vCPU of time per 1,769 MB, declared once

PERIOD_US = 100_000         # CFS period: 100 ms, the kernel's default
V1_SHARES = 262_144         # cgroup v1 cpu.shares maximum: the quota, not a neighbour, binds
V2_WEIGHT = 10_000          # cgroup v2 cpu.weight maximum
CGROUP_ROOT = Path("/sys/fs/cgroup")
UNCONSTRAINED = "unconstrained"


def vcpus_for(memory_mb: int) -> float:
    """The vCPUs of time Lambda gives a function of `memory_mb`."""
    return memory_mb / MB_PER_VCPU


def quota_us(memory_mb: int, period_us: int = PERIOD_US) -> int:
    """The CFS quota (microseconds per period) of `memory_mb`; at least 1 ms, the kernel's floor."""
    return max(1000, round(period_us * memory_mb / MB_PER_VCPU))


@dataclass(frozen=True)
class Quota:
    """One memory size's CPU quota: a cgroup directory to place processes in, or none (`mode` says which)."""

    memory_mb: int
    mode: str                       # "cgroup-v1", "cgroup-v2" or "unconstrained"
    path: Path | None = None
    reason: str = ""                # why unconstrained

    @property
    def enforced(self) -> bool:
        return self.path is not None

    def tasks_file(self) -> Path | None:
        if self.path is None:
            return None
        return self.path / ("tasks" if self.mode == "cgroup-v1" else "cgroup.procs")

    def enter(self, pid: int | None = None) -> None:
        """Move `pid` (default: this process) into the quota; a child calls it before it execs."""
        tasks = self.tasks_file()
        if tasks is not None:
            tasks.write_text("%d\n" % (os.getpid() if pid is None else pid))


def cgroup_version(root: Path = CGROUP_ROOT) -> str | None:
    """'v1' where a v1 cpu controller is mounted, 'v2' where the unified hierarchy offers cpu, else None."""
    if (root / "cpu" / "cpu.cfs_quota_us").is_file():
        return "v1"
    controllers = root / "cgroup.controllers"
    if controllers.is_file() and "cpu" in controllers.read_text().split():
        return "v2"
    return None


def open_quota(memory_mb: int, name: str, root: Path = CGROUP_ROOT) -> Quota:
    """A cgroup named `name` limited to `memory_mb`'s vCPUs, or an unconstrained Quota saying why not."""
    version = cgroup_version(root)
    if version is None:
        return Quota(memory_mb, UNCONSTRAINED, reason="no cgroup cpu controller under %s" % root)
    try:
        if version == "v1":
            path = root / "cpu" / name
            path.mkdir(exist_ok=True)
            (path / "cpu.cfs_period_us").write_text("%d\n" % PERIOD_US)
            (path / "cpu.cfs_quota_us").write_text("%d\n" % quota_us(memory_mb))
            (path / "cpu.shares").write_text("%d\n" % V1_SHARES)
            return Quota(memory_mb, "cgroup-v1", path)
        subtree = root / "cgroup.subtree_control"
        if "cpu" not in subtree.read_text().split():
            subtree.write_text("+cpu\n")
        path = root / name
        path.mkdir(exist_ok=True)
        (path / "cpu.max").write_text("%d %d\n" % (quota_us(memory_mb), PERIOD_US))
        (path / "cpu.weight").write_text("%d\n" % V2_WEIGHT)
        return Quota(memory_mb, "cgroup-v2", path)
    except OSError as exc:  # not root, a read-only mount, a controller taken by a parent: measure anyway, say so
        return Quota(memory_mb, UNCONSTRAINED, reason="cannot make a cgroup-%s quota (%s)" % (version, exc))


def close_quota(quota: Quota) -> None:
    """Remove the quota's cgroup once its processes have exited (a busy or missing one is left as it is)."""
    if quota.path is not None:
        try:
            quota.path.rmdir()
        except OSError:
            pass
