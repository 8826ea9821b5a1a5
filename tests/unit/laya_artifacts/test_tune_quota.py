"""The CPU quota `laya-artifacts tune` runs each memory size under, over fake cgroup trees (v1, v2, none)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from laya_artifacts.tune.quota import (
    PERIOD_US,
    UNCONSTRAINED,
    V1_SHARES,
    V2_WEIGHT,
    cgroup_version,
    close_quota,
    open_quota,
    quota_us,
    vcpus_for,
)


def _v1_tree(root: Path) -> Path:
    cpu = root / "cpu"
    cpu.mkdir(parents=True)
    for name in ("cpu.cfs_quota_us", "cpu.cfs_period_us", "cpu.shares", "tasks"):
        (cpu / name).write_text("")
    return root


def _v2_tree(root: Path, controllers: str = "cpuset cpu io memory pids", enabled: str = "") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "cgroup.controllers").write_text(controllers + "\n")
    (root / "cgroup.subtree_control").write_text(enabled + "\n")
    return root


@pytest.mark.parametrize(("memory_mb", "expected_us", "vcpus"), [
    (1769, 100_000, 1.0),     # one vCPU: the whole period
    (1024, 57_886, 0.579),    # 1024/1769 of it
    (3008, 170_040, 1.700),   # more than one core's worth: the period times 1.7
    (10240, 578_858, 5.789),
    (1, 1000, 0.001),         # the kernel's 1 ms floor
])
def test_the_quota_is_memory_over_1769_of_a_100_ms_period(memory_mb: int, expected_us: int, vcpus: float) -> None:
    assert quota_us(memory_mb) == expected_us
    assert vcpus_for(memory_mb) == pytest.approx(vcpus, abs=1e-3)


def test_cgroup_v1_gets_period_quota_and_high_shares_and_takes_a_process(tmp_path: Path) -> None:
    root = _v1_tree(tmp_path / "fs")
    assert cgroup_version(root) == "v1"
    quota = open_quota(1024, "laya-tune-1-1024", root)
    group = root / "cpu" / "laya-tune-1-1024"
    assert (quota.mode, quota.path, quota.enforced) == ("cgroup-v1", group, True)
    assert (group / "cpu.cfs_period_us").read_text().strip() == str(PERIOD_US)
    assert (group / "cpu.cfs_quota_us").read_text().strip() == "57886"
    assert (group / "cpu.shares").read_text().strip() == str(V1_SHARES)
    quota.enter(4242)
    assert (group / "tasks").read_text().strip() == "4242"
    quota.enter()
    assert (group / "tasks").read_text().strip() == str(os.getpid())


def test_cgroup_v2_enables_the_cpu_controller_then_writes_cpu_max_and_weight(tmp_path: Path) -> None:
    root = _v2_tree(tmp_path / "fs")
    assert cgroup_version(root) == "v2"
    quota = open_quota(3008, "g", root)
    assert quota.mode == "cgroup-v2"
    assert (root / "cgroup.subtree_control").read_text().strip() == "+cpu"
    assert (root / "g" / "cpu.max").read_text().strip() == "170040 100000"
    assert (root / "g" / "cpu.weight").read_text().strip() == str(V2_WEIGHT)
    quota.enter(7)
    assert (root / "g" / "cgroup.procs").read_text().strip() == "7"


def test_cgroup_v2_leaves_an_enabled_cpu_controller_alone(tmp_path: Path) -> None:
    root = _v2_tree(tmp_path / "fs", enabled="cpu memory")
    open_quota(1024, "g", root)
    assert (root / "cgroup.subtree_control").read_text().strip() == "cpu memory"


@pytest.mark.parametrize(("make", "why"), [
    (lambda root: root.mkdir(), "no cgroup cpu controller"),                                 # no cgroups at all
    (lambda root: _v2_tree(root, controllers="memory pids"), "no cgroup cpu controller"),    # v2 without cpu
    (lambda root: (_v1_tree(root), (root / "cpu" / "g").write_text("")), "cannot make a cgroup-v1 quota"),
    (lambda root: (_v2_tree(root), (root / "g").write_text("")), "cannot make a cgroup-v2 quota"),
])
def test_without_a_usable_cgroup_it_says_why_and_measures_unconstrained(tmp_path: Path, make, why: str) -> None:
    root = tmp_path / "fs"
    make(root)
    quota = open_quota(1024, "g", root)
    assert (quota.mode, quota.enforced, quota.tasks_file()) == (UNCONSTRAINED, False, None)
    assert why in quota.reason
    quota.enter(1)          # placing a process is then a no-op
    close_quota(quota)


def test_close_removes_an_empty_group_and_leaves_a_busy_one(tmp_path: Path) -> None:
    root = _v1_tree(tmp_path / "fs")
    quota = open_quota(1024, "g", root)
    close_quota(quota)      # a real cgroupfs removes a group with its control files; a plain folder refuses
    assert (root / "cpu" / "g").is_dir()
    for child in (root / "cpu" / "g").iterdir():
        child.unlink()
    close_quota(quota)
    assert not (root / "cpu" / "g").exists()
