"""Whether an artifact's gate holds on the serving CPU: int8 kernel classes, gate records."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from laya_serverless.artifact.manifest import Manifest
from laya_serverless.artifact.platform import cpu_profile, gate_record, gate_record_key, int8_kernels, unproven_here
from laya_serverless.artifact.store import LocalStore

VNNI = {"machine": "x86_64", "model": "Xeon", "isa": ["avx2", "avx512f", "avx512bw", "avx512_vnni"]}
AVX2 = {"machine": "x86_64", "model": "EPYC", "isa": ["avx2", "fma"]}


@pytest.mark.parametrize(("profile", "kernels"), [
    (VNNI, "avx512-vnni"), (AVX2, "avx2"),
    ({"machine": "x86_64", "isa": ["avx2", "avx512_vnni", "amx_int8"]}, "amx-int8"),
    ({"machine": "x86_64", "isa": ["avx2", "avx_vnni"]}, "avx-vnni"),
    ({"machine": "x86_64", "isa": ["avx2", "avx512bw"]}, "avx512"),
    ({"machine": "x86_64", "isa": ["sse4_2"]}, "x86_64-baseline"),
    ({"machine": "aarch64", "isa": ["asimddp", "i8mm"]}, "arm64-i8mm"),
    ({"machine": "aarch64", "isa": ["asimddp"]}, "arm64-dotprod"),
    ({}, "unknown-baseline"),
])
def test_int8_kernel_classes(profile: dict[str, Any], kernels: str) -> None:
    assert int8_kernels(profile) == kernels


def test_the_cpu_profile_reads_flags_and_model_name() -> None:
    profile = cpu_profile("processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu avx2 fma avx512_vnni\n"
                          "processor\t: 1\nflags\t\t: other\n")
    assert profile["model"] == "AMD EPYC" and profile["isa"] == ["avx2", "fma", "avx512_vnni"]


def _manifest(target: str, built: dict[str, Any]) -> Manifest:
    weights = "int8" if "int8" in target else "fp32"
    return Manifest({"configuration": {"target": target, "precision": {"weights": weights}, "build_cpu": built},
                     "files": {}})


def test_fp32_is_served_anywhere_and_int8_only_where_gated(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    assert unproven_here(_manifest("cpu-fp32", VNNI), "a" * 64, store, AVX2) is None
    assert unproven_here(_manifest("cpu-int8", VNNI), "a" * 64, store, dict(VNNI, model="other Xeon")) is None
    reason = unproven_here(_manifest("cpu-int8", VNNI), "a" * 64, store, AVX2)
    assert reason is not None and "avx512-vnni" in reason and "avx2" in reason and "laya-artifacts import" in reason


def test_a_gate_record_for_this_cpus_kernels_proves_it_here(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    store.create(gate_record_key("b" * 64, "avx2"), gate_record("b" * 64, AVX2, {"passed": True}))
    assert unproven_here(_manifest("cpu-int8", VNNI), "b" * 64, store, AVX2) is None
    assert unproven_here(_manifest("cpu-int8", VNNI), "c" * 64, store, AVX2) is not None
