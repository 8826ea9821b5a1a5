"""The runtime sizes its ONNX Runtime threads to its CPU quota: cgroup v2, cgroup v1, Lambda's memory, or none."""

from __future__ import annotations

from pathlib import Path

import pytest

from laya_serverless.core.cpu_share import CGROUP_V1, CGROUP_V2, LAMBDA, NO_QUOTA, read_quota, size_threads
from laya_serverless.core.session import Threading
from laya_serverless.settings import Settings


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def _v2(root: Path, cpu_max: str, own: str = "/", parent_max: str | None = None) -> Path:
    files = {"proc/self/cgroup": "0::%s\n" % own, "sys/fs/cgroup%s/cpu.max" % own.rstrip("/"): cpu_max}
    if parent_max is not None:
        files["sys/fs/cgroup/cpu.max"] = parent_max
    return _tree(root, files)


def _v1(root: Path, quota: int, period: int = 100000, own: str = "/laya-x", mount: str = "cpu,cpuacct") -> Path:
    base = "sys/fs/cgroup/%s%s" % (mount, own.rstrip("/"))
    return _tree(root, {"proc/self/cgroup": "4:memory:/x\n3:cpu,cpuacct:%s\n0::/\n" % own,
                        "sys/fs/cgroup/%s/cpu.cfs_quota_us" % mount: "-1",
                        "sys/fs/cgroup/%s/cpu.cfs_period_us" % mount: "100000",
                        base + "/cpu.cfs_quota_us": str(quota), base + "/cpu.cfs_period_us": str(period)})


def test_cgroup_v2_cpu_max_is_the_quota(tmp_path: Path) -> None:
    quota = read_quota(_v2(tmp_path, "150000 100000"), {})
    assert (quota.vcpus, quota.source) == (1.5, CGROUP_V2)


def test_cgroup_v2_takes_the_tightest_limit_up_the_tree(tmp_path: Path) -> None:
    root = _v2(tmp_path, "max 100000", own="/a/b", parent_max="57800 100000")
    assert read_quota(root, {}).vcpus == pytest.approx(0.578)


def test_cgroup_v2_without_a_limit_falls_through_to_lambda(tmp_path: Path) -> None:
    quota = read_quota(_v2(tmp_path, "max 100000"), {"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "3538"})
    assert (quota.vcpus, quota.source) == (2.0, LAMBDA)


@pytest.mark.parametrize("mount", ["cpu,cpuacct", "cpu"])
def test_cgroup_v1_cfs_quota_over_period(tmp_path: Path, mount: str) -> None:
    quota = read_quota(_v1(tmp_path, 57887, mount=mount), {"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "3008"})
    assert quota.source == CGROUP_V1 and quota.vcpus == pytest.approx(0.57887)


def test_cgroup_v1_in_a_container_reads_the_mount_root(tmp_path: Path) -> None:
    """/proc/self/cgroup names the host's path, which a container's mount does not have: its root is the cgroup."""
    root = _tree(tmp_path, {"proc/self/cgroup": "3:cpu,cpuacct:/docker/abc\n",
                            "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": "200000",
                            "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000"})
    assert read_quota(root, {}).vcpus == 2.0


def test_cgroup_v1_unlimited_falls_through_to_lambda_then_to_none(tmp_path: Path) -> None:
    root = _v1(tmp_path, -1)
    assert read_quota(root, {"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "1769"}) == read_quota(root, {
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": " 1769 "})
    assert read_quota(root, {"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "1769"}).source == LAMBDA
    assert read_quota(root, {}).source == NO_QUOTA


@pytest.mark.parametrize("memory", ["", "0", "-1024", "1 GB", "lots"])
def test_a_lambda_memory_size_that_is_not_a_positive_integer_is_no_quota(tmp_path: Path, memory: str) -> None:
    assert read_quota(tmp_path, {"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": memory}).source == NO_QUOTA


def test_garbage_in_the_cgroup_files_is_no_quota(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"proc/self/cgroup": "0::/\n3:cpu:/\n", "sys/fs/cgroup/cpu.max": "lots of it",
                            "sys/fs/cgroup/cpu/cpu.cfs_quota_us": "x", "sys/fs/cgroup/cpu/cpu.cfs_period_us": "y"})
    assert read_quota(root, {}).source == NO_QUOTA


@pytest.mark.parametrize(("memory", "cores", "threads"), [
    (1024, 2, 1),  # 0.58 vCPU: one thread, not the two cores Lambda shows
    (1769, 2, 1),  # exactly one vCPU
    (2048, 2, 2),  # 1.16 vCPUs: a second thread uses the part over one
    (3008, 2, 2),
    (10240, 6, 6),  # 5.8 vCPUs on six cores
    (10240, 4, 4),  # capped by the cores this process may run on (affinity)
])
def test_threads_are_the_quota_rounded_up_capped_by_usable_cores(tmp_path: Path, memory: int, cores: int,
                                                                  threads: int) -> None:
    share = size_threads(None, False, root=tmp_path, environ={"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(memory)},
                         cores=lambda: cores)
    assert (share.threads, share.threads_from, share.quota_from, share.usable_cores) == (threads, "quota", LAMBDA,
                                                                                         cores)


def test_without_a_quota_every_usable_core_and_spinning_off(tmp_path: Path) -> None:
    share = size_threads(None, False, root=tmp_path, environ={}, cores=lambda: 3)
    assert share.threading() == Threading(3, spinning=False)
    assert share.report() == {"threads": 3, "spinning": False, "threads_from": "quota", "quota_vcpus": None,
                              "quota_from": NO_QUOTA, "usable_cores": 3, "processes": 1}


def test_the_share_is_split_between_the_local_jobs_worker_processes(tmp_path: Path) -> None:
    root = _v2(tmp_path, "400000 100000")
    assert size_threads(None, False, 2, root=root, environ={}, cores=lambda: 8).threads == 2
    assert size_threads(None, False, 8, root=root, environ={}, cores=lambda: 8).threads == 1  # never zero


def test_laya_threads_and_spinning_override_the_rule(tmp_path: Path) -> None:
    deployment = Settings.from_environ({"LAYA_THREADS": "3", "LAYA_SPINNING": "1"}).deployment
    share = size_threads(deployment.threads, deployment.spinning, root=_v2(tmp_path, "50000 100000"), environ={},
                         cores=lambda: 2)
    assert share.threading() == Threading(3, spinning=True) and share.threads_from == "LAYA_THREADS"
    assert share.quota_vcpus == 0.5  # still reported: the override is visible next to what it overrode
    assert Settings.from_environ({}).deployment.spinning is False


def test_this_machine_gets_at_least_one_thread() -> None:
    share = size_threads(None, False)
    assert 1 <= share.threads <= share.usable_cores


def test_only_a_local_jobs_engine_divides_the_share_between_processes() -> None:
    from laya_serverless.assembly.loader import process_share
    from laya_serverless.settings import DeploymentSettings, JobSettings

    def processes(jobs: JobSettings) -> int:
        return process_share(DeploymentSettings(), jobs.local_processes).processes

    assert processes(JobSettings(jobs_workers=3)) == 3
    assert processes(JobSettings(jobs_workers=3, jobs_state_machine="arn:aws:states:x")) == 1
    assert processes(JobSettings(jobs_workers=0)) == 1  # no local jobs: the server has it all
