"""The int8 verdicts the suite relies on hold on both x86 int8 kernel classes (AVX-512 VNNI and AVX2).

This session runs on one class. The int8 artifacts the `int8`-marked tests gate are built here, then
their gate is replayed as an AVX2-only CPU under `qemu-x86_64-static -cpu Haswell`
(`laya_artifacts.emulated`; cpuid says Haswell there, /proc/cpuinfo still shows the host). On an AVX2
host both runs are the same class and the emulation path is still proven. Slices are small: emulation
is slow (about 1.3 s per question on the tiny model), for fidelity, never timing.
"""

from __future__ import annotations

import platform
from pathlib import Path
from typing import Any

import pytest

from laya_artifacts.build import build_artifact
from laya_artifacts.emulated import emulated_gate
from laya_artifacts.goldens import load_goldens, write_goldens
from laya_artifacts.parity import run_gate
from laya_serverless.artifact.cpu import read_cpuinfo

from ..conftest import golden_slice
from .test_build import fixed_speeds

pytestmark = [pytest.mark.slow, pytest.mark.int8,
              pytest.mark.skipif(platform.machine() != "x86_64", reason="emulates an x86 CPU class")]


def _both_classes(artifact: Path, goldens: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    native = run_gate(artifact, load_goldens(goldens), "cpu-int8", threads=1, repeat=False).as_dict()
    emulated = emulated_gate(artifact, goldens, "cpu-int8")
    assert emulated["int8_kernels"] == "avx2"
    # /proc/cpuinfo still shows the host: where it claims AVX-512, cpuid (Haswell) must have overruled it
    host_avx512 = any(f.startswith("avx512") for f in read_cpuinfo().get("flags", "").split())
    assert emulated["cpu"]["isa_source"] == ("cpuid" if host_avx512 else "cpuinfo")
    return native, emulated["report"]


def test_weight_only_int8_answers_the_same_on_avx2(tiny_int8: Path, tmp_path: Path) -> None:
    # 8-bit weights dequantized to FP32 compute: no int8 kernel runs, so the classes agree to FP32 noise
    # the corpus's short cases (at most 128 tokens a row): emulation costs grow with length
    short = golden_slice("tiny-modernbert", keep_case=lambda _i, row: max(row.get("n_tokens") or [0]) <= 128,
                         keep_question=lambda q: q["type"] == "choice")
    goldens = write_goldens(short, tmp_path / "g")
    native, avx2 = _both_classes(tiny_int8, goldens)
    assert native["passed"] and avx2["passed"], avx2
    assert avx2["rows"] == native["rows"] >= 10 and {"selection", "confirmation"} <= set(avx2["splits"])
    assert abs(avx2["max_probability_error"] - native["max_probability_error"]) <= 1e-5


def test_the_dynamic_int8_layer_mix_passes_on_avx2(tiny_modernbert: tuple[Path, Path], tmp_path: Path) -> None:
    # the layer-mix test's rows (wide choice questions), its recipe built natively and gated on both classes
    goldens = write_goldens(golden_slice("tiny-modernbert", keep_case=lambda i, _row: i % 10 == 0,
                                         keep_question=lambda q: q["type"] == "choice" and len(q["criteria"]) >= 11),
                            tmp_path / "g")
    out, report = build_artifact(tiny_modernbert[0], "cpu-int8", tmp_path / "a", goldens_path=goldens, min_speedup=0,
                                 candidates=["layer-mix"], timer=fixed_speeds({"fp32": 10.0, "layer-mix": 5.0}))
    assert report.search["chosen"] == "layer-mix"
    native, avx2 = _both_classes(out, goldens)
    assert native["passed"] and avx2["passed"], avx2
