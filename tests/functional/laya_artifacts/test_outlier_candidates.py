"""The search's outlier-aware candidates on the tiny ModernBERT: SmoothQuant (checked exact in FP32 before it is
quantized) and static QDQ (calibrated on selection rows), built, gated and recorded like every other candidate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from laya_artifacts.export.onnx_export import GRAPH_FILE
from laya_artifacts.search import precision as search
from laya_artifacts.search.mixes import probe_rows
from tests.conftest import golden_slice
from tests.functional.laya_artifacts.test_build import fixed_speeds

pytestmark = [pytest.mark.slow, pytest.mark.int8]
OUTLIER_AWARE = ["encoder-smoothquant", "encoder-smoothquant-0.9", "encoder-static"]


def _goldens() -> dict[str, Any]:
    return golden_slice("tiny-modernbert", keep_case=lambda i, _row: i % 8 == 0,
                        keep_question=lambda q: q["type"] == "choice")


def _nodes(graph: Path) -> list[tuple[str, str]]:
    import onnx

    return [(n.op_type, n.name) for n in onnx.load(str(graph)).graph.node]


def test_outlier_aware_candidates_are_built_gated_and_recorded(tiny_modernbert: tuple[Path, Path],
                                                               tmp_path: Path) -> None:
    raw = tiny_modernbert[1]
    goldens = _goldens()
    said: list[str] = []
    result = search.precision_search(raw / GRAPH_FILE, raw, tmp_path, goldens, "cpu-int8", candidates=OUTLIER_AWARE,
                                     exhaustive=True, min_speedup=0, progress=said.append,
                                     timer=fixed_speeds({"fp32": 10.0, **{name: 5.0 for name in OUTLIER_AWARE}}))
    measured = {c["name"]: c for c in result.record["candidates"]}
    assert sorted(measured) == sorted(OUTLIER_AWARE)
    assert all(c["selection"] is not None and "skipped" not in c for c in measured.values())  # every one was gated
    calibration = len([r for r in probe_rows(search.selection_rows(goldens)) if r.get("markers")])
    for name, alpha in (("encoder-smoothquant", 0.5), ("encoder-smoothquant-0.9", 0.9)):
        smoothing = measured[name]["recipe"]["smoothing"]
        assert smoothing["fp32_check"]["passed"] and smoothing["fp32_check"]["max_probability_error"] <= 1e-4
        assert smoothing["calibration_cases"] == calibration > 0 and smoothing["groups"] > 0
        assert smoothing["alpha"] == measured[name]["recipe"]["smoothing_alpha"] == alpha
        assert smoothing["folded_into_layernorm"] > 0  # ModernBERT is pre-LN: its MLP input folds into mlp_norm
    assert [line.split(",")[0].strip() for line in said if "smoothing (alpha" in line] == [
        "smoothing (alpha 0.5", "smoothing (alpha 0.9"]  # one smoothing per alpha, its fold checked once
    dynamic = _nodes(tmp_path / "candidate-encoder-smoothquant.onnx")
    static = {op for op, _ in _nodes(tmp_path / "candidate-encoder-static.onnx")}
    assert "DynamicQuantizeLinear" in {op for op, _ in dynamic}
    assert any(op == "Mul" and name.endswith("/SmoothingMul") for op, name in dynamic)  # the residual reads x too
    assert "DynamicQuantizeLinear" not in static and {"QuantizeLinear", "DequantizeLinear"} <= static
    assert measured["encoder-static"]["recipe"]["activations"].startswith("uint8, per tensor, calibrated")


def test_a_smoothing_that_moves_fp32_answers_is_not_built(tiny_modernbert: tuple[Path, Path], tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The fold check is the gate at the FP32 tolerance: a rewrite that is not exact (here, one weight scaled
    twice) never reaches quantization, the record says why, and the rest of the search goes on."""
    import onnx
    from onnx import numpy_helper

    real = search.smooth_graph

    def inexact(graph: Path, out: Path, *args: Any, **kwargs: Any) -> dict[str, Any]:
        done = real(graph, out, *args, **kwargs)
        model = onnx.load(str(out))
        weight = next(i for i in model.graph.initializer if i.name.endswith("/smoothed") and len(i.dims) == 2)
        weight.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(weight) * 1.5, weight.name))
        onnx.save(model, str(out))
        return done

    monkeypatch.setattr(search, "smooth_graph", inexact)
    raw = tiny_modernbert[1]
    result = search.precision_search(raw / GRAPH_FILE, raw, tmp_path, _goldens(), "cpu-int8",
                                     candidates=["encoder-smoothquant", "encoder-static"], exhaustive=True,
                                     min_speedup=0, timer=fixed_speeds({"fp32": 10.0, "encoder-static": 5.0}))
    measured = {c["name"]: c for c in result.record["candidates"]}
    assert "misses the FP32 tolerance 0.0001" in measured["encoder-smoothquant"]["skipped"]
    assert "selection" not in measured["encoder-smoothquant"]
    assert measured["encoder-static"]["selection"] is not None
