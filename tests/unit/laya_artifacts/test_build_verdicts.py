"""What a refused int8 build says, in one line: "gate failed", or "gate passed, but not faster than FP32" with the
figures and this run's FP32 timing noise; and where `build --name` writes by default."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from laya_artifacts.build import refusal
from laya_artifacts.search.precision import timing_noise
from laya_artifacts.search.verdict import verdict as _why
from laya_serverless.gate.replay import GateReport


def _trial(name: str, ms: float) -> tuple[str, float]:
    return name, ms


def test_the_noise_band_is_half_the_fp32_spread_over_its_median() -> None:
    assert timing_noise([100.0, 104.0, 102.0, 98.0, 101.0]) == pytest.approx(3 / 101)
    assert timing_noise([100.0]) == 0.0


@pytest.mark.parametrize("passing, noise, words", [
    ([], 0.0, "gate failed: no candidate passed selection"),
    ([_trial("node-mix", 100.0)], 0.01,
     "gate passed (node-mix), but not faster than FP32: node-mix x1.047 < x1.05 (this run's FP32 timing noise "
     "+-0.010)"),
    ([_trial("node-mix", 104.7 / 1.07)], 0.03,
     "gate passed (node-mix), but not faster than FP32: node-mix x1.070 is within the noise of x1.05"),
])
def test_a_refusal_says_which_rule_refused(passing: list[tuple[str, float]], noise: float, words: str) -> None:
    assert _why(None, passing, 104.7, 1.05, noise).startswith(words)


def test_a_search_that_gated_nothing_says_not_faster_not_gate_failed() -> None:
    timed = [_trial("nbits-sym-b32", 100.0), _trial("nbits-sym-b64", 90.0)]
    why = _why(None, [], 104.7, 1.5, 0.02, ["nbits-sym-b32", "nbits-sym-b64"], timed)
    assert why == ("not faster than FP32: no candidate reached x1.5 (fastest nbits-sym-b64 x1.163, this run's FP32 "
                   "timing noise +-0.020); none was gated")
    assert _why(None, [], 104.7, 1.5, 0.02, ["nbits-sym-b64"], timed).startswith("gate failed")   # one was gated


def test_the_build_error_names_the_verdict_not_a_gate_failure() -> None:
    why = _why(None, [_trial("node-mix", 100.0)], 104.7, 1.05, 0.0)
    report = GateReport(target="cpu-int8", tolerance=0.02, corpus={}, search={"chosen": None, "why": why},
                        notes=["nothing to confirm: %s; build cpu-fp32" % why])
    assert refusal(Path("out"), report).startswith("no cpu-int8 artifact for out: gate passed (node-mix), but not "
                                                   "faster than FP32: node-mix x1.047 < x1.05")


def test_build_name_names_the_default_output_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from laya_artifacts import build
    from laya_artifacts.checkpoints import sources
    from laya_artifacts.cli import main

    seen: dict[str, Any] = {}
    monkeypatch.setattr(sources, "resolve_checkpoint", lambda path, _rev, _say: (Path(path), "my-folder", None))
    monkeypatch.setattr(build, "build_artifact", lambda _c, _t, out, **_kw: (seen.setdefault("out", out), None))
    assert main(["build", str(tmp_path), "--name", "tiny", "--target", "cpu-fp32"]) == 0
    assert seen["out"] == Path(".cache/artifacts/tiny-cpu-fp32")


def test_a_long_gate_says_how_far_it_is_and_when_it_ends() -> None:
    from laya_serverless.gate.replay import ticker

    said: list[str] = []
    tick = ticker(said.append, "selection", every=0.0)
    for done in range(3):
        tick(done, 3)
    tick(3, 3)
    assert said == ["    gate selection: %d/3 cases" % n for n in range(4)]
    quiet = ticker(None, "selection")
    quiet(3, 3)
