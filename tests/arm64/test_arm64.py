"""The arm64 Lambda package, run as Lambda's Graviton CPUs would run it: under qemu-aarch64 (`make test-arm64`).

`laya-artifacts package --arch arm64` builds the package for CPython 3.13 (the stack's arm64 runtime) and imports
the handler with the pinned aarch64 CPython 3.13.5 (`laya-artifacts aarch64-python`) as a Graviton2 (`-cpu
neoverse-n1`). Here that package answers, passes the FP32 gate, and carries an int8 artifact's gate to the Arm
int8 classes. Slices are small and short: emulation runs ONNX Runtime tens of times slower than native (about
18 s a case on the tiny model, 2026-12-04); fidelity, never timing.
"""

from __future__ import annotations

import json
import platform
from pathlib import Path
from typing import Any

import pytest

from laya_artifacts.goldens.record import write_goldens
from laya_artifacts.package import probe
from laya_artifacts.search.arm64_classes import CLASS_CPUS, arm64_classes

from ..conftest import golden_slice
from ..functional.laya_artifacts.test_build import fixed_speeds

pytestmark = [pytest.mark.arm64, pytest.mark.slow,
              pytest.mark.skipif(platform.machine() != "x86_64", reason="emulates Arm CPUs on an x86_64 host")]


@pytest.fixture(scope="module")
def package() -> tuple[Path, Path]:
    built = probe.package_dirs("arm64")   # ProbeError (a failure) when `make test-arm64` did not build it
    probe.emulator_for("arm64")           # and when qemu or the pinned aarch64 CPython is missing
    return built


def _shortest(kind: str, keep: Any, count: int) -> list[dict[str, Any]]:
    rows = sorted(golden_slice(kind, keep_case=keep)["rows"], key=lambda r: (max(r.get("n_tokens") or [0]), r["id"]))
    return rows[:count]


def test_the_arm64_package_answers_as_a_graviton2_and_says_what_ran_it(
        package: tuple[Path, Path], tiny_modernbert: tuple[Path, Path], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    from laya_artifacts.cli import main

    cases = tmp_path / "cases.jsonl"
    rows = _shortest("tiny-modernbert", lambda _i, row: row["id"].startswith("edge:"), 2)
    lines = [{k: row[k] for k in ("id", "state", "questions", "controls")} for row in rows]
    lines.append({"id": "unknown-type", "state": "hi", "questions": {"q": {"type": "nope"}}, "controls": {}})
    lines.append({"id": "bad-control", "state": "hi", "questions": rows[0]["questions"], "controls": {"mx_len": 3}})
    cases.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    out = tmp_path / "out.json"
    assert main(["probe", "--arch", "arm64", str(tiny_modernbert[1]), "--cases", str(cases), "--out", str(out)]) == 0
    said = capsys.readouterr().err
    assert "never timing" in said and "CPython 3.13.5 aarch64" in said
    assert "qemu-aarch64-static -cpu neoverse-n1" in said
    assert "int8 kernel class arm64-dotprod" in said
    answers = json.loads(out.read_text())
    assert set(answers) == {line["id"] for line in lines}
    for row in rows:
        assert set(answers[row["id"]]["answers"]) == set(row["questions"]) - set(row.get("refused", {}))
    assert "unknown type 'nope'" in answers["unknown-type"]["error"]
    assert "unknown controls mx_len" in answers["bad-control"]["error"]


def test_fp32_on_an_emulated_graviton2_meets_upstream_within_1e_4(package: tuple[Path, Path],
                                                                  tiny_modernbert: tuple[Path, Path],
                                                                  tmp_path: Path) -> None:
    # the three shortest edge cases and the three shortest hidden (confirmation) cases, against upstream's FP32
    rows = (_shortest("tiny-modernbert", lambda _i, row: row["id"].startswith("edge:"), 3)
            + _shortest("tiny-modernbert", lambda _i, row: row["split"] == "confirmation"
                        and not row["id"].startswith("edge:"), 3))
    goldens = write_goldens(dict(golden_slice("tiny-modernbert", keep_case=lambda _i, _r: False), rows=rows), tmp_path)
    ran = probe.run_package(probe.emulator_for("arm64"), package, "gate", tiny_modernbert[1], str(goldens), "cpu-fp32")
    report = ran["report"]
    assert ran["python"] == "CPython 3.13.5 aarch64" and ran["int8_kernels"] == "arm64-dotprod"
    assert ran["health_int8_kernels"] == "arm64-dotprod"   # what /health says on a Graviton2
    assert ran["gate_record_key"] == "gates/%s/arm64-dotprod.json" % ("0" * 64)   # and where the deploy gate records
    assert report["passed"] and report["rows"] >= 12, report
    assert report["max_probability_error"] <= 1e-4 and report["max_action_error"] <= 1e-4
    assert not any(split["hard_mismatches"] for split in report["splits"].values())


@pytest.fixture(scope="module")
def dynamic_int8(tiny_modernbert: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    """The dynamic int8 layer mix (int8 MatMul kernels: the path whose results depend on the class) built and gated
    here, on an x86 class, on the shortest wide choice cases (one per split, as
    tests/functional/laya_artifacts/test_int8_classes.py)."""
    from laya_artifacts.build import build_artifact
    from laya_artifacts.spec import BuildSeams, BuildSpec

    root = tmp_path_factory.mktemp("arm64-int8")
    short = golden_slice("tiny-modernbert", keep_case=lambda _i, row: max(row.get("n_tokens") or [0]) <= 200,
                         keep_question=lambda q: q["type"] == "choice" and len(q["criteria"]) >= 11)
    goldens = json.loads(write_goldens(short, root / "g").read_text())
    out, report = build_artifact(tiny_modernbert[0],
                                 BuildSpec.of("cpu-int8", goldens=root / "g" / "goldens.json", min_speedup=0,
                                              candidates=["layer-mix"], emulate_classes=False), root / "a",
                                 seams=BuildSeams(timer=fixed_speeds({"fp32": 10.0, "layer-mix": 5.0})))
    assert report.passed, report.failures
    return out, goldens


def test_int8_is_proven_per_arm_class_and_served_only_where_proven(package: tuple[Path, Path],
                                                                    dynamic_int8: tuple[Path, Any],
                                                                    tmp_path: Path) -> None:
    """Graviton2 (dotprod) answers as this x86 class does (the integer products are exact on both), so the
    slice proves it by equivalence. i8mm (qemu -cpu max) answered 0.09 apart on 2026-12-04: onnxruntime 1.32
    routes dynamic int8 MatMul through KleidiAI there (with `mlas.disable_kleidiai=1` it answers as x86), so
    its whole gate is replayed; whatever it says decides whether int8 serves on i8mm."""
    from laya_serverless.artifact.manifest import Manifest
    from laya_serverless.artifact.platform import proven_for_class, unproven_here
    from laya_serverless.artifact.store import LocalStore

    out, goldens = dynamic_int8
    said: list[str] = []
    classes = arm64_classes(out, goldens, said.append)
    assert set(classes) == set(CLASS_CPUS), said
    dotprod = classes["arm64-dotprod"]
    assert dotprod["python"] == "CPython 3.13.5 aarch64" and dotprod["emulator"].endswith("-cpu neoverse-n1")
    if dotprod["proof"] == "equivalence":   # the target: Graviton2's int8 within 0.02 of upstream, 0 hard
        assert dotprod["equivalent"] and dotprod["max_probability_difference"] <= 1e-5, dotprod
    else:
        assert dotprod["passed"] and dotprod["max_probability_error"] <= 0.02, dotprod
    i8mm = classes["arm64-i8mm"]
    if i8mm["proof"] == "emulated-gate":   # not equivalent: gated in full, its verdict recorded either way
        assert i8mm["equivalence"]["max_probability_difference"] > 1e-5 and i8mm["rows"] == 2, i8mm
    manifest = Manifest.load(out)
    manifest.raw["configuration"]["int8_classes"] = classes   # what the build records with emulate_classes
    store = LocalStore(tmp_path)
    for kernels, isa in (("arm64-dotprod", ["asimddp"]), ("arm64-i8mm", ["asimddp", "i8mm"])):
        here = {"machine": "aarch64", "model": "emulated", "isa": isa}
        served = unproven_here(manifest, "a" * 64, store, here) is None
        assert served == proven_for_class(manifest, kernels), (kernels, classes[kernels])
    assert proven_for_class(manifest, "arm64-dotprod")
    assert any("arm64-i8mm" in line for line in said)
