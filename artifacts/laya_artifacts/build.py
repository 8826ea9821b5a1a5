"""One build recipe for every target, the device a parameter of it.

    guards -> gate corpus recorded -> FP32 export -> the device's stage and gate -> report -> manifest

Shared by every target: the guards (a known target, the device present, users' gate cases and the
output directory checked before any work), the gate corpus, the export, the report and the
manifest. Only the middle is the device's: on the CPU, offline optimization (cpu-fp32) or the
precision search (cpu-int8) and the gate; on CUDA, the graph as exported or converted to FP16
(`export/cuda.py`), gated on the GPU and again on the CPU provider (the out-of-memory retry). The manifest,
which makes an artifact loadable and publishable, is written only after the gate passed on both
splits of the corpus. A failed build keeps its report next to the files and raises `GateFailed`.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any

from laya_artifacts.checkpoints.sources import weights_sha256
from laya_artifacts.errors import GateFailed, OutputExists
from laya_artifacts.export.compact import compact_artifact
from laya_artifacts.export.cuda import convert_fp16
from laya_artifacts.export.onnx_export import FUSION_RECORD, OPSET, export_checkpoint
from laya_artifacts.goldens.corpus import read_gate_cases
from laya_artifacts.goldens.record import GOLDENS_FILE, goldens_for_build
from laya_artifacts.goldens.reference_spread import gate_with_derived_tolerance
from laya_artifacts.package.runtime_lock import runtime_record
from laya_artifacts.qat.build_plan import prepare_build, trade_off
from laya_artifacts.search.decision import decide, kept_refusal, search_key
from laya_artifacts.search.int8_classes import int8_classes
from laya_artifacts.search.precision import SEARCH_THREADS, prepare_artifact
from laya_artifacts.search.quantize import OPTIMIZATION_LEVEL
from laya_artifacts.spec import DEFAULT_SEAMS, BuildSeams, BuildSpec
from laya_serverless.artifact import targets
from laya_serverless.artifact.gpu import gpu_profile
from laya_serverless.artifact.layout import (
    DECODE_CONFIG_FILE,
    GRAPH_FILE,
    MANIFEST_FILE,
    TOKENIZER_FILE,
    DecodeConfig,
    copy_decode_config,
)
from laya_serverless.artifact.manifest import SCHEMA, sha256_bytes, sha256_file
from laya_serverless.artifact.platform import cpu_profile
from laya_serverless.core.providers import (
    CPU,
    CPU_PROVIDER,
    CUDA,
    CUDA_OPTIONS,
    device_of_target,
    require_device,
)
from laya_serverless.gate.regate import canonical_goldens, goldens_sidecar
from laya_serverless.gate.replay import TOLERANCES, GateReport, corpus_info, run_gate

TARGETS = targets.TARGETS
# The FP32 gate times nothing, so it runs on every core this process may use: at the published sizes it is most of
# a build (the int8 search and its confirmation keep `SEARCH_THREADS`, the thread count its timings were made on).
FP32_GATE_THREADS = len(os.sched_getaffinity(0))
REPORT_JSON, REPORT_TEXT = "parity_report.json", "parity_report.txt"


@dataclass
class Staged:
    """What a device's stage leaves for the shared tail: the gate's verdict and what the manifest says of it."""

    report: GateReport
    precision: dict[str, Any]
    optimized_offline: dict[str, Any] | None = None
    retry: GateReport | None = None  # cuda: the same graph gated on the CPU provider
    device_configuration: dict[str, Any] = field(default_factory=dict)  # the device's own block (`cuda`)


def tool_versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError

    names = ("laya-serverless", "laya", "torch", "transformers", "onnx", "onnxruntime", "onnxruntime-gpu",
             "tokenizers", "numpy")
    found = {"python": platform.python_version()}
    for name in names:  # a GPU build has onnxruntime-gpu instead of onnxruntime
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            pass
    return found


def _configuration(checkpoint: dict[str, Any], target: str, staged: Staged, decode: DecodeConfig,
                   fusion: dict[str, Any]) -> dict[str, Any]:
    return {
        "checkpoint": checkpoint,
        "target": target,
        "graph": {"format": "onnx", "opset": OPSET, "exporter": "torch.onnx.export (TorchScript)",
                  "torch": version("torch"), "onnx": version("onnx"),
                  "fusion": {"MultiHeadAttention": fusion["attention"], "attention_left_unfused":
                             fusion["unfused_attention"], "nan_guards": "none (finite mask bias, see export/fusion.py)",
                             "optimizer": fusion["optimizer"]},
                  "optimized_offline": staged.optimized_offline},
        "precision": staged.precision,
        "shape_policy": {"rows": "dynamic", "tokens": "dynamic", "options": "dynamic, at least 2 columns",
                         "max_len": decode.max_len, "head_max_len": decode.head_max_len},
        "build_cpu": cpu_profile(),
        **staged.device_configuration,
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
        "runtime": runtime_record(),  # the hash lock of the Lambda layer built from this checkout
    }
    path = artifact_dir / MANIFEST_FILE
    path.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return path


def _write_report(out_dir: Path, staged: Staged, progress: Callable[[str], None]) -> None:
    """The gate's report beside the files, passed or not; a cuda build's holds its CPU retry too."""
    report, retry = staged.report, staged.retry
    figures, table = report.as_dict(), report.table()
    if retry is not None:
        figures["cpu_retry"] = retry.as_dict()
        table += "\n\ncpu retry (same graph on %s):\n%s" % (CPU_PROVIDER, retry.table())
    (out_dir / REPORT_JSON).write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    (out_dir / REPORT_TEXT).write_text(table + "\n", encoding="utf-8")
    progress(report.table())
    if retry is not None:
        progress("cpu retry: %s" % ("gated, allowed" if retry.passed else "failed its gate: out-of-memory is a 503"))


def _optimized_offline() -> dict[str, Any]:
    return {"onnxruntime": version("onnxruntime"), "level": OPTIMIZATION_LEVEL}


def _recorded_refusal(goldens: dict[str, Any], spec: BuildSpec, key: dict[str, Any] | None,
                      progress: Callable[[str], None]) -> Staged | None:
    """The failed int8 stage a kept decision stands for, when a record says no candidate passes this search."""
    target = spec.target
    found = None if key is None else kept_refusal(key, spec.search_records, spec.research, TOLERANCES[target])
    if found is None:
        return None
    record, path = found
    why = "%s (search record %s, recorded %s; --research searches again)" % (
        record.get("why") or "no candidate passed selection", path.name, record.get("recorded"))
    progress("3/4 not searching: %s" % why)
    search = {"mode": "reused", "reused_record": path.name, "chosen": None, "why": why}
    return Staged(GateReport(target=target, tolerance=TOLERANCES[target], corpus=corpus_info(goldens), search=search,
                             notes=["nothing to confirm: %s; build cpu-fp32" % why]), {})


def _stage_cpu(raw: Path, scratch: Path, out_dir: Path, goldens: dict[str, Any], spec: BuildSpec,
               key: dict[str, Any] | None, candidates: Sequence[str] | None, seams: BuildSeams,
               checkpoint_dir: Path) -> Staged:
    """cpu-fp32: the export optimized offline and gated. cpu-int8: the precision search, then its choice gated."""
    target, progress = spec.target, seams.progress
    tolerance = TOLERANCES[target]
    if target == targets.CPU_FP32 or key is None:
        progress("3/4 optimizing offline (%s), gating both splits at tolerance %g" % (OPTIMIZATION_LEVEL, tolerance))
        prepare_artifact(raw / GRAPH_FILE, raw, out_dir)
        storage = compact_artifact(out_dir)  # FP16 where exact, restored at load: the same answers, fewer bytes
        progress("    %d large tensors stored in FP16 (exact), %d kept FP32" % (storage["fp16"], storage["kept_fp32"]))
        gated = gate_with_derived_tolerance(run_gate(out_dir, goldens, target, threads=FP32_GATE_THREADS,
                                                     progress=progress),
                                            checkpoint_dir, out_dir, goldens, target, FP32_GATE_THREADS, progress)
        return Staged(gated, {"weights": "fp32", "storage": storage}, _optimized_offline())
    progress("3/4 precision search on the selection split at tolerance %g" % tolerance)
    result = decide(raw, scratch, goldens, target, key, candidates, exhaustive=spec.exhaustive_search,
                    min_speedup=spec.min_speedup, records=spec.search_records, research=spec.research,
                    progress=progress, timer=seams.timer)
    if result.chosen is None:
        return Staged(GateReport(target=target, tolerance=tolerance, corpus=corpus_info(goldens), search=result.record,
                                 notes=["nothing to confirm: %s; build cpu-fp32" % result.record["why"]]), {})
    chosen = result.chosen
    for path in chosen.directory.iterdir():
        shutil.copy(path, out_dir / path.name)
    progress("    confirming %s once on both splits (confirmation unseen until now)" % chosen.candidate.name)
    report = run_gate(out_dir, goldens, target, threads=SEARCH_THREADS, progress=progress)
    report.search = result.record
    if not report.passed:
        report.notes.append("%s passed selection but not this check; the int8 target fails rather than trying the "
                            "next-fastest candidate on confirmation (that would make confirmation a second selection "
                            "set); build cpu-fp32" % chosen.candidate.name)
    weights = chosen.recipe["weights_label"]
    classes = int8_classes(out_dir, goldens, progress) if report.passed and spec.emulate_classes else {}
    return Staged(report, {"weights": weights, "recipe": chosen.recipe}, _optimized_offline(),
                  device_configuration={"int8_classes": classes} if classes else {})


def _stage_cuda(raw: Path, out_dir: Path, goldens: dict[str, Any], target: str,
                progress: Callable[[str], None]) -> Staged:
    """The export (converted when FP16) laid out unoptimized, gated on the GPU, then on the CPU provider."""
    recipe = None
    if target == targets.CUDA_FP16:
        progress("3/4 converting to FP16 (softmax, normalization, rotary tables and the head kept FP32)")
        recipe = convert_fp16(raw / GRAPH_FILE, out_dir / GRAPH_FILE)
    else:
        progress("3/4 keeping the FP32 graph (TF32 off at run time)")
        shutil.copy(raw / GRAPH_FILE, out_dir / GRAPH_FILE)
    shutil.copy(raw / TOKENIZER_FILE, out_dir / TOKENIZER_FILE)
    # Not optimized offline: ORT's saved optimizations are specific to the provider they ran for.
    copy_decode_config(raw, out_dir, optimized_offline=False)
    progress("    gating on %s at tolerance %g, then the CPU retry of the same graph" % (CUDA, TOLERANCES[target]))
    report, retry = run_gate(out_dir, goldens, target), run_gate(out_dir, goldens, target, device=CPU)
    cuda = {"build_gpu": gpu_profile(), "provider_options": dict(CUDA_OPTIONS),
            "cpu_retry": {"provider": CPU_PROVIDER, "passed": retry.passed,
                          "max_probability_error": retry.max_probability_error,
                          "max_action_error": retry.max_action_error, "hard_mismatches": len(retry.hard_mismatches)}}
    precision = {"weights": "fp16", "recipe": recipe} if recipe else {"weights": "fp32", "tf32": False}
    return Staged(report, precision, None, retry, {"cuda": cuda})


def _note_fine_tune(staged: Staged, tuned: dict[str, Any] | None) -> None:
    """A quantization-aware build's trade-off beside the gate's figures, and its fine-tune in the manifest."""
    if tuned is not None:
        staged.report.notes.insert(0, trade_off(tuned))
        staged.device_configuration["quantization_aware"] = tuned


def refusal(out_dir: Path, report: GateReport) -> str:
    """Why nothing was built, in the search's words: "gate failed" or "gate passed (...), but not faster"."""
    reason = report.notes[-1] if report.notes else "see the report"
    if report.search is not None and report.search.get("chosen") is None:
        return "no %s artifact for %s: %s" % (report.target, out_dir, reason.removeprefix("nothing to confirm: "))
    return "the parity gate failed for %s (%s)" % (out_dir, reason)


def _guards(spec: BuildSpec, out_dir: Path, seams: BuildSeams) -> list[dict[str, Any]]:
    """Everything refused before any work (the spec checked its target and candidates): the device, users' rows,
    the output."""
    require_device(device_of_target(spec.target), seams.placement)  # a cuda gate runs only on a GPU
    user_cases = [case for path in spec.gate_cases for case in read_gate_cases(path)]
    if out_dir.exists() and any(out_dir.iterdir()):
        raise OutputExists("%s is not empty; builds never overwrite an artifact" % out_dir)
    return user_cases


def _staged(checkpoint_dir: Path, spec: BuildSpec, out_dir: Path, goldens: dict[str, Any],
            key: dict[str, Any] | None, candidates: Sequence[str] | None,
            seams: BuildSeams) -> tuple[Staged, dict[str, Any]]:
    """The FP32 export in a scratch directory, then the device's stage: (its verdict, the fusion record)."""
    progress = seams.progress
    with tempfile.TemporaryDirectory(prefix="laya-build-") as scratch:
        raw = Path(scratch) / "export"
        progress("2/4 exporting %s to an FP32 ONNX graph" % checkpoint_dir)
        export_checkpoint(checkpoint_dir, raw)
        fusion = json.loads((raw / FUSION_RECORD).read_text())
        progress("    fused %d attention(s) into MultiHeadAttention" % fusion["attention"])
        if device_of_target(spec.target) == CUDA:
            return _stage_cuda(raw, out_dir, goldens, spec.target, progress), fusion
        return _stage_cpu(raw, Path(scratch), out_dir, goldens, spec, key, candidates, seams, checkpoint_dir), fusion


def build_artifact(checkpoint_dir: Path, spec: BuildSpec, out_dir: Path, *,
                   seams: BuildSeams = DEFAULT_SEAMS) -> tuple[Path, GateReport]:
    """Build, gate and describe one (checkpoint, `spec.target`) configuration in `out_dir`, for any target.

    The gate corpus is the built-in one plus `spec.gate_cases` (users' JSONL files, refused line by line
    before anything is exported), recorded with upstream now unless `spec.goldens` holds it already.
    A cuda target is refused at once where `seams.placement` (this onnxruntime) offers no CUDA, and gated on
    the GPU. cpu-fp32 is gated on both splits. cpu-int8 runs the precision search (`search/precision.py`) on
    the selection split, restricted to `spec.candidates` if given (`min_speedup`: how much faster than FP32
    a candidate must be; 0 lifts it; `seams.timer`: how candidates are timed; other targets ignore these), then
    checks the chosen configuration once on both splits; when nothing passes, or confirmation fails,
    `GateFailed` is raised (its report carries the search) and the caller may build cpu-fp32 instead. A
    passing int8 artifact is then checked as an AVX2 CPU under emulation (`emulate_classes`, where qemu is
    installed; the CLI, `make serve` and `laya-artifacts deploy` turn it on), and the classes it holds on are
    recorded in the manifest. With `search_records` (a directory) the search's decision is kept there and
    reused by a later build of the same search (`search/records.py`; the package's shipped records are read
    too); `research` searches again. `quantization_aware` (cpu-int8) fine-tunes a copy under the int8 scheme
    and builds it (`qat/build_plan.py`): the gate's reference stays the original's goldens, and the manifest
    records the fine-tune. The manifest records the spec (`BuildSpec.record`).
    """
    out_dir, progress, target = Path(out_dir), seams.progress, spec.target
    user_cases = _guards(spec, out_dir, seams)
    name = spec.name or Path(checkpoint_dir).name
    goldens = goldens_for_build(Path(checkpoint_dir), name, spec.revision, spec.goldens, user_cases, progress)
    checkpoint_dir, candidates, tuned = prepare_build(Path(checkpoint_dir), goldens, target, spec.candidates,
                                                      spec.quantization_aware, out_dir, progress)
    out_dir.mkdir(parents=True, exist_ok=True)
    weights = weights_sha256(checkpoint_dir)   # the checkpoint built, a quantization-aware copy's where tuned
    # The search's identity, once per build: both the kept refusal and the search itself look it up.
    key = None if target != targets.CPU_INT8 else search_key(checkpoint_dir, goldens, candidates, spec.min_speedup)
    refused = _recorded_refusal(goldens, spec, key, progress)
    if refused is not None:   # a kept decision that nothing passes: no export, no candidate, straight to the caller
        _write_report(out_dir, refused, progress)
        raise GateFailed(refusal(out_dir, refused.report), refused.report)
    staged, fusion = _staged(checkpoint_dir, spec, out_dir, goldens, key, candidates, seams)
    _note_fine_tune(staged, tuned)
    _write_report(out_dir, staged, progress)
    report = staged.report
    decode = DecodeConfig.load(out_dir) if (out_dir / DECODE_CONFIG_FILE).is_file() else None
    if not report.passed or decode is None:
        raise GateFailed("%s; report: %s" % (refusal(out_dir, report), out_dir / REPORT_TEXT), report)
    progress("4/4 writing the manifest")
    checkpoint = {"name": name, "source": str(checkpoint_dir), "revision": spec.revision,
                  "weights_sha256": weights,
                  # a quantization-aware copy's: the weights served are the copy's, the gate's reference its original's
                  **({"reference_weights_sha256": tuned["reference_weights_sha256"]} if tuned else {})}
    corpus = canonical_goldens(goldens)
    configuration = {**_configuration(checkpoint, target, staged, decode, fusion), "build_spec": spec.record()}
    write_manifest(out_dir, configuration, report, sha256_bytes(corpus))
    # Beside the directory, not in it (the manifest lists only what serves): publish uploads it, and the
    # deploy-time gate replays it on the serving CPU (regate.py).
    goldens_sidecar(out_dir).write_bytes(corpus)
    return out_dir, report


__all__ = ["GOLDENS_FILE", "BuildSeams", "BuildSpec", "GateFailed", "TARGETS", "build_artifact", "cpu_profile"]
