"""The parity gate run as another x86 CPU class, under qemu user-mode emulation (`qemu-x86_64-static -cpu`).

int8 results depend on the int8 kernels ONNX Runtime picks from cpuid: a VNNI machine cannot see what an
AVX2-only CPU (most of Lambda's x86 fleet) answers, except by emulating one. `-cpu Haswell` is AVX2
without VNNI. Only the gate's replay runs emulated (torch-free, one session thread: ONNX Runtime's
spinning thread pool crawls under emulation), so it takes a minute or two on a small slice: fidelity,
never timing. Run as a module, it is the emulated side: it gates and prints the report as JSON.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from laya_serverless.artifact.targets import CLASS_EQUIVALENCE_TOLERANCE

QEMU = "qemu-x86_64-static"
AVX2_CPU = "Haswell"
_MARK = "laya-emulated-gate:"
# Kernel-exact int8 (search/quantize.py) answers the same integers on every x86 class; what is left is float
# summation order, far below this. A larger difference means the kernels differ: the class is not proven.
EQUIVALENCE_TOLERANCE = CLASS_EQUIVALENCE_TOLERANCE
EQUIVALENCE_CASES = 4  # the shortest: emulation costs grow with length
# Dynamic int8 requantizes activations: FP32 noise between the classes' other kernels can move one across a
# rounding step, so a kernel-exact graph may still differ by more than the equivalence tolerance. Then the
# whole gate is replayed emulated, when the corpus is this small (about 1.3 s a question on the tiny model,
# minutes a case on a ModernBERT-base): larger corpora are left to the deploy-time gate on the serving CPU.
EMULATED_GATE_MAX_CASES = 40


def can_emulate() -> bool:
    return platform.machine() == "x86_64" and shutil.which(QEMU) is not None


def _run_emulated(arguments: Sequence[str], cpu: str, timeout_s: float) -> dict[str, Any]:
    # imported here: the Lambda package's probe loads this file on its own, where laya_artifacts is absent
    from laya_artifacts.errors import EmulationError

    if not can_emulate():
        raise EmulationError("the emulated gate needs %s on an x86_64 machine (apt-get install qemu-user-static)"
                           % QEMU)
    command = [QEMU, "-cpu", cpu, sys.executable, "-m", "laya_artifacts.search.emulated", *arguments]
    run = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
    found = [line[len(_MARK):] for line in run.stdout.splitlines() if line.startswith(_MARK)]
    if run.returncode != 0 or not found:
        tail = "\n".join(line for line in run.stderr.splitlines() if "TCG doesn't support" not in line)[-4000:]
        raise EmulationError("the gate under %s -cpu %s failed (exit %d):\n%s" % (QEMU, cpu, run.returncode, tail))
    result: dict[str, Any] = json.loads(found[-1])
    return result


def equivalence_rows(goldens: dict[str, Any], cases: int = EQUIVALENCE_CASES) -> list[dict[str, Any]]:
    """A fixed slice of the corpus for the class check: its `cases` shortest answerable cases (ties by id)."""
    def tokens(row: dict[str, Any]) -> int:
        return max(row.get("n_tokens") or [len(ids) for ids in row.get("token_ids", [[]])])

    answerable = [row for row in goldens["rows"] if row.get("markers")
                  and set(row["questions"]) - set(row.get("refused", {}))]
    return sorted(answerable, key=lambda row: (tokens(row), row["id"]))[:cases]


def class_probabilities(decider: Any, rows: Sequence[dict[str, Any]]) -> list[list[float]]:
    """Each answered question's option probabilities and act probability, row by row, as this CPU computes them."""
    from laya_serverless.core.decode import option_probabilities, temperature_for
    from laya_serverless.core.questions import parse_questions

    config, out = decider.config, []
    for row in rows:
        accepted = {q: d for q, d in row["questions"].items() if q not in row.get("refused", {})}
        questions = parse_questions(accepted)
        built = decider.rows_for(row["state"], questions, row["controls"].get("max_len", config.max_len),
                                 row["controls"].get("head_max_len", config.head_max_len))
        logits, act = decider.run_rows(built, questions)
        for j, question in enumerate(questions):
            k = len(built[j].markers)
            probabilities = option_probabilities(logits[j, :k], temperature_for(config, question.type_index, k),
                                                 question.option_order)
            out.append([float(x) for x in probabilities] + [float(act[j, 0])])
    return out


def equivalence(artifact_dir: Path, goldens: dict[str, Any], cpu: str = AVX2_CPU,
                timeout_s: float = 1800) -> dict[str, Any]:
    """Whether `artifact_dir` answers as an emulated `cpu` exactly as it does here, on `equivalence_rows`:
    the proof that the native gate holds for that CPU's int8 kernel class too (recorded in the manifest)."""
    import tempfile

    from laya_artifacts.errors import EmulationError, SearchError
    from laya_artifacts.goldens.record import write_goldens
    from laya_serverless import Decider

    rows = equivalence_rows(goldens)
    if not rows:
        raise SearchError("the goldens hold no short answerable case to compare the CPU classes on")
    with tempfile.TemporaryDirectory(prefix="laya-classes-") as scratch:
        sliced = write_goldens(dict(goldens, rows=rows), Path(scratch))
        emulated = _run_emulated([str(artifact_dir), str(sliced), "--probabilities"], cpu, timeout_s)
    native = class_probabilities(Decider.from_artifact(Path(artifact_dir), verify=False, threads=1), rows)
    theirs = emulated["probabilities"]
    if [len(p) for p in theirs] != [len(p) for p in native]:
        raise EmulationError("the emulated run answered other questions than the native one")
    difference = max(abs(a - b) for mine, other in zip(native, theirs, strict=True)
                     for a, b in zip(mine, other, strict=True))
    return {"proof": "equivalence", "kernels": emulated["int8_kernels"], "emulator": "%s -cpu %s" % (QEMU, cpu),
            "cases": len(rows), "rows": len(native), "max_probability_difference": difference,
            "tolerance": EQUIVALENCE_TOLERANCE, "equivalent": difference <= EQUIVALENCE_TOLERANCE}


def emulated_gate(artifact_dir: Path, goldens_path: Path, target: str, cpu: str = AVX2_CPU,
                  timeout_s: float = 900) -> dict[str, Any]:
    """The gate report of `artifact_dir` against `goldens_path` as seen by an emulated `cpu`, plus the CPU
    profile and int8 kernel class the emulated process saw (`cpu`, `int8_kernels`)."""
    return _run_emulated([str(artifact_dir), str(goldens_path), target], cpu, timeout_s)


def emulated_class_gate(artifact_dir: Path, goldens: dict[str, Any], check: dict[str, Any],
                        target: str = "cpu-int8") -> dict[str, Any]:
    """The whole gate replayed as `check`'s emulated CPU: the class's proof when equivalence did not hold."""
    import tempfile

    from laya_artifacts.goldens.record import write_goldens

    with tempfile.TemporaryDirectory(prefix="laya-classes-") as scratch:
        emulated = emulated_gate(artifact_dir, write_goldens(goldens, Path(scratch)), target, timeout_s=3600)
    report = emulated["report"]
    return {"proof": "emulated-gate", "kernels": emulated["int8_kernels"], "emulator": check["emulator"],
            "equivalence": {k: check[k] for k in ("rows", "max_probability_difference", "tolerance")},
            "target": target, "passed": report["passed"], "rows": report["rows"],
            "max_probability_error": report["max_probability_error"], "max_action_error": report["max_action_error"]}


def main(argv: Sequence[str] | None = None) -> int:
    from laya_artifacts.goldens.record import load_goldens
    from laya_serverless.artifact.platform import cpu_profile, int8_kernels
    from laya_serverless.gate.replay import run_gate

    parser = argparse.ArgumentParser(prog="python -m laya_artifacts.search.emulated")
    parser.add_argument("artifact")
    parser.add_argument("goldens")
    parser.add_argument("target", nargs="?", default="cpu-int8")
    parser.add_argument("--probabilities", action="store_true", help="print the answers, not a gate report")
    args = parser.parse_args(argv)
    profile = cpu_profile()
    if args.probabilities:
        from laya_serverless import Decider

        decider = Decider.from_artifact(Path(args.artifact), verify=False, threads=1)
        answers = class_probabilities(decider, load_goldens(Path(args.goldens))["rows"])
        print(_MARK + json.dumps({"cpu": profile, "int8_kernels": int8_kernels(profile), "probabilities": answers}))
        return 0
    # repeat=False: whether a replay is bit-identical is not a property of the CPU class; the native gate checks it
    report = run_gate(Path(args.artifact), load_goldens(Path(args.goldens)), args.target, threads=1, repeat=False)
    print(_MARK + json.dumps({"cpu": profile, "int8_kernels": int8_kernels(profile), "report": report.as_dict()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
