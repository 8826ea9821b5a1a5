"""The public int8 recipes (issue 58) come first in the search, are written as documented (symmetric 8-bit
MatMulNBits, blocks 32 and 64, int8 compute, optionally the first and last encoder layers in FP32), and the search
spends nothing on a candidate that cannot win: none is gated below the speed a choice needs, and gating stops once
a refusal is certain."""

from __future__ import annotations

from pathlib import Path

import pytest

from laya_artifacts.export.onnx_export import GRAPH_FILE
from laya_artifacts.search import precision as search
from laya_artifacts.search.quantize import FIXED_CANDIDATES, PUBLIC_RECIPES, encoder_matmuls, quantize_candidate
from laya_artifacts.search.records import PORTABLE_MARGIN
from laya_serverless.gate import replay
from tests.conftest import golden_slice
from tests.functional.laya_artifacts.test_build import _negate, fixed_speeds

pytestmark = [pytest.mark.slow, pytest.mark.int8]


def _attribute(node: object, name: str) -> int:
    return next((a.i for a in node.attribute if a.name == name), 0)  # type: ignore[attr-defined]


def test_the_public_recipes_are_symmetric_blockwise_int8_compute_and_can_keep_the_ends(
        tiny_modernbert: tuple[Path, Path], tmp_path: Path) -> None:
    import onnx

    raw = tiny_modernbert[1] / GRAPH_FILE
    by_name = {c.name: c for c in FIXED_CANDIDATES}
    assert PUBLIC_RECIPES == ("nbits-sym-b32", "nbits-sym-b64", "nbits-sym-b32-ends-fp32", "nbits-sym-b64-ends-fp32")
    layers = encoder_matmuls(raw).layers
    for name in PUBLIC_RECIPES:
        out = tmp_path / (name + ".onnx")
        recipe = quantize_candidate(raw, out, by_name[name])
        graph = onnx.load(str(out)).graph
        nbits = [n for n in graph.node if n.op_type == "MatMulNBits"]
        assert len(nbits) == recipe["quantized_nodes"] > 0 and recipe["symmetric"] is True
        assert {_attribute(n, "accuracy_level") for n in nbits} == {4}
        assert {_attribute(n, "block_size") for n in nbits} == {recipe["block_size"]} == {int(name[11:13])}
        assert {_attribute(n, "bits") for n in nbits} == {8}
        assert all(len(n.input) < 4 or not n.input[3] for n in nbits)   # symmetric: no zero points
        fp32_layers = {int(n.name.split("layers.")[1].split("/")[0]) for n in graph.node
                       if n.op_type == "MatMul" and n.name.startswith("/encoder/layers.")}
        ends = {layers[0], layers[-1]}
        assert fp32_layers == (ends if name.endswith("-ends-fp32") else set()), name


def test_the_search_tries_the_public_recipes_first_and_gates_only_what_can_win(
        tiny_modernbert: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(search, "SPEED_CASES", 3)
    monkeypatch.setattr(search, "SPEED_RUNS", 2)
    monkeypatch.setattr(search, "ticker", lambda progress, split: replay.ticker(progress, split, 0.0))  # every case
    raw = tiny_modernbert[1]
    goldens = _negate(golden_slice("tiny-modernbert", keep_case=lambda i, _row: i % 10 == 0), "selection")
    names = ["encoder-attention-output", "nbits-sym-b64", "encoder", "layer-mix"]
    speeds = fixed_speeds({"fp32": 10.0, "nbits-sym-b64": 12.0, "encoder-attention-output": 5.0, "encoder": 11.0})
    said: list[str] = []
    result = search.precision_search(raw / GRAPH_FILE, raw, tmp_path, goldens, "cpu-int8", candidates=names,
                                     progress=said.append, timer=speeds)
    assert said[0].startswith("    4 candidate(s) to try: nbits-sym-b64, encoder, encoder-attention-output then "
                              "the mixes layer-mix;")
    assert [line.split(":")[0].strip() for line in said if line.endswith(": building")] == [
        "[1/3] nbits-sym-b64 (8-bit symmetric MatMulNBits, block 64, int8 compute)",
        "[2/3] encoder (all encoder MatMuls)", "[3/3] encoder-attention-output (attention output projections only)"]
    measured = {c["name"]: c for c in result.record["candidates"]}
    slow = measured["nbits-sym-b64"]
    assert slow["selection"] is None and "below the x1.05 a choice needs" in slow["skipped"]   # not gated
    refused = measured["encoder-attention-output"]["selection"]
    stopped = refused["stopped_early"]
    assert not refused["passed"] and stopped["cases"] < stopped["of"]   # gating stopped once the refusal was certain
    assert any(line.startswith("      stopped after ") for line in said)
    assert "    gate encoder-attention-output on selection: 1/%d cases" % len(search.selection_rows(goldens)) in said
    assert refused["max_probability_error"] > PORTABLE_MARGIN * 0.02
    assert result.chosen is None and "nbits-sym-b64 not gated" in result.record["why"]
    assert "below the x1.05" in measured["encoder"]["skipped"]
    # a mix quantizes part of what `encoder` does: no faster than it, so it cannot reach the speed a choice needs
    assert result.record["layer_mix"]["skipped"].startswith("encoder (every layer) runs x0.91 vs fp32")


def test_exhaustive_search_gates_every_row_of_every_candidate(tiny_modernbert: tuple[Path, Path],
                                                               tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(search, "SPEED_CASES", 2)
    monkeypatch.setattr(search, "SPEED_RUNS", 1)
    raw = tiny_modernbert[1]
    goldens = _negate(golden_slice("tiny-modernbert", keep_case=lambda i, _row: i % 20 == 0), "selection")
    result = search.precision_search(raw / GRAPH_FILE, raw, tmp_path, goldens, "cpu-int8", exhaustive=True,
                                     candidates=["nbits-sym-b32-ends-fp32"],
                                     timer=fixed_speeds({"fp32": 10.0, "nbits-sym-b32-ends-fp32": 20.0}))
    (only,) = result.record["candidates"]
    assert "stopped_early" not in only["selection"] and only["selection"]["cases"] == len(
        search.selection_rows(goldens))
