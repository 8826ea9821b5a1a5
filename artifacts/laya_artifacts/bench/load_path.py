"""Where an int8 graph's session creation goes, and what the load-path options change.

    laya-artifacts bench load-path GRAPH [--rounds 3] [--drop-caches] [--threads 2]

GRAPH is an artifact's `model.onnx` (optimized offline, as the build writes it). Every variant runs in a
fresh process, one at a time, rounds rotating the order; each prints the median of its rounds:

- `served`: what the runtime does (`core/session.py`): the saved graph, optimizations off;
- `optimize-at-load`: the raw cost the offline optimization saves (ORT_ENABLE_EXTENDED at load);
- `no-prepack`: `session.disable_prepacking` (weights are not repacked for the int8 kernels at load);
- `no-arena`: the CPU memory arena off;
- `ort-format`: the same graph saved in ORT's flatbuffer format and loaded from the file;
- `ort-bytes`: that file read into memory and used in place for initializers
  (`session.use_ort_model_bytes_directly`, `..._for_initializers`);
- `int4-embeddings`: the encoder's word-embedding table as ORT's `GatherBlockQuantized` (4 bits, blocks of
  32: onnxruntime 1.32's quantizer writes no 8-bit Gather), loaded as served. Speed and size only: this graph
  is not gated, and no build writes it.

Per variant: ms to import onnxruntime, to create the session, for the first and the second run (a 12-token,
one-question pass), and the process's peak RSS (VmHWM). With `--drop-caches` (root, Linux) the page cache is
dropped before each process, so the graph is read from disk. The run figures show what a variant only defers,
or slows.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

VARIANTS = ("served", "optimize-at-load", "no-prepack", "no-arena", "ort-format", "ort-bytes", "int4-embeddings")
WORD_EMBEDDINGS = ("/encoder/embeddings/word_embeddings/Gather", "/encoder/embeddings/tok_embeddings/Gather")
FIGURES = ("import_ms", "session_ms", "first_run_ms", "second_run_ms", "peak_rss_mb")

_CHILD = r"""
import json, sys, time
started = time.perf_counter()
import numpy as np
import onnxruntime as ort
imported = time.perf_counter()
variant, onnx_path, ort_path, int4_path, threads = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
options = ort.SessionOptions()
options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
source = onnx_path
if variant == "optimize-at-load":
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
elif variant == "int4-embeddings":
    source = int4_path
elif variant == "no-prepack":
    options.add_session_config_entry("session.disable_prepacking", "1")
elif variant == "no-arena":
    options.enable_cpu_mem_arena = False
elif variant in ("ort-format", "ort-bytes"):
    options.add_session_config_entry("session.load_model_format", "ORT")
    source = ort_path
    if variant == "ort-bytes":
        options.add_session_config_entry("session.use_ort_model_bytes_directly", "1")
        options.add_session_config_entry("session.use_ort_model_bytes_for_initializers", "1")
        source = open(ort_path, "rb").read()
loaded = time.perf_counter()
session = ort.InferenceSession(source, sess_options=options, providers=["CPUExecutionProvider"])
opened = time.perf_counter()
feeds = {"input_ids": np.arange(1, 13, dtype=np.int64)[None, :] % 100 + 5,
         "attention_mask": np.ones((1, 12), np.int64), "marker_pos": np.array([[1, 2]], np.int64),
         "marker_mask": np.ones((1, 2), bool), "qtype": np.zeros(1, np.int64)}
session.run(None, feeds)
ran = time.perf_counter()
session.run(None, feeds)
again = time.perf_counter()
# VmHWM, not ru_maxrss: Linux carries ru_maxrss over from the parent's fork into the exec'd child
peak_kb = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"import_ms": (imported - started) * 1000, "session_ms": (opened - loaded) * 1000,
                  "first_run_ms": (ran - opened) * 1000, "second_run_ms": (again - ran) * 1000,
                  "peak_rss_mb": peak_kb / 1024}))
"""


def save_ort_format(graph: Path, out: Path) -> None:
    """`graph` as is (no optimization), in ORT's flatbuffer format."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.optimized_model_filepath = str(out)
    options.add_session_config_entry("session.save_model_format", "ORT")
    ort.InferenceSession(str(graph), sess_options=options, providers=["CPUExecutionProvider"])


def embeddings_int4(graph: Path, out: Path) -> None:
    """`graph` with the encoder's word embeddings in 4-bit blocks (onnxruntime's MatMulNBitsQuantizer)."""
    import onnx
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    model = onnx.load(str(graph))
    gathers = [n.name for n in model.graph.node if n.op_type == "Gather"]
    quantizer = MatMulNBitsQuantizer(model, bits=4, block_size=32, is_symmetric=False, op_types_to_quantize=("Gather",),
                                     nodes_to_exclude=[n for n in gathers if n not in WORD_EMBEDDINGS])
    quantizer.process()
    quantizer.model.save_model_to_file(str(out), use_external_data_format=False)


def drop_page_cache() -> None:
    subprocess.run(["sync"], check=True)
    Path("/proc/sys/vm/drop_caches").write_text("3\n")


def measure(variant: str, graph: Path, ort_file: Path, int4: Path, threads: int, drop: bool) -> dict[str, Any]:
    if drop:
        drop_page_cache()
    run = subprocess.run([sys.executable, "-c", _CHILD, variant, str(graph), str(ort_file), str(int4), str(threads)],
                         capture_output=True, text=True)
    if run.returncode:  # a crash is a finding too (ort-bytes: SIGSEGV on onnxruntime 1.32.0's Python API)
        return {"failed": "exit %d" % run.returncode}
    return json.loads(run.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("graph", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--drop-caches", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        ort_file = Path(scratch) / "model.ort"
        int4 = Path(scratch) / "int4-embeddings.onnx"
        save_ort_format(args.graph, ort_file)
        embeddings_int4(args.graph, int4)
        sizes = {"onnx_mb": args.graph.stat().st_size / 2**20, "ort_mb": ort_file.stat().st_size / 2**20,
                 "int4_embeddings_mb": int4.stat().st_size / 2**20}
        print(json.dumps(sizes))
        results: dict[str, list[dict[str, Any]]] = {v: [] for v in VARIANTS}
        for round_ in range(args.rounds):
            order = VARIANTS[round_ % len(VARIANTS):] + VARIANTS[:round_ % len(VARIANTS)]
            for variant in order:
                results[variant].append(measure(variant, args.graph, ort_file, int4, args.threads, args.drop_caches))
    print("| variant | " + " | ".join(FIGURES) + " |")
    print("| --- |" + " ---: |" * len(FIGURES))
    for variant, runs in results.items():
        failed = [str(r["failed"]) for r in runs if "failed" in r]
        if failed:
            print("| `%s` | failed: %s |" % (variant, ", ".join(sorted(set(failed)))))
            continue
        medians = {f: statistics.median(r[f] for r in runs) for f in FIGURES}
        print(json.dumps({"variant": variant, **medians}), file=sys.stderr)
        print("| `%s` | " % variant + " | ".join("%.0f" % medians[f] for f in FIGURES) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
