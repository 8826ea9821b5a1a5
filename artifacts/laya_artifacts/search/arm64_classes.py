"""The int8 gate's verdict carried to the Arm int8 classes (Graviton2 dotprod, i8mm), under emulation.

ONNX Runtime's Arm int8 kernels (SDOT/UDOT, SMMLA) compute other integers than the x86 ones (no 7-bit weight
trick, no saturation), so an artifact gated on an x86 class is not proven on arm64 by that gate. The build runs
the project's own arm64 Lambda package (`probe`, qemu-aarch64 as the class's CPU model) on a slice of the gate
corpus and compares its probabilities with this machine's: within `CLASS_EQUIVALENCE_TOLERANCE`, the class is
proven by equivalence; otherwise, on a corpus small enough to replay emulated, the whole gate runs as that
class (`emulated-gate`); otherwise the class is left to the deploy-time gate on the Graviton that serves.
Fidelity, never timing: emulated aarch64 runs ONNX Runtime tens of times slower than native.
"""

from __future__ import annotations

import platform
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from laya_artifacts.errors import SearchError
from laya_artifacts.goldens.record import write_goldens
from laya_artifacts.package.probe import (
    DEFAULT_ASSET_DIR,
    EMULATED_PY,
    Emulator,
    ProbeError,
    emulator_for,
    package_dirs,
    run_package,
)
from laya_artifacts.search.emulated import EMULATED_GATE_MAX_CASES, class_probabilities, equivalence_rows
from laya_serverless.artifact.targets import CLASS_EQUIVALENCE_TOLERANCE

# The qemu model standing for each class Lambda's arm64 fleet has (package/aarch64_python.py CPUINFO says why).
CLASS_CPUS = {"arm64-dotprod": "neoverse-n1", "arm64-i8mm": "max,sve-default-vector-length=32"}


def arm64_unavailable(asset_dir: Path = DEFAULT_ASSET_DIR) -> str | None:
    """Why the arm64 classes cannot be checked here (no arm64 package, qemu or aarch64 CPython), or None."""
    if platform.machine() != "x86_64":
        return "emulation runs on x86_64 hosts (this one is %s)" % platform.machine()
    try:
        package_dirs("arm64", asset_dir)
        emulator_for("arm64", CLASS_CPUS["arm64-dotprod"])
    except ProbeError as exc:
        return str(exc)
    return None


def class_equivalence(artifact_dir: Path, goldens: dict[str, Any], kernels: str,
                      asset_dir: Path = DEFAULT_ASSET_DIR, native: list[list[float]] | None = None) -> dict[str, Any]:
    """This machine's probabilities against the arm64 package's as `kernels`'s CPU, on `equivalence_rows`."""
    from laya_serverless import Decider

    rows = equivalence_rows(goldens)
    if not rows:
        raise SearchError("the goldens hold no short answerable case to compare the CPU classes on")
    emulator = emulator_for("arm64", CLASS_CPUS[kernels])
    with tempfile.TemporaryDirectory(prefix="laya-arm64-") as scratch:
        sliced = write_goldens(dict(goldens, rows=rows), Path(scratch))
        theirs = run_package(emulator, package_dirs("arm64", asset_dir), "probabilities", Path(artifact_dir).resolve(),
                             str(sliced), str(EMULATED_PY))
    if native is None:
        native = class_probabilities(Decider.from_artifact(Path(artifact_dir), verify=False, threads=1), rows)
    if theirs["int8_kernels"] != kernels:
        raise ProbeError("qemu -cpu %s was seen as %s, not %s" % (emulator.cpu, theirs["int8_kernels"], kernels))
    if [len(p) for p in theirs["probabilities"]] != [len(p) for p in native]:
        raise ProbeError("the emulated run answered other questions than the native one")
    difference = max(abs(a - b) for mine, other in zip(native, theirs["probabilities"], strict=True)
                     for a, b in zip(mine, other, strict=True))
    return {"proof": "equivalence", "kernels": kernels, "emulator": emulator.describe(), "python": theirs["python"],
            "cases": len(rows), "rows": len(native), "max_probability_difference": difference,
            "tolerance": CLASS_EQUIVALENCE_TOLERANCE, "equivalent": difference <= CLASS_EQUIVALENCE_TOLERANCE}


def class_gate(artifact_dir: Path, goldens: dict[str, Any], kernels: str, target: str = "cpu-int8",
               asset_dir: Path = DEFAULT_ASSET_DIR, emulator: Emulator | None = None,
               timeout_s: float = 3600) -> dict[str, Any]:
    """The arm64 package's whole gate of `artifact_dir` on `goldens` as `kernels`'s CPU: (report, what ran it)."""
    emulator = emulator or emulator_for("arm64", CLASS_CPUS[kernels])
    with tempfile.TemporaryDirectory(prefix="laya-arm64-") as scratch:
        result = run_package(emulator, package_dirs("arm64", asset_dir), "gate", Path(artifact_dir).resolve(),
                             str(write_goldens(goldens, Path(scratch))), target, timeout_s=timeout_s)
    if result["int8_kernels"] != kernels:
        raise ProbeError("qemu -cpu %s was seen as %s, not %s" % (emulator.cpu, result["int8_kernels"], kernels))
    return result


def arm64_classes(artifact_dir: Path, goldens: dict[str, Any], progress: Callable[[str], None],
                  target: str = "cpu-int8", asset_dir: Path = DEFAULT_ASSET_DIR) -> dict[str, Any]:
    """Per Arm class, its build-time proof (`configuration.int8_classes`, read by `artifact.platform`): equivalent
    to this machine on a slice, or its whole gate passed emulated; a class neither proves is left out."""
    why = arm64_unavailable(asset_dir)
    if why is not None:
        progress("    the arm64 int8 classes are left to the deploy-time gate: %s" % why.splitlines()[0])
        return {}
    from laya_serverless import Decider

    native = class_probabilities(Decider.from_artifact(Path(artifact_dir), verify=False, threads=1),
                                 equivalence_rows(goldens))
    proven: dict[str, Any] = {}
    for kernels in CLASS_CPUS:
        progress("    checking the arm64 package as %s (qemu -cpu %s) on %d short cases"
                 % (kernels, CLASS_CPUS[kernels], len(equivalence_rows(goldens))))
        check = class_equivalence(artifact_dir, goldens, kernels, asset_dir, native)
        progress("    max |dp| from this CPU's answers: %.2g over %d rows (%s)"
                 % (check["max_probability_difference"], check["rows"],
                    "equivalent" if check["equivalent"] else "not equivalent"))
        if not check["equivalent"]:
            if len(goldens["rows"]) > EMULATED_GATE_MAX_CASES:
                progress("    %s not proven here (%d cases are too many to replay emulated): left to the "
                         "deploy-time gate on the serving CPU" % (kernels, len(goldens["rows"])))
                continue
            progress("    replaying the whole gate as %s (%d cases)" % (kernels, len(goldens["rows"])))
            gated = class_gate(artifact_dir, goldens, kernels, target)
            report = gated["report"]
            check = {"proof": "emulated-gate", "kernels": kernels, "emulator": check["emulator"],
                     "python": gated["python"],
                     "equivalence": {k: check[k] for k in ("rows", "max_probability_difference", "tolerance")},
                     "target": target, "passed": report["passed"], "rows": report["rows"],
                     "max_probability_error": report["max_probability_error"],
                     "max_action_error": report["max_action_error"]}
            progress("    %s: the whole gate %s (max |dp| %.3g)" % (kernels, "passed" if report["passed"] else
                                                                     "failed", report["max_probability_error"]))
        proven[kernels] = check
    return proven
