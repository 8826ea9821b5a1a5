"""One build: checkpoint -> gate corpus recorded -> export -> (precision search) -> parity gate -> manifest.

The manifest, which makes an artifact loadable and publishable, is written only after the gate
passed on both splits of the corpus. A failed build keeps its report next to the files and raises
`GateFailed`.
"""

from __future__ import annotations

import json
import platform
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from laya_serverless.artifact.layout import DECODE_CONFIG_FILE, GRAPH_FILE, MANIFEST_FILE, DecodeConfig
from laya_serverless.artifact.manifest import SCHEMA, sha256_bytes, sha256_file
from laya_serverless.artifact.platform import cpu_profile
from laya_serverless.artifact.targets import CPU_FP32, CPU_TARGETS
from laya_serverless.errors import GateFailed

from .export import FUSION_RECORD, OPSET, export_checkpoint
from .gate_corpus import builtin_cases, read_gate_cases
from .goldens import GOLDENS_FILE, load_goldens, merge_goldens, record_goldens, weights_sha256
from .parity import TOLERANCES, GateReport, corpus_info, run_gate
from .quantize import OPTIMIZATION_LEVEL
from .regate import canonical_goldens, goldens_sidecar
from .search import (
    MIN_SPEEDUP,
    SEARCH_THREADS,
    SpeedTimer,
    check_candidate_names,
    precision_search,
    prepare_artifact,
    wall_clock,
)

TARGETS = CPU_TARGETS
REPORT_JSON, REPORT_TEXT = "parity_report.json", "parity_report.txt"


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
                   decode: DecodeConfig, fusion: dict[str, Any]) -> dict[str, Any]:
    from importlib.metadata import version

    return {
        "checkpoint": checkpoint,
        "target": target,
        "graph": {"format": "onnx", "opset": OPSET, "exporter": "torch.onnx.export (TorchScript)",
                  "torch": version("torch"), "onnx": version("onnx"),
                  "fusion": {"MultiHeadAttention": fusion["attention"], "attention_left_unfused":
                             fusion["unfused_attention"], "nan_guards": "none (finite mask bias, see fusion.py)",
                             "optimizer": fusion["optimizer"]},
                  "optimized_offline": {"onnxruntime": version("onnxruntime"), "level": OPTIMIZATION_LEVEL}},
        "precision": ({"weights": "int8" if recipe["method"].endswith("quantize_dynamic") else "8-bit weight-only",
                       "recipe": recipe} if recipe else {"weights": "fp32"}),
        "shape_policy": {"rows": "dynamic", "tokens": "dynamic", "options": "dynamic, at least 2 columns",
                         "max_len": decode.max_len, "head_max_len": decode.head_max_len},
        "build_cpu": cpu_profile(),
    }


def write_manifest(artifact_dir: Path, configuration: dict[str, Any], report: GateReport,
                   goldens_sha256: str) -> Path:
    """The manifest, last: the configuration, the full gate report (both splits, corpus, search), file hashes."""
    files = sorted(p for p in artifact_dir.iterdir() if p.is_file() and p.name != MANIFEST_FILE)
    manifest = {
        "schema": SCHEMA,
        "configuration": configuration,
        "parity": {**report.as_dict(), "goldens_sha256": goldens_sha256},
        "files": {p.name: {"sha256": sha256_file(p), "bytes": p.stat().st_size} for p in files},
        "tools": tool_versions(),
    }
    path = artifact_dir / MANIFEST_FILE
    path.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return path


def _goldens_for(checkpoint_dir: Path, name: str, revision: str | None, goldens_path: Path | None,
                 user_cases: list[dict[str, Any]], progress: Callable[[str], None]) -> dict[str, Any]:
    if goldens_path is None:
        cases = builtin_cases() + user_cases
        progress("1/4 recording the gate corpus with upstream laya (PyTorch CPU FP32): %d cases, %d rows%s"
                 % (len(cases), sum(len(c["questions"]) for c in cases),
                    ", %d of them yours" % len(user_cases) if user_cases else ""))
        return record_goldens(Path(checkpoint_dir), name, revision, cases=cases, progress=progress)
    progress("1/4 reading goldens from %s" % goldens_path)
    goldens = load_goldens(Path(goldens_path))
    if goldens.get("checkpoint", {}).get("weights_sha256") != weights_sha256(Path(checkpoint_dir)):
        progress("    note: the goldens were recorded from other weights than %s" % checkpoint_dir)
    if user_cases:
        progress("    recording your %d gate cases with upstream laya" % len(user_cases))
        goldens = merge_goldens(goldens, record_goldens(Path(checkpoint_dir), name, revision, cases=user_cases))
    return goldens


def _fail_report(target: str, goldens: dict[str, Any], search: dict[str, Any], note: str) -> GateReport:
    return GateReport(target=target, tolerance=TOLERANCES[target], corpus=corpus_info(goldens), search=search,
                      notes=[note])


def build_artifact(checkpoint_dir: Path, target: str, out_dir: Path, *, name: str | None = None,
                   revision: str | None = None, goldens_path: Path | None = None,
                   gate_cases: Sequence[str | Path] = (), candidates: Sequence[str] | None = None,
                   exhaustive_search: bool = False, min_speedup: float | None = MIN_SPEEDUP,
                   progress: Callable[[str], None] = lambda _m: None,
                   timer: SpeedTimer = wall_clock) -> tuple[Path, GateReport]:
    """Build, gate and describe one (checkpoint, target) configuration in `out_dir`.

    The gate corpus is the built-in one plus `gate_cases` (users' JSONL files, refused line by line
    before anything is exported), recorded with upstream now unless `goldens_path` holds it already.
    cpu-fp32 is gated on both splits. cpu-int8 runs the precision search (`search.py`) on the
    selection split, restricted to `candidates` if given (`min_speedup`: how much faster than FP32
    a candidate must be; 0 lifts it; `timer`: how candidates are timed), then checks the chosen configuration once
    on both splits; when nothing passes, or confirmation fails, `GateFailed` is raised (its report
    carries the search) and the caller may build cpu-fp32 instead.
    """
    if target not in TARGETS:
        raise ValueError("unknown target %r; choose one of %s" % (target, ", ".join(TARGETS)))
    check_candidate_names(candidates)
    user_cases = [case for path in gate_cases for case in read_gate_cases(path)]  # refused before any work
    out_dir = Path(out_dir)
    if out_dir.exists() and any(out_dir.iterdir()):
        raise FileExistsError("%s is not empty; builds never overwrite an artifact" % out_dir)
    name = name or Path(checkpoint_dir).name
    goldens = _goldens_for(Path(checkpoint_dir), name, revision, goldens_path, user_cases, progress)
    out_dir.mkdir(parents=True, exist_ok=True)
    recipe: dict[str, Any] | None = None
    tolerance = TOLERANCES[target]
    with tempfile.TemporaryDirectory(prefix="laya-build-") as scratch:
        raw = Path(scratch) / "export"
        progress("2/4 exporting %s to an FP32 ONNX graph" % checkpoint_dir)
        export_checkpoint(checkpoint_dir, raw)
        fusion = json.loads((raw / FUSION_RECORD).read_text())
        progress("    fused %d attention(s) into MultiHeadAttention" % fusion["attention"])
        if target == CPU_FP32:
            progress("3/4 optimizing offline (%s), gating both splits at tolerance %g" % (OPTIMIZATION_LEVEL,
                                                                                          tolerance))
            prepare_artifact(raw / GRAPH_FILE, raw, out_dir)
            report = run_gate(out_dir, goldens, target, threads=SEARCH_THREADS)
        else:
            progress("3/4 precision search on the selection split at tolerance %g" % tolerance)
            result = precision_search(raw / GRAPH_FILE, raw, Path(scratch), goldens, target, candidates=candidates,
                                      exhaustive=exhaustive_search, min_speedup=min_speedup, progress=progress,
                                      timer=timer)
            if result.chosen is None:
                report = _fail_report(target, goldens, result.record, "nothing to confirm: %s; build cpu-fp32"
                                      % result.record["why"])
            else:
                chosen = result.chosen
                for path in chosen.directory.iterdir():
                    shutil.copy(path, out_dir / path.name)
                recipe = chosen.recipe
                progress("    confirming %s once on both splits (confirmation unseen until now)"
                         % chosen.candidate.name)
                report = run_gate(out_dir, goldens, target, threads=SEARCH_THREADS)
                report.search = result.record
                if not report.passed:
                    report.notes.append(
                        "%s passed selection but not this check; the int8 target fails rather than trying the "
                        "next-fastest candidate on confirmation (that would make confirmation a second selection "
                        "set); build cpu-fp32" % chosen.candidate.name)
    decode = DecodeConfig.load(out_dir) if (out_dir / DECODE_CONFIG_FILE).is_file() else None
    (out_dir / REPORT_JSON).write_text(json.dumps(report.as_dict(), indent=2) + "\n", encoding="utf-8")
    (out_dir / REPORT_TEXT).write_text(report.table() + "\n", encoding="utf-8")
    progress(report.table())
    if not report.passed or decode is None:
        reason = report.notes[-1] if report.notes else "see the report"
        raise GateFailed("the parity gate failed for %s (%s); report: %s" % (out_dir, reason, out_dir / REPORT_TEXT),
                         report)
    progress("4/4 writing the manifest")
    checkpoint = {"name": name, "source": str(checkpoint_dir), "revision": revision,
                  "weights_sha256": weights_sha256(Path(checkpoint_dir))}
    corpus = canonical_goldens(goldens)
    write_manifest(out_dir, _configuration(checkpoint, target, recipe, decode, fusion), report, sha256_bytes(corpus))
    # Beside the directory, not in it (the manifest lists only what serves): publish uploads it, and the
    # deploy-time gate replays it on the serving CPU (regate.py).
    goldens_sidecar(out_dir).write_bytes(corpus)
    return out_dir, report


__all__ = ["GOLDENS_FILE", "GateFailed", "TARGETS", "build_artifact", "cpu_profile"]
