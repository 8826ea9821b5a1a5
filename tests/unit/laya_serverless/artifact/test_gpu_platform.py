"""Whether a cuda artifact's gate holds on the serving GPU and onnxruntime, and whether its CPU retry was gated."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from laya_serverless.artifact.gpu import cpu_retry_proven, gpu_key, gpu_profile, unproven_on_this_gpu
from laya_serverless.artifact.manifest import Manifest
from laya_serverless.artifact.platform import gate_record, gate_record_key
from laya_serverless.artifact.store import LocalStore

A10G = {"gpu": {"name": "NVIDIA A10G", "driver_version": "550.163.01"}, "onnxruntime": "1.26.0"}
L4 = {"gpu": {"name": "NVIDIA L4", "driver_version": "550.163.01"}, "onnxruntime": "1.26.0"}
ID = "b" * 64


def _manifest(build_gpu: dict[str, Any] | None, cpu_retry: dict[str, Any] | None = None) -> Manifest:
    cuda: dict[str, Any] = {"build_gpu": build_gpu}
    if cpu_retry is not None:
        cuda["cpu_retry"] = cpu_retry
    return Manifest({"configuration": {"target": "cuda-fp16", "cuda": cuda}, "files": {}})


def test_the_key_names_gpu_model_and_onnxruntime() -> None:
    assert gpu_key(A10G) == "nvidia-a10g-ort-1.26.0"
    assert gpu_key(dict(A10G, onnxruntime="1.31.1")) != gpu_key(A10G)   # a driver update alone keeps the key
    assert gpu_key(dict(A10G, gpu=dict(A10G["gpu"], driver_version="580.1"))) == gpu_key(A10G)


def test_served_only_on_the_gpu_and_onnxruntime_it_was_gated_on(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    assert unproven_on_this_gpu(_manifest(A10G), ID, store, A10G) is None
    reason = unproven_on_this_gpu(_manifest(A10G), ID, store, L4)
    assert reason is not None and "nvidia-a10g-ort-1.26.0" in reason and "nvidia-l4-ort-1.26.0" in reason
    assert "never here" in (unproven_on_this_gpu(_manifest(A10G), ID, store, dict(A10G, onnxruntime="1.31.1")) or "")
    store.create(gate_record_key(ID, gpu_key(L4)), b"{}")    # a record that proves nothing is ignored
    assert "was ignored" in (unproven_on_this_gpu(_manifest(A10G), ID, store, L4) or "")


def test_a_valid_regate_record_lets_it_serve_on_that_gpu(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    report = {"target": "cuda-fp16", "passed": True, "rows": 40, "max_probability_error": 0.004,
              "max_action_error": 0.002}
    store.create(gate_record_key(ID, gpu_key(L4)), gate_record(ID, L4, report, gpu_key(L4)))
    assert unproven_on_this_gpu(_manifest(A10G), ID, store, L4) is None
    assert unproven_on_this_gpu(_manifest(A10G), ID, store, dict(L4, onnxruntime="1.31.1")) is not None


def test_unknown_gpus_are_refused_not_assumed(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    assert "records no GPU" in (unproven_on_this_gpu(_manifest(None), ID, store, A10G) or "")
    assert "cannot tell which GPU" in (unproven_on_this_gpu(_manifest(A10G), ID, store, {"gpu": None}) or "")


def test_the_cpu_retry_needs_its_own_passed_gate() -> None:
    assert cpu_retry_proven(_manifest(A10G, {"passed": True, "max_probability_error": 0.003}))
    assert not cpu_retry_proven(_manifest(A10G, {"passed": False}))
    assert not cpu_retry_proven(_manifest(A10G))


def test_the_profile_says_which_onnxruntime_and_no_gpu_without_nvidia_smi() -> None:
    profile = gpu_profile()
    assert profile["onnxruntime"]
    if shutil.which("nvidia-smi") is None:   # CI and the developer machines
        assert profile["gpu"] is None and profile["gpu_count"] == 0
