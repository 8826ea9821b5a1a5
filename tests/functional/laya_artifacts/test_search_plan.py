"""`laya-artifacts build` says up front what its int8 search will cost: after the candidates, before the first of
them is built, an estimate from this run's FP32 graph and the faster ways to a build."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from laya_artifacts.export.onnx_export import GRAPH_FILE
from laya_artifacts.search import precision as search
from tests.conftest import golden_slice

SPEEDS = {"fp32": 10.0, "nbits-sym-b32": 12.0, "encoder-weight-only-8bit": 11.0}  # both slower: neither is gated


def _given_speeds(names: Sequence[str], _deciders: Sequence[Any], _batch: Sequence[Any]) -> list[list[float]]:
    return [[SPEEDS[name]] * 2 for name in names]


def test_the_estimate_and_the_faster_ways_come_before_the_first_candidate(
    tiny_modernbert: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(search, "SPEED_CASES", 3)
    monkeypatch.setattr(search, "SPEED_RUNS", 2)
    raw = tiny_modernbert[1]
    goldens = golden_slice("tiny-modernbert", keep_case=lambda i, _row: i % 10 == 0)
    said: list[str] = []
    result = search.precision_search(
        raw / GRAPH_FILE,
        raw,
        tmp_path,
        goldens,
        "cpu-int8",
        candidates=["encoder-weight-only-8bit", "nbits-sym-b32"],
        progress=said.append,
        timer=_given_speeds,
    )
    first = next(i for i, line in enumerate(said) if line.endswith(": building"))
    assert first == 3 and said[0].startswith("    2 candidate(s) to try: nbits-sym-b32, encoder-weight-only-8bit;")
    assert re.fullmatch(
        r"    estimate from this run's fp32 \(\d+\.\d\d s per case, \d+ s to optimize the graph\): "
        r"building and timing the 2 fixed candidate\(s\) about \d+ s, then gating them fastest first "
        r"on %d selection cases, about \d+ s each, until the first that passes and is fast enough "
        r"\(\d+ s if every one is gated\)" % len(search.selection_rows(goldens)),
        said[1],
    )
    assert said[2] == (
        "    faster: --target cpu-fp32 (no search: an FP32 artifact) or --candidates nbits-sym-b32 (one candidate)"
    )
    assert result.chosen is None and all(c.get("skipped") for c in result.record["candidates"])
