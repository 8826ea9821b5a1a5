"""Where an artifact was proven, and whether that proof holds on the CPU serving it.

ONNX Runtime picks its int8 kernels by instruction set (AMX, AVX-512 VNNI, AVX-VNNI, AVX-512,
AVX2 on x86; dot-product and i8mm on Arm), and their results differ at the level the parity gate
measures: the tiny test ModernBERT's int8 recipes, which pass their gate on an AVX-512 VNNI
machine, move probabilities by up to 0.20 on an AVX2 machine without VNNI (2026-12-01). FP32
kernels agree inside the FP32 tolerance across these CPUs. So an int8 artifact serves only on
the kernel class its gate ran on, or on one where it was re-gated (`laya-artifacts import`, which
records the result beside the manifest under `gates/`).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from .cpu import ARM_MACHINES, cpu_profile
from .manifest import Manifest
from .store import ObjectStore
from .targets import CLASS_EQUIVALENCE_TOLERANCE, GATE_TOLERANCES
from .tolerance import report_tolerance

_log = logging.getLogger("laya_serverless")

# Most capable first: the first class whose flags a CPU has is the one ONNX Runtime's int8 kernels use.
_X86_CLASSES = (("amx-int8", "amx_int8"), ("avx512-vnni", "avx512_vnni"), ("avx-vnni", "avx_vnni"),
                ("avx512", "avx512bw"), ("avx2", "avx2"))
# Arm: i8mm (SMMLA, Graviton3 and later), dot product (SDOT/UDOT, Graviton2), or neither (plain NEON).
_ARM_CLASSES = (("arm64-i8mm", "i8mm"), ("arm64-dotprod", "asimddp"))
ARM64_NONE = "arm64-none"
ARM64_CLASSES = (*(name for name, _ in _ARM_CLASSES), ARM64_NONE)


def int8_kernels(profile: dict[str, Any]) -> str:
    """The int8 kernel class of a CPU profile (see `cpu_profile`)."""
    isa = set(profile.get("isa") or ())
    machine = str(profile.get("machine", "")).lower()
    if machine in ARM_MACHINES:
        return next((name for name, flag in _ARM_CLASSES if flag in isa), ARM64_NONE)
    return next((name for name, flag in _X86_CLASSES if flag in isa), "%s-baseline" % (machine or "unknown"))


def is_int8(manifest: Manifest) -> bool:
    precision = manifest.raw["configuration"].get("precision") or {}
    return str(precision.get("weights", "")).startswith("int8") or "int8" in manifest.target


def gate_record_key(artifact_id: str, kernels: str) -> str:
    return "gates/%s/%s.json" % (artifact_id, kernels)


def gate_record(artifact_id: str, profile: dict[str, Any], report: dict[str, Any],
                kernels: str | None = None) -> bytes:
    """What a passing re-gate writes beside the artifact (create-only): on another CPU (`kernels` its int8
    class, the default) or on another GPU (`kernels` its `artifact.gpu.gpu_key`, `profile` its `gpu_profile`)."""
    kernels = kernels or int8_kernels(profile)
    return json.dumps({"artifact": artifact_id, "profile": profile, "kernels": kernels, "report": report},
                      sort_keys=True).encode()


def record_refusal(raw: bytes, artifact_id: str, kernels: str, target: str) -> str | None:
    """Why a gate record does not prove `artifact_id` on `kernels` (None when it does): it must parse, name
    this artifact and kernel class, say passed, and carry figures within the gate's own tolerance."""
    try:
        record = json.loads(raw)
    except ValueError:
        return "it is not JSON"
    if not isinstance(record, dict):
        return "it is not a JSON object"
    report = record.get("report")
    if record.get("artifact") != artifact_id:
        return "it names artifact %r, not this one" % str(record.get("artifact"))[:80]
    recorded = record.get("kernels", record.get("int8_kernels"))  # "int8_kernels": records before GPU ones
    if recorded != kernels:
        return "it was gated on %r kernels, not %r" % (str(recorded)[:40], kernels)
    if not isinstance(report, dict) or report.get("passed") is not True:
        return "its report does not say passed"
    if report.get("target") != target:
        return "its report is for target %r, not %r" % (str(report.get("target"))[:40], target)
    tolerance, why = report_tolerance(report, target)  # the target's, or a recorded and consistent derived one
    figures = [report.get("max_probability_error"), report.get("max_action_error")]
    if not isinstance(report.get("rows"), int) or report["rows"] < 1:
        return "its report gated no rows"
    if why is not None:
        return why
    if tolerance is None or not all(isinstance(f, int | float) and 0 <= f <= tolerance for f in figures):
        return "its figures %s are not within the gate's tolerance %s" % (figures, tolerance)
    return None


NO_RECORD = "no gate record"


def proven_by_record(store: ObjectStore, artifact_id: str, kernels: str, target: str) -> str | None:
    """None when a valid gate record proves the artifact on `kernels`; else why not (absent, or refused)."""
    key = gate_record_key(artifact_id, kernels)
    found = store.read(key)
    if found is None:
        return NO_RECORD
    why = record_refusal(found[0], artifact_id, kernels, target)
    if why is not None:
        _log.warning("ignoring the gate record %s: %s", key, why)
        return "its gate record was ignored: %s" % why
    return None


def _within(value: Any, limit: float) -> bool:
    return isinstance(value, int | float) and 0 <= value <= limit


def proven_for_class(manifest: Manifest, kernels: str) -> bool:
    """Whether the build proved its gate on the `kernels` class too (`configuration.int8_classes`, run under
    emulation): that class answered as the build's (equivalence), or passed the whole gate itself."""
    classes = manifest.raw["configuration"].get("int8_classes")
    check = classes.get(kernels) if isinstance(classes, dict) else None
    if not isinstance(check, dict) or not isinstance(check.get("rows"), int) or check["rows"] < 1:
        return False
    if check.get("proof") == "equivalence":
        return check.get("equivalent") is True and _within(check.get("max_probability_difference"),
                                                            CLASS_EQUIVALENCE_TOLERANCE)
    if check.get("proof") == "emulated-gate":
        tolerance = GATE_TOLERANCES.get(manifest.target, 0.0)
        return check.get("passed") is True and check.get("target") == manifest.target and all(
            _within(check.get(k), tolerance) for k in ("max_probability_error", "max_action_error"))
    return False


def onnxruntime_version() -> str:
    import onnxruntime

    return str(onnxruntime.__version__)


def gated_elsewhere(manifest: Manifest, artifact_id: str, have: str | None = None) -> str | None:
    """Why the artifact's gate does not hold under this process's onnxruntime (`have`, default the imported one),
    or None: its answers were proven under the exact onnxruntime its manifest records (`tools`), and kernels and
    graph optimizations change between versions, as the GPU path already refuses. A manifest that records none
    (built before it did) is not refused."""
    tools = manifest.raw.get("tools")
    wanted = tools.get("onnxruntime") if isinstance(tools, dict) else None
    if not isinstance(wanted, str):
        return None
    have = have or onnxruntime_version()
    if wanted == have:
        return None
    recorded = manifest.raw.get("runtime")
    runtime: dict[str, Any] = recorded if isinstance(recorded, dict) else {}
    return ("artifact %s was gated under onnxruntime %s (lock sha256 %s) and this process runs onnxruntime %s; "
            "answers are proven for one exact configuration. Serve it with the runtime it was gated on (the layer "
            "built from that lock), or rebuild it with this one" % (
                artifact_id[:12], wanted, str(runtime.get("sha256") or "not recorded")[:12], have))


def unproven_here(manifest: Manifest, artifact_id: str, store: ObjectStore, here: dict[str, Any]) -> str | None:
    """Why the artifact's gate does not hold on the CPU `here`, or None when it does: gated on this CPU's int8
    kernel class, proven for it at build time (emulated), or re-gated here (a gate record)."""
    if not is_int8(manifest):
        return None
    built = manifest.raw["configuration"].get("build_cpu") or {}
    wanted, have = int8_kernels(built), int8_kernels(here)
    if wanted == have or proven_for_class(manifest, have):
        return None
    record = proven_by_record(store, artifact_id, have, manifest.target)
    if record is None:
        return None
    return ("int8 artifact %s was gated on %s int8 kernels (%s) and never on this CPU's %s (%s; %s); int8 results "
            "differ between them. Re-gate it here with `laya-artifacts import`, or serve cpu-fp32"
            % (artifact_id[:12], wanted, built.get("model", "?"), have, here.get("model", "?"), record))


__all__ = ["ARM64_CLASSES", "ARM64_NONE", "cpu_profile", "gate_record", "gate_record_key", "gated_elsewhere",
           "int8_kernels", "is_int8", "onnxruntime_version", "proven_by_record", "proven_for_class", "record_refusal",
           "unproven_here"]
