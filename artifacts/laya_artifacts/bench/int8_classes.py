"""Whether an int8 recipe answers the same on AVX-512 VNNI and on AVX2 (emulated), and what it costs in speed.

    laya-artifacts bench int8-classes [--out DIR] [--cases 10]

For the MiniLM test checkpoint (pretrained encoder, seeded head), three dynamic-int8 recipes of every encoder
MatMul: 8-bit QInt8 weights, uint8 weights (U8U8) and 7-bit QInt8 weights (`reduce_range`, the project's
recipe). For each: the gate's max |dp| on a slice of the committed corpus natively and under
`qemu-x86_64-static -cpu Haswell` (an AVX2 CPU without VNNI; slow, for fidelity only), and the native
speed against the FP32 graph (median of 7 interleaved passes over 4 x 128 tokens, one thread). Run it on
a VNNI machine: on an AVX2 host both sides are the same class. docs/artifacts-gate.md has the figures.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]   # the checkout: benchmarks read its goldens and stores
sys.path[:0] = [str(ROOT), str(ROOT / "functions"), str(ROOT / "artifacts"), str(ROOT / "research")]

RECIPES = {"8-bit": ("QInt8", False), "u8u8": ("QUInt8", False), "7-bit": ("QInt8", True)}
GATE = """
import json, sys
sys.path[:0] = sys.argv[4].split(":")
from pathlib import Path
from typing import Any
from laya_artifacts.goldens.record import load_goldens
from laya_serverless.gate.replay import run_gate
from laya_serverless.artifact.platform import cpu_profile, int8_kernels
report = run_gate(Path(sys.argv[1]), load_goldens(Path(sys.argv[2])), sys.argv[3], threads=1, repeat=False)
print("RESULT " + json.dumps({"kernels": int8_kernels(cpu_profile()), "max": report.max_probability_error}))
"""


def _gate(artifact: Path, goldens: Path, emulated: bool) -> dict[str, Any]:
    prefix = ["qemu-x86_64-static", "-cpu", "Haswell"] if emulated else []
    paths = ":".join(str(ROOT / p) for p in ("functions", "artifacts", "research"))
    run = subprocess.run([*prefix, sys.executable, "-c", GATE, str(artifact), str(goldens), "cpu-int8", paths],
                         capture_output=True, text=True, check=True)
    return json.loads(next(line for line in run.stdout.splitlines() if line.startswith("RESULT "))[7:])


def _speed(graphs: dict[str, Path]) -> dict[str, float]:
    import numpy as np
    import onnxruntime as ort

    def session(path: Path, optimize: bool) -> ort.InferenceSession:
        options = ort.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads = 1, 1
        options.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED if optimize
                                            else ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
        return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])

    rng = np.random.default_rng(0)
    n, width = 4, 128
    feeds = {"input_ids": rng.integers(1000, 20000, (n, width)).astype(np.int64),
             "attention_mask": np.ones((n, width), np.int64), "marker_pos": np.tile(np.arange(5, 7), (n, 1)),
             "marker_mask": np.ones((n, 2), bool), "qtype": np.zeros(n, np.int64)}
    sessions = {name: session(path, name == "fp32") for name, path in graphs.items()}
    times: dict[str, list[float]] = {name: [] for name in sessions}
    for _ in range(7):
        for name, each in sessions.items():
            started = time.perf_counter()
            each.run(None, feeds)
            times[name].append(time.perf_counter() - started)
    return {name: statistics.median(v) for name, v in times.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--cases", type=int, default=10)
    args = parser.parse_args(argv)
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from laya_artifacts.checkpoints.make import make_checkpoint
    from laya_artifacts.export.onnx_export import export_checkpoint
    from laya_artifacts.goldens.record import write_goldens
    from laya_artifacts.search.precision import prepare_artifact
    from laya_artifacts.search.quantize import FIXED_CANDIDATES, _quiet, encoder_matmuls
    from tests.conftest import golden_slice

    out = args.out or Path(tempfile.mkdtemp(prefix="laya-int8-classes-"))
    raw = export_checkpoint(make_checkpoint("minilm", out / "checkpoint"), out / "export")
    every = 60 // args.cases
    goldens = write_goldens(golden_slice("minilm", keep_case=lambda i, row: i % every == 0 and max(
        row.get("n_tokens") or [0]) <= 96), out / "goldens")
    chosen = encoder_matmuls(raw / "model.onnx").select(FIXED_CANDIDATES[0])
    graphs = {"fp32": raw / "model.onnx"}
    for name, (weights, reduce_range) in RECIPES.items():
        with _quiet():
            quantize_dynamic(str(raw / "model.onnx"), str(out / ("%s.onnx" % name)),
                             weight_type=getattr(QuantType, weights), per_channel=True, reduce_range=reduce_range,
                             op_types_to_quantize=["MatMul"], nodes_to_quantize=chosen,
                             extra_options={"MatMulConstBOnly": True, "DefaultTensorType": onnx.TensorProto.FLOAT})
        graphs[name] = prepare_artifact(out / ("%s.onnx" % name), raw, out / name) / "model.onnx"
    speed = _speed(graphs)
    for name in RECIPES:
        native, avx2 = _gate(graphs[name].parent, goldens, False), _gate(graphs[name].parent, goldens, True)
        print("%-6s native %s max|dp| %.7f   emulated %s max|dp| %.7f   speed x%.2f vs fp32"
              % (name, native["kernels"], native["max"], avx2["kernels"], avx2["max"], speed["fp32"] / speed[name]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
