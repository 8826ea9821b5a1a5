"""The machine checks that decide whether a tier runs, skips with its reason, or (on CI) fails: over fake /proc and
/sys trees and fake readings, so every branch is tested on any machine, root or not."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ..cloud.lambda_runtime import MemoryLimit
from ..prerequisites import (
    MemoryCgroup,
    memory_cgroup,
    namespaces_needed,
    oom_kills,
    qemu_needed,
    require,
    root_needed,
    skip_module,
    x86_64_needed,
)

V1_MOUNTS = ("cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0\n"
             "cgroup /sys/fs/cgroup/memory cgroup %s,relatime,memory 0 0\n")
V2_MOUNTS = "cgroup2 /sys/fs/cgroup cgroup2 %s,nosuid,nodev,noexec,relatime,nsdelegate 0 0\n"
SCOPE = "/user.slice/user-0.slice/session-1.scope"


def _machine(tmp_path: Path, mounts: str, own: str = "/", controls: dict[str, str] | None = None) -> Path:
    """A fake root: /proc/self/{mounts,cgroup} and the cgroup folders with their cgroup.subtree_control."""
    (tmp_path / "proc/self").mkdir(parents=True)
    (tmp_path / "proc/self/mounts").write_text(mounts)
    (tmp_path / "proc/self/cgroup").write_text("0::%s\n" % own)
    (tmp_path / "sys/fs/cgroup/memory").mkdir(parents=True)
    (tmp_path / "sys/fs/cgroup" / own.strip("/")).mkdir(parents=True, exist_ok=True)
    for group, enabled in (controls or {}).items():
        folder = tmp_path / "sys/fs/cgroup" / group.strip("/")
        (folder / "cgroup.subtree_control").write_text(enabled + "\n")
        (folder / "cgroup.procs").write_text("")
    return tmp_path


def test_a_writable_v1_memory_hierarchy_is_used(tmp_path: Path) -> None:
    root = _machine(tmp_path, V1_MOUNTS % "rw")
    assert memory_cgroup(root) == MemoryCgroup(1, root / "sys/fs/cgroup/memory")


def test_a_delegated_v2_group_above_this_process_is_used(tmp_path: Path) -> None:
    root = _machine(tmp_path, V2_MOUNTS % "rw", SCOPE, {"/": "cpu io memory pids", "/user.slice": "memory pids",
                                                        "/user.slice/user-0.slice": "cpu memory pids"})
    assert memory_cgroup(root) == MemoryCgroup(2, root / "sys/fs/cgroup/user.slice/user-0.slice")


@pytest.mark.parametrize(("mounts", "own", "controls", "reason"), [
    (V1_MOUNTS % "ro", "/", {}, "the cgroup v1 memory hierarchy /sys/fs/cgroup/memory is read-only here"),
    (V2_MOUNTS % "ro", "/", {"/": "memory"}, "cgroup v2 is mounted read-only at /sys/fs/cgroup (no delegation)"),
    (V2_MOUNTS % "rw", SCOPE, {"/": "cpu pids", "/user.slice/user-0.slice": "pids"},
     "cgroup v2 without delegation: no writable group from %s up enables the memory controller" % SCOPE),
    (V2_MOUNTS % "rw", "/", {}, "cgroup v2 without delegation"),  # a container's own root, nothing enabled
    ("proc /proc proc rw 0 0\n", "/", {}, "no memory cgroup: neither a cgroup v1 memory hierarchy nor cgroup v2"),
])
def test_a_machine_without_a_usable_memory_cgroup_says_why(tmp_path: Path, mounts: str, own: str,
                                                           controls: dict[str, str], reason: str) -> None:
    found = memory_cgroup(_machine(tmp_path, mounts, own, controls))
    assert isinstance(found, str) and found.startswith(reason) and "\n" not in found


def test_the_v2_memory_check_reads_the_group_s_own_peak_and_oom_events_so_it_can_fail(tmp_path: Path) -> None:
    limit = MemoryLimit(512, MemoryCgroup(2, tmp_path))
    assert (limit.path / "memory.max").read_text() == str(512 * 2**20)
    assert limit.enter_command() == "echo $$ > %s/cgroup.procs && " % limit.path
    (limit.path / "memory.peak").write_text(str(700 * 2**20))
    (limit.path / "memory.events").write_text("low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\noom_group_kill 0\n")
    assert limit.peak_mb() == 700 and limit.oom_killed()  # over the limit: the test's assertion fails
    (limit.path / "memory.events").write_text("low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n")
    assert not limit.oom_killed()


def test_oom_counters_of_both_versions() -> None:
    assert oom_kills(1, "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n") == 2
    assert oom_kills(1, "oom_kill_disable 1\nunder_oom 0\noom_kill 0\n") == 0
    assert oom_kills(2, "low 0\nhigh 0\nmax 3\noom 1\noom_kill 0\n") == 1  # the limit was hit, nothing killed yet
    assert oom_kills(2, "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n") == 0


def test_root_architecture_qemu_and_namespaces(tmp_path: Path) -> None:
    assert root_needed(0) is None
    assert root_needed(1000) == "not root (uid 1000): mount namespaces, a tmpfs /tmp and cgroups need root"
    assert x86_64_needed("x86_64") is None
    assert x86_64_needed("aarch64") == "this tier runs x86_64 code and the machine is aarch64"
    assert qemu_needed("aarch64").startswith("this tier runs x86_64 code")
    assert qemu_needed("x86_64", str(tmp_path / "absent")).endswith("(apt-get install qemu-user-static)")
    (tmp_path / "qemu").touch()
    assert qemu_needed("x86_64", str(tmp_path / "qemu")) is None
    denied = subprocess.CompletedProcess(["unshare"], 1, "", "unshare: unshare failed: Operation not permitted\n")
    assert namespaces_needed(denied) == ("no private mount namespace here (unshare --mount: unshare: unshare "
                                         "failed: Operation not permitted)")
    assert namespaces_needed(subprocess.CompletedProcess(["unshare"], 0, "", "")) is None


def test_a_missing_prerequisite_skips_here_and_fails_on_ci() -> None:
    require(None, {"CI": "true"})  # nothing missing: nothing happens
    with pytest.raises(pytest.skip.Exception, match=r"^not root \(uid 1000\)"):
        require(root_needed(1000), {})
    with pytest.raises(pytest.fail.Exception, match=r"^CI must run this tier, but not root \(uid 1000\)"):
        require(root_needed(1000), {"CI": "true"})


def test_a_module_is_skipped_before_its_fixtures_here_and_left_to_fail_per_test_on_ci() -> None:
    skip_module("absent", {"CI": "true"})  # CI: no module skip
    skip_module(None, {})
    with pytest.raises(pytest.skip.Exception, match=r"^absent$"):
        skip_module("absent", {})
