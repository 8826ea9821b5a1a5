"""A cpu-int8 build's walk through the build wing, stage by stage: traced from `build_artifact` on the tiny
ModernBERT (its committed goldens' choice slice, one candidate, given speeds). No stage walks back into one
that called it, no stage goes back to a stage it already left where one visit would do, and the walk drawn
in docs/architecture.md ("A build's walk") is the walk that runs."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from laya_artifacts.build import build_artifact
from laya_artifacts.spec import BuildSeams, BuildSpec
from laya_serverless.artifact.manifest import Manifest
from tests.conftest import tiny_choice_slice, write_goldens_file
from tests.functional.laya_artifacts.test_build import fixed_speeds
from tests.functional.laya_serverless.jobs.test_job_walk import Walk
from tests.paths import ROOT

# Stages a build goes back and forth between by nature; each pair is (caller, callee).
ALTERNATING = {
    # The search's kept decision is looked up before the export (a recorded refusal skips exporting), and the
    # search itself runs on the export, after it.
    ("build", "search"),
}


def _drawn_walk() -> list[str]:
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = page.split("## A build's walk", 1)[1]
    block = re.search(r"```\n(.*?)```", section, re.DOTALL)
    assert block, "docs/architecture.md: the section \"A build's walk\" has no drawing"
    return block.group(1).splitlines()


@pytest.mark.slow
@pytest.mark.int8
def test_a_cpu_int8_build_walks_forward_through_the_stages_and_as_drawn(tiny_modernbert: tuple[Path, Path],
                                                                         tmp_path: Path) -> None:
    spec = BuildSpec.of("cpu-int8", goldens=write_goldens_file(tiny_choice_slice(), tmp_path / "g"),
                        candidates=["encoder-weight-only-8bit"], min_speedup=0, search_records=tmp_path / "records")
    said: list[str] = []   # a builtin: the caller's reporting is no stage of the wing
    seams = BuildSeams(progress=said.append, timer=fixed_speeds({"fp32": 10.0, "encoder-weight-only-8bit": 5.0}))
    walk = Walk(package="laya_artifacts.", depth=1, alternating=ALTERNATING)
    sys.setprofile(walk)
    try:
        out, report = build_artifact(tiny_modernbert[0], spec, tmp_path / "a", seams=seams)
    finally:
        sys.setprofile(None)
    assert report.passed, report.failures   # a real build, gated and manifested, its spec recorded
    assert Manifest.load(out).raw["configuration"]["build_spec"] == spec.record()
    assert walk.walked_back == []
    assert walk.went_back == []
    assert walk.lines()[0] == "build"
    assert walk.lines() == _drawn_walk(), "docs/architecture.md's build walk is stale: print Walk.lines()"


def test_the_build_walk_counts_stages_not_modules() -> None:
    walk = Walk(package="laya_artifacts.", depth=1, alternating=set())
    walk._enter("laya_artifacts.build", "build_artifact")
    for name in ("search.records", "search.precision", "export.onnx_export", "search.precision"):
        walk._enter("laya_artifacts." + name, "f")
        walk(sys._getframe(), "return", None)
    assert walk.went_back == ["build went back to search.f after ['search', 'export']"]   # records, precision: one
