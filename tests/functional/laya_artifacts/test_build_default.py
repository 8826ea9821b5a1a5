"""`laya-artifacts build CKPT` with no --target (issue 57): a bounded int8 search over the public recipes, then exact
cpu-fp32 where int8 is refused, so a user's own checkpoint ends served either way, with the int8 verdict said."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from laya_artifacts import cli
from laya_artifacts.search import precision as search
from laya_artifacts.search.quantize import PUBLIC_RECIPES
from laya_serverless.artifact.manifest import verify_artifact
from tests.conftest import golden_slice

pytestmark = [pytest.mark.slow]


def test_no_target_searches_the_public_recipes_then_builds_exact_fp32(
        tiny_modernbert: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(search, "SPEED_CASES", 2)
    monkeypatch.setattr(search, "SPEED_RUNS", 1)
    goldens = tmp_path / "goldens.json"
    goldens.write_text(json.dumps(golden_slice("tiny-modernbert", keep_case=lambda i, _row: i % 12 == 0)))
    # No candidate can be 1000x as fast as FP32: int8 is refused for speed on any CPU, without a race.
    code = cli.main(["build", str(tiny_modernbert[0]), "--name", "mine", "--goldens", str(goldens),
                     "--out", str(tmp_path / "mine"), "--min-speedup", "1000", "--search-records", "",
                     "--no-emulate-classes"])
    said = capsys.readouterr().err
    assert code == 0, said
    tried = re.findall(r"\[\d+/\d+\] (\S+) \(.*\): building", said)
    assert tried and set(tried) <= set(PUBLIC_RECIPES), said   # bounded: the public recipes, nothing else
    assert "int8 verdict: refused" in said and "building exact cpu-fp32 instead" in said
    assert said.count("quantized in") == said.count("timing against fp32") == len(tried)   # no silent step
    manifest = verify_artifact(tmp_path / "mine-cpu-fp32")
    assert manifest.target == "cpu-fp32" and manifest.checkpoint["name"] == "mine"
    assert not (tmp_path / "mine-cpu-int8" / "manifest.json").exists()   # the refusal's report only


def test_an_explicit_target_still_fails_on_refusal(tiny_modernbert: tuple[Path, Path], tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(search, "SPEED_CASES", 2)
    monkeypatch.setattr(search, "SPEED_RUNS", 1)
    goldens = tmp_path / "goldens.json"
    goldens.write_text(json.dumps(golden_slice("tiny-modernbert", keep_case=lambda i, _row: i % 24 == 0)))
    code = cli.main(["build", str(tiny_modernbert[0]), "--target", "cpu-int8", "--goldens", str(goldens),
                     "--out", str(tmp_path / "int8"), "--candidates", "nbits-sym-b32", "--min-speedup", "1000",
                     "--search-records", "", "--no-emulate-classes"])
    said = capsys.readouterr().err
    assert code == 2 and "not faster" in said.splitlines()[-1], said
    assert not list(tmp_path.glob("int8-cpu-fp32"))   # an explicit target builds that target only


def test_a_long_timing_says_how_far_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    """At real size one timing pass takes minutes: the search's clock reports each pass once it has been quiet long
    enough (every pass here, with no wait)."""
    def passes(_deciders: object, _batch: object, runs: int | None = None, tick=lambda _r, _n: None) -> list:
        for run in range(3):
            tick(run, 2)
        return [[1.0, 1.0]]

    monkeypatch.setattr(search, "measure_speeds", passes)
    said: list[str] = []
    search.ticking_clock(said.append, 2, every_s=0.0)(["fp32"], [], [])
    assert said == ["      timing: pass %d of 3 done" % n for n in (1, 2, 3)]
