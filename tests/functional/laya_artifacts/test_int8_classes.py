"""The int8 verdicts the suite relies on hold on both x86 int8 kernel classes (AVX-512 VNNI and AVX2).

This session runs on one class. The int8 artifacts the `int8`-marked tests gate are built here, then
their gate is replayed as an AVX2-only CPU under `qemu-x86_64-static -cpu Haswell`
(`laya_artifacts.search.emulated`; cpuid says Haswell there, /proc/cpuinfo still shows the host). On an AVX2
host both runs are the same class and the emulation path is still proven. Slices are small: emulation
is slow (about 1.3 s per question on the tiny model), for fidelity, never timing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from laya_artifacts.build import build_artifact
from laya_artifacts.goldens.record import load_goldens, write_goldens
from laya_artifacts.search.emulated import emulated_gate
from laya_artifacts.spec import BuildSeams, BuildSpec
from laya_serverless.artifact.cpu import read_cpuinfo
from laya_serverless.gate.replay import run_gate
from tests.conftest import golden_slice
from tests.functional.laya_artifacts.test_build import fixed_speeds
from tests.prerequisites import qemu_needed, require, skip_module

pytestmark = [pytest.mark.slow, pytest.mark.int8]
skip_module(qemu_needed())  # an x86_64 machine with qemu user mode, or a skip with the reason (not on CI)


@pytest.fixture(autouse=True)
def _qemu_here() -> None:
    require(qemu_needed())  # on CI each test fails with the reason instead


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
    # the two shortest choice cases of each split (at most 100 tokens a row): emulation costs grow with length,
    # and a path whose kernels do not depend on the class needs few rows to show it
    short = golden_slice("tiny-modernbert", keep_case=lambda _i, row: max(row.get("n_tokens") or [0]) <= 100,
                         keep_question=lambda q: q["type"] == "choice")
    by_length = sorted(short["rows"], key=lambda row: max(row.get("n_tokens") or [0]))
    short["rows"] = [row for split in ("selection", "confirmation")
                     for row in [r for r in by_length if r["split"] == split][:2]]
    goldens = write_goldens(short, tmp_path / "g")
    native, avx2 = _both_classes(tiny_int8, goldens)
    assert native["passed"] and avx2["passed"], avx2
    assert avx2["rows"] == native["rows"] >= 4 and {"selection", "confirmation"} <= set(avx2["splits"])
    assert abs(avx2["max_probability_error"] - native["max_probability_error"]) <= 1e-5


@pytest.fixture(scope="module")
def layer_mix_build(tiny_modernbert: tuple[Path, Path],
                    tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any, Path]:
    """(artifact, gate report, goldens): the dynamic int8 layer mix on wide choice questions, built natively with
    its AVX2 class proven by the build (`emulate_classes`). Built once: the emulation is most of this module's time,
    so the rows are the corpus's shortest with a wide choice question (two, one per split; at most 200 tokens)."""
    root = tmp_path_factory.mktemp("layer-mix")
    short = golden_slice("tiny-modernbert", keep_case=lambda _i, row: max(row.get("n_tokens") or [0]) <= 200,
                         keep_question=lambda q: q["type"] == "choice" and len(q["criteria"]) >= 11)
    assert {row["split"] for row in short["rows"]} == {"selection", "confirmation"}, short["rows"]
    goldens = write_goldens(short, root / "g")
    out, report = build_artifact(tiny_modernbert[0],
                                 BuildSpec.of("cpu-int8", goldens=goldens, min_speedup=0, candidates=["layer-mix"],
                                              emulate_classes=True), root / "a",
                                 seams=BuildSeams(timer=fixed_speeds({"fp32": 10.0, "layer-mix": 5.0})))
    return out, report, goldens


def test_the_dynamic_int8_layer_mix_passes_on_avx2(layer_mix_build: tuple[Path, Any, Path]) -> None:
    # the layer-mix test's rows (wide choice questions), its recipe built natively and gated on both classes
    from laya_serverless.artifact.manifest import Manifest

    out, report, goldens = layer_mix_build
    assert report.search["chosen"] == "layer-mix" and report.passed
    check = Manifest.load(out).raw["configuration"]["int8_classes"].get("avx2", {})
    if check.get("proof") == "emulated-gate":   # the build gated the whole corpus as an AVX2 CPU already
        assert check["passed"] is True and check["rows"] == report.rows, check
        return
    native, avx2 = _both_classes(out, goldens)   # an AVX2 host, or proven by equivalence: gate it emulated here
    assert native["passed"] and avx2["passed"], avx2


def test_a_dynamic_int8_build_proves_the_avx2_class_by_equivalence_and_serves_there(
        layer_mix_build: tuple[Path, Any, Path], tmp_path: Path) -> None:
    """Kernel-exact int8 (7-bit weights): the build replays a slice as an AVX2 CPU and records that it answers
    the same, so the artifact serves on AVX2 without a re-gate. With 8-bit weights an AVX2 CPU saturates, the
    two classes differ by far more than the check allows, and the class is left unproven."""
    from laya_serverless.artifact.manifest import Manifest
    from laya_serverless.artifact.platform import ARM64_CLASSES, cpu_profile, int8_kernels, unproven_here
    from laya_serverless.artifact.store import LocalStore

    out, report, _goldens = layer_mix_build
    classes = Manifest.load(out).raw["configuration"]["int8_classes"]
    here = int8_kernels(cpu_profile())
    assert classes[here] == {"proof": "gate"}
    avx2 = {"machine": "x86_64", "model": "an AVX2-only CPU", "isa": ["sse4_2", "avx", "avx2", "fma"]}
    if here == "avx2":   # an AVX2 host gated its own class; there is nothing to emulate (but the Arm classes,
        assert set(classes) - set(ARM64_CLASSES) == {"avx2"}   # when the arm64 package is built: test_arm64.py)
        return
    check = classes["avx2"]
    # this random model's activations sit near rounding steps: FP32 noise between the classes' kernels moves a
    # few, so the slice differs by more than equivalence allows, and the (small) corpus is gated emulated
    assert check["proof"] in ("equivalence", "emulated-gate"), check
    if check["proof"] == "emulated-gate":
        assert check["passed"] is True and check["rows"] == report.rows, check
        assert check["equivalence"]["max_probability_difference"] <= 1e-2   # kernel-exact: no saturation
    manifest = Manifest.load(out)
    assert unproven_here(manifest, "a" * 64, LocalStore(tmp_path / "store"), avx2) is None
    spoiled = json.loads(json.dumps(manifest.raw))   # a class whose proof did not pass is not served there
    spoiled["configuration"]["int8_classes"]["avx2"].update(passed=False, equivalent=False)
    assert unproven_here(Manifest(spoiled), "a" * 64, LocalStore(tmp_path / "store"), avx2) is not None


_RUN_MATMUL = """
import sys, numpy as np, onnxruntime as ort
session = ort.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])
np.save(sys.argv[3], session.run(None, {"x": np.load(sys.argv[2])})[0])
"""


@pytest.mark.parametrize("reduce_range", [True, False], ids=["7-bit-weights", "8-bit-weights"])
def test_the_recipe_s_int8_matmul_is_bit_exact_between_vnni_and_avx2(tmp_path: Path, reduce_range: bool) -> None:
    """One 768x768 MatMul quantized as the recipe quantizes (per-channel QInt8, uint8 dynamic activations),
    run here and as an AVX2 CPU: with the recipe's 7-bit weights the outputs are identical; with 8-bit ones
    an AVX2 CPU's VPMADDUBSW saturates (on a VNNI host the two differ by several percent)."""
    import subprocess
    import sys

    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from laya_artifacts.search.emulated import AVX2_CPU, QEMU
    from laya_artifacts.search.quantize import REDUCE_RANGE, _quiet

    rng = np.random.default_rng(7)
    weights = (rng.standard_normal((768, 768)) * 0.05).astype(np.float32)
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "one-matmul",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 768])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 768])],
                              [numpy_helper.from_array(weights, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(tmp_path / "fp32.onnx"))
    with _quiet():
        quantize_dynamic(str(tmp_path / "fp32.onnx"), str(tmp_path / "int8.onnx"), weight_type=QuantType.QInt8,
                         per_channel=True, reduce_range=reduce_range)
    np.save(tmp_path / "x.npy", rng.uniform(-1, 1, (64, 768)).astype(np.float32))
    outputs = {}
    for side, prefix in (("native", []), ("avx2", [QEMU, "-cpu", AVX2_CPU])):
        arguments = [str(tmp_path / "int8.onnx"), str(tmp_path / "x.npy"), str(tmp_path / ("%s.npy" % side))]
        subprocess.run([*prefix, sys.executable, "-c", _RUN_MATMUL, *arguments], check=True, capture_output=True,
                       timeout=600)
        outputs[side] = np.load(tmp_path / ("%s.npy" % side))
    relative = float(np.abs(outputs["native"] - outputs["avx2"]).max() / np.abs(outputs["native"]).max())
    if reduce_range:
        assert REDUCE_RANGE and relative == 0.0
    elif "avx512_vnni" in read_cpuinfo().get("flags", "").split():
        assert relative > 0.01   # the saturation the recipe avoids, seen from a VNNI host
