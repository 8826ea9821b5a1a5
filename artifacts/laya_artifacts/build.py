"""One build: checkpoint -> export -> (quantize) -> offline optimization -> parity gate -> manifest.

The manifest, which makes an artifact loadable and publishable, is written only after the gate
passed. A failed build keeps its report next to the files and raises `GateFailed`.
"""

from __future__ import annotations

import json
import platform
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from laya_serverless.artifact.layout import GRAPH_FILE, MANIFEST_FILE, TOKENIZER_FILE, DecodeConfig, copy_decode_config
from laya_serverless.artifact.manifest import SCHEMA, sha256_bytes, sha256_file
from laya_serverless.errors import GateFailed

from .export import OPSET, export_checkpoint
from .goldens import GOLDENS_FILE, record_goldens, weights_sha256
from .parity import TOLERANCES, GateReport, run_gate
from .quantize import INT8_LADDER, OPTIMIZATION_LEVEL, optimize_offline, quantize_int8

TARGETS = ("cpu-int8", "cpu-fp32")
REPORT_JSON, REPORT_TEXT = "parity_report.json", "parity_report.txt"
_ISA_FLAGS = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx_vnni", "avx512_bf16",
              "amx_int8", "amx_bf16")


def cpu_profile() -> dict[str, Any]:
    """The build machine's CPU family and ISA: int8 results differ between CPUs with and without VNNI."""
    flags: set[str] = set()
    model = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags") and not flags:
                flags = set(line.split(":", 1)[1].split())
            elif line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
    except OSError:
        pass
    return {"machine": platform.machine(), "model": model, "isa": [f for f in _ISA_FLAGS if f in flags]}


def tool_versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    names = ("laya-serverless", "laya", "torch", "transformers", "onnx", "onnxruntime", "onnxruntime-gpu",
             "tokenizers", "numpy")
    found = {"python": platform.python_version()}
    for name in names:  # a GPU build has onnxruntime-gpu instead of onnxruntime
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            pass
    return found


def _configuration(checkpoint: dict[str, Any], target: str, recipe: dict[str, Any] | None,
                   decode: DecodeConfig) -> dict[str, Any]:
    from importlib.metadata import version

    return {
        "checkpoint": checkpoint,
        "target": target,
        "graph": {"format": "onnx", "opset": OPSET, "exporter": "torch.onnx.export (TorchScript)",
                  "torch": version("torch"), "onnx": version("onnx"),
                  "optimized_offline": {"onnxruntime": version("onnxruntime"), "level": OPTIMIZATION_LEVEL}},
        "precision": {"weights": "int8", "recipe": recipe} if recipe else {"weights": "fp32"},
        "shape_policy": {"rows": "dynamic", "tokens": "dynamic", "options": "dynamic, at least 2 columns",
                         "max_len": decode.max_len, "head_max_len": decode.head_max_len},
        "build_cpu": cpu_profile(),
    }


def write_manifest(artifact_dir: Path, configuration: dict[str, Any], report: GateReport,
                   goldens_sha256: str) -> Path:
    files = sorted(p for p in artifact_dir.iterdir() if p.is_file() and p.name != MANIFEST_FILE)
    manifest = {
        "schema": SCHEMA,
        "configuration": configuration,
        "parity": {**{k: v for k, v in report.as_dict().items() if k not in ("near_tie_flips", "hard_mismatches")},
                   "near_tie_flips": len(report.near_tie_flips), "hard_mismatches": len(report.hard_mismatches),
                   "goldens_sha256": goldens_sha256, "reference": "upstream laya on PyTorch CPU FP32"},
        "files": {p.name: {"sha256": sha256_file(p), "bytes": p.stat().st_size} for p in files},
        "tools": tool_versions(),
    }
    path = artifact_dir / MANIFEST_FILE
    path.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return path


def _gate_candidate(graph: Path, raw: Path, out_dir: Path, target: str, goldens: dict[str, Any]) -> GateReport:
    """Optimize `graph` into `out_dir` beside the tokenizer and decode config, then gate it."""
    optimize_offline(graph, out_dir / GRAPH_FILE)
    shutil.copy(raw / TOKENIZER_FILE, out_dir / TOKENIZER_FILE)
    copy_decode_config(raw, out_dir, optimized_offline=True)
    return run_gate(out_dir, goldens, target)


def build_artifact(checkpoint_dir: Path, target: str, out_dir: Path, *, name: str | None = None,
                   revision: str | None = None, goldens_path: Path | None = None,
                   progress: Callable[[str], None] = lambda _m: None) -> tuple[Path, GateReport]:
    """Build, gate and describe one (checkpoint, target) configuration in `out_dir`."""
    if target not in TARGETS:
        raise ValueError("unknown target %r; choose one of %s" % (target, ", ".join(TARGETS)))
    out_dir = Path(out_dir)
    if out_dir.exists() and any(out_dir.iterdir()):
        raise FileExistsError("%s is not empty; builds never overwrite an artifact" % out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    name = name or Path(checkpoint_dir).name
    if goldens_path is None:
        progress("1/4 recording goldens with upstream laya (PyTorch CPU FP32)")
        goldens = record_goldens(Path(checkpoint_dir), name, revision)
    else:
        progress("1/4 reading goldens from %s" % goldens_path)
        goldens = json.loads(Path(goldens_path).read_text(encoding="utf-8"))
    attempts: list[dict[str, Any]] = []
    recipe: dict[str, Any] | None = None
    with tempfile.TemporaryDirectory(prefix="laya-build-") as scratch:
        raw = Path(scratch) / "export"
        progress("2/4 exporting %s to an FP32 ONNX graph" % checkpoint_dir)
        export_checkpoint(checkpoint_dir, raw)
        if target == "cpu-fp32":
            progress("3/4 optimizing offline (%s), gating at tolerance %g" % (OPTIMIZATION_LEVEL, TOLERANCES[target]))
            report = _gate_candidate(raw / GRAPH_FILE, raw, out_dir, target, goldens)
        else:
            for rung in INT8_LADDER:
                progress("3/4 int8 recipe %r: quantizing, optimizing offline, gating at tolerance %g"
                         % (rung.name, TOLERANCES[target]))
                graph = Path(scratch) / ("int8-%s.onnx" % rung.name)
                recipe = quantize_int8(raw / GRAPH_FILE, graph, rung)
                report = _gate_candidate(graph, raw, out_dir, target, goldens)
                attempts.append({"recipe": rung.name, "passed": report.passed,
                                 "max_probability_error": report.max_probability_error,
                                 "max_action_error": report.max_action_error,
                                 "hard_mismatches": len(report.hard_mismatches)})
                progress("    max |dp| %.4f, max |d act| %.4f: %s" % (
                    report.max_probability_error, report.max_action_error, "passed" if report.passed else "failed"))
                if report.passed:
                    break
    decode = DecodeConfig.load(out_dir)
    (out_dir / REPORT_JSON).write_text(json.dumps(dict(report.as_dict(), recipe_attempts=attempts), indent=2) + "\n",
                                       encoding="utf-8")
    (out_dir / REPORT_TEXT).write_text(report.table() + "\n", encoding="utf-8")
    progress(report.table())
    if not report.passed:
        raise GateFailed("the parity gate failed for %s; report: %s" % (out_dir, out_dir / REPORT_TEXT), report)
    progress("4/4 writing the manifest")
    checkpoint = {"name": name, "source": str(checkpoint_dir), "revision": revision,
                  "weights_sha256": weights_sha256(Path(checkpoint_dir))}
    goldens_sha256 = sha256_bytes(json.dumps(goldens, sort_keys=True, ensure_ascii=False).encode())
    write_manifest(out_dir, _configuration(checkpoint, target, recipe, decode), report, goldens_sha256)
    return out_dir, report


__all__ = ["GOLDENS_FILE", "GateFailed", "TARGETS", "build_artifact", "cpu_profile"]
