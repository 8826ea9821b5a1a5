"""What a test tier needs from the machine, read from /proc and /sys, and how a missing piece is reported.

On a developer's machine a tier that cannot run here is skipped with a one-line reason. On CI (`CI=true`,
which `.ci/run` sets) every tier must run, so the same reason fails the test instead of hiding the tier.
Each check returns the reason it cannot run (None when it can) and takes its readings as arguments, so
the unit tests (tests/unit/test_prerequisites.py) feed it fake /proc and /sys trees.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

QEMU = "qemu-x86_64-static"  # laya_artifacts.search.emulated runs it from PATH
_UNSET = "unset"


def on_ci(environ: Mapping[str, str] = os.environ) -> bool:
    return environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def require(reason: str | None, environ: Mapping[str, str] = os.environ) -> None:
    """Skip with `reason` (one line), or fail with it on CI; nothing when `reason` is None."""
    if reason is None:
        return
    if on_ci(environ):
        pytest.fail("CI must run this tier, but %s" % reason, pytrace=False)
    pytest.skip(reason)


def skip_module(reason: str | None, environ: Mapping[str, str] = os.environ) -> None:
    """At a test module's top: skip the whole module with `reason` before its fixtures build anything. On CI
    nothing happens here; the module's tests then `require` the same reason and fail with it."""
    if reason is not None and not on_ci(environ):
        pytest.skip(reason, allow_module_level=True)


def x86_64_needed(machine: str | None = None) -> str | None:
    machine = platform.machine() if machine is None else machine
    return None if machine in ("x86_64", "AMD64") else "this tier runs x86_64 code and the machine is %s" % machine


def root_needed(euid: int | None = None) -> str | None:
    euid = os.geteuid() if euid is None else euid
    return None if euid == 0 else "not root (uid %d): mount namespaces, a tmpfs /tmp and cgroups need root" % euid


def qemu_needed(machine: str | None = None, qemu: str | None = _UNSET) -> str | None:
    """The emulated AVX2 tier: qemu user mode (`qemu`: its path, default found on PATH) on an x86_64 machine."""
    qemu = shutil.which(QEMU) if qemu == _UNSET else qemu
    return x86_64_needed(machine) or (None if qemu and Path(qemu).exists() else
                                      "%s is missing: `make test` installs it with apt as root "
                                      "(apt-get install qemu-user-static)" % QEMU)


def namespaces_needed(probe: subprocess.CompletedProcess[str] | None = None) -> str | None:
    """Whether this process may make a private mount namespace (a default container may not)."""
    if probe is None:
        if shutil.which("unshare") is None:
            return "util-linux's unshare is missing"
        probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "true"], capture_output=True,
                               text=True, timeout=30)
    if probe.returncode == 0:
        return None
    return "no private mount namespace here (unshare --mount: %s)" % (probe.stderr.strip().splitlines() or
                                                                       ["exit %d" % probe.returncode])[-1]


@dataclass(frozen=True)
class MemoryCgroup:
    """Where the test makes its memory cgroup: `parent` on a v1 memory hierarchy or a cgroup v2 tree."""

    version: int
    parent: Path


def _mounts(text: str) -> list[tuple[str, str, list[str]]]:
    """(mount point, type, options) of each line of /proc/self/mounts."""
    found = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 4:
            found.append((fields[1], fields[2], fields[3].split(",")))
    return found


def memory_cgroup(root: Path = Path("/")) -> MemoryCgroup | str:
    """The memory cgroup this machine lets the test create under `root` (a fake tree in the unit tests), or why
    not: a writable v1 memory hierarchy, else the nearest cgroup v2 group at or above this process's own whose
    `cgroup.subtree_control` enables `memory` and that this user may write (a delegated subtree)."""
    mounts = _mounts((root / "proc/self/mounts").read_text())
    v1 = [(point, options) for point, kind, options in mounts if kind == "cgroup" and "memory" in options]
    if v1:
        point, options = v1[0]
        path = root / point.lstrip("/")
        if "ro" in options or not os.access(path, os.W_OK):
            return "the cgroup v1 memory hierarchy %s is read-only here" % point
        return MemoryCgroup(1, path)
    v2 = [(point, options) for point, kind, options in mounts if kind == "cgroup2"]
    if not v2:
        return "no memory cgroup: neither a cgroup v1 memory hierarchy nor cgroup v2 is mounted"
    point, options = v2[0]
    if "ro" in options:
        return "cgroup v2 is mounted read-only at %s (no delegation)" % point
    own = next((line.split("::", 1)[1] for line in (root / "proc/self/cgroup").read_text().splitlines()
                if line.startswith("0::")), "/")
    top = root / point.lstrip("/")
    group = top / own.strip("/")
    while True:
        control = group / "cgroup.subtree_control"
        enabled = control.read_text().split() if control.is_file() else []
        if "memory" in enabled and os.access(group, os.W_OK) and os.access(group / "cgroup.procs", os.W_OK):
            return MemoryCgroup(2, group)
        if group == top:
            return ("cgroup v2 without delegation: no writable group from %s up enables the memory controller in "
                    "cgroup.subtree_control" % (own or "/"))
        group = group.parent


def oom_kills(version: int, text: str) -> int:
    """How often the kernel hit the cgroup's limit: v1 `memory.oom_control`'s oom_kill, v2 `memory.events`'
    oom (limit reached, nothing reclaimable) and oom_kill, whichever is larger."""
    counts = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if value.strip().isdigit():
            counts[name] = int(value)
    keys = ("oom_kill",) if version == 1 else ("oom", "oom_kill")
    return max(counts.get(key, 0) for key in keys)


__all__ = ["MemoryCgroup", "memory_cgroup", "namespaces_needed", "on_ci", "oom_kills", "qemu_needed", "require",
           "root_needed", "skip_module", "x86_64_needed"]
