"""SmoothQuant scale migration on small hand-made graphs: exact in FP32, folded where it may be, and useful to int8."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from laya_artifacts.search.smoothing import smooth_graph, smoothing_scales  # noqa: E402

WIDTH, OUT, OUTLIER = 64, 48, 5
RNG = np.random.default_rng(7)


def _outlier_input(n: int = 32) -> np.ndarray:
    """Activations with one hidden channel ~60x the others, as BERT-family encoders have."""
    x = RNG.normal(size=(n, WIDTH)).astype(np.float32)
    x[:, OUTLIER] *= 60.0
    return x


def _graph(path: Path, residual: bool) -> list[str]:
    """x -> LayerNorm (a gain with an outlier channel) -> MatMul a, MatMul b; x -> MatMul c (+ x when `residual`).

    The LayerNorm's output is read only by a and b, so it can take the scales; x is also read by the residual
    Add when `residual`, so c's scales need a Mul of their own."""
    gamma = np.ones(WIDTH, np.float32)
    gamma[OUTLIER] = 40.0
    beta = RNG.normal(scale=0.1, size=WIDTH).astype(np.float32)
    weights = {name: RNG.normal(scale=0.2, size=(WIDTH, OUT if name != "c" else WIDTH)).astype(np.float32)
               for name in "abc"}
    nodes = [helper.make_node("LayerNormalization", ["x", "gamma", "beta"], ["normed"], name="/ln", axis=-1),
             helper.make_node("MatMul", ["normed", "wa"], ["ya"], name="/a/MatMul"),
             helper.make_node("MatMul", ["normed", "wb"], ["yb"], name="/b/MatMul"),
             helper.make_node("MatMul", ["x", "wc"], ["c"], name="/c/MatMul")]
    nodes.append(helper.make_node("Add", ["c", "x"], ["yc"], name="/residual") if residual
                 else helper.make_node("Identity", ["c"], ["yc"], name="/same"))
    inits = [numpy_helper.from_array(gamma, "gamma"), numpy_helper.from_array(beta, "beta")]
    inits += [numpy_helper.from_array(w, "w" + name) for name, w in weights.items()]
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("ya", "yb", "yc")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, WIDTH])],
                              outputs, inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return ["/a/MatMul", "/b/MatMul", "/c/MatMul"]


def _run(path: Path, x: np.ndarray) -> list[Any]:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})


def test_smoothing_is_exact_in_fp32_and_folds_into_an_exclusive_layernorm(tmp_path: Path) -> None:
    matmuls = _graph(tmp_path / "g.onnx", residual=True)
    done = smooth_graph(tmp_path / "g.onnx", tmp_path / "s.onnx", matmuls, [{"x": _outlier_input()}])
    x = _outlier_input(8)
    for before, after in zip(_run(tmp_path / "g.onnx", x), _run(tmp_path / "s.onnx", x), strict=True):
        np.testing.assert_allclose(after, before, rtol=1e-4, atol=1e-4 * float(np.abs(before).max()))
    assert (done["groups"], done["folded_into_layernorm"], done["scaled_by_mul"]) == (2, 1, 1)
    assert done["largest_scale_ratio"] > 5  # the outlier channel's scale stands out
    model = onnx.load(str(tmp_path / "s.onnx"))
    ops = [n.op_type for n in model.graph.node]
    assert ops == ["LayerNormalization", "MatMul", "MatMul", "Mul", "MatMul", "Add"]  # still topologically sorted
    assert {i.name for i in model.graph.initializer}.isdisjoint({"gamma", "wa", "wb", "wc"})  # nothing left unused
    readers = [n.name for n in model.graph.node if "x" in n.input]
    assert sorted(readers) == ["/ln", "/residual", "x/SmoothingMul"]  # the residual still reads x unscaled


def test_without_other_readers_no_mul_is_needed_only_when_the_producer_is_a_layernorm(tmp_path: Path) -> None:
    """x is a graph input here: nothing can take its scales, so c still gets a Mul; the LayerNorm still folds."""
    matmuls = _graph(tmp_path / "g.onnx", residual=False)
    done = smooth_graph(tmp_path / "g.onnx", tmp_path / "s.onnx", matmuls, [{"x": _outlier_input()}])
    assert (done["folded_into_layernorm"], done["scaled_by_mul"]) == (1, 1)


def test_smoothing_lowers_the_dynamic_int8_error_on_outlier_activations(tmp_path: Path) -> None:
    """The reason to smooth: per-tensor dynamic int8 of an input with an outlier channel loses the other channels."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    matmuls = _graph(tmp_path / "g.onnx", residual=True)
    smooth_graph(tmp_path / "g.onnx", tmp_path / "s.onnx", matmuls, [{"x": _outlier_input()}])
    x = _outlier_input(64)
    reference = _run(tmp_path / "g.onnx", x)
    errors = {}
    for name in ("g", "s"):
        quantize_dynamic(str(tmp_path / f"{name}.onnx"), str(tmp_path / f"{name}-int8.onnx"),
                         weight_type=QuantType.QInt8, per_channel=True, reduce_range=True,
                         op_types_to_quantize=["MatMul"])
        got = _run(tmp_path / f"{name}-int8.onnx", x)
        errors[name] = max(float(np.abs(a - r).max() / np.abs(r).max()) for a, r in zip(got, reference, strict=True))
    assert errors["s"] < errors["g"] / 2, errors


@pytest.mark.parametrize(("x_max", "w_max", "alpha", "expected"), [
    (4.0, 1.0, 0.5, 2.0),  # sqrt(4) / 1
    (1.0, 4.0, 0.5, 0.5),  # 1 / sqrt(4)
    (9.0, 1.0, 1.0, 9.0),  # alpha 1: all of the range moves to the weights
    (0.0, 3.0, 0.5, 1.0),  # a dead channel keeps its scale
])
def test_smoothing_scales(x_max: float, w_max: float, alpha: float, expected: float) -> None:
    weights = [np.full((1, 3), w_max, np.float32)]
    assert smoothing_scales(np.array([x_max], np.float32), weights, alpha) == pytest.approx([expected])
