"""SmoothQuant-style scale migration: an exact FP32 rewrite that moves activation outliers into the weights.

A few hidden channels of a BERT-family encoder carry activations far larger than the rest, and a
per-tensor int8 scale sized for them leaves every other channel a handful of levels. For each group of
encoder MatMuls that read one activation X (Q/K/V read the same one), channel j is divided by

    s_j = max|X_j| ** alpha / max|W_j| ** (1 - alpha)        (max|W_j| over the group's weight rows j)

and the weight rows j are multiplied by it: X W = (X / s)(s W), the same product. `max|X_j|` comes from
running the FP32 graph on calibration cases (`search/calibration.py`). The division is folded into the
LayerNorm that produced X (its scale and bias) when nothing else reads that LayerNorm's output but
the group and Shape nodes (pre-LN encoders such as ModernBERT's MLP input); otherwise, e.g. when the
residual also reads X (post-LN BERT) or X is an activation function's output, one per-channel Mul is
inserted for the group alone.

onnxruntime.quantization's own SmoothQuant option delegates to Intel Neural Compressor, a dependency
of its own the runtime does not need at build time either; this module is that rewrite in numpy.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from laya_artifacts.errors import SearchError

ALPHA = 0.5  # SmoothQuant's default balance between activation and weight ranges
_FLOOR = 1e-5  # no scale (nor max) below this: a dead channel keeps s = 1


def activation_maxima(graph: Path, tensors: Sequence[str], feeds: Iterable[dict[str, np.ndarray]]) -> dict[str, Any]:
    """max |x| per last-axis channel of each of `tensors`, over every position of every feed."""
    import onnx
    import onnxruntime as ort

    model = onnx.load(str(graph))
    for name in tensors:
        model.graph.output.append(onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None))
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # read tensors as exported
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    maxima: dict[str, Any] = {}
    for feed in feeds:
        for name, value in zip(tensors, session.run(list(tensors), feed), strict=True):
            channel_max = np.abs(value).reshape(-1, value.shape[-1]).max(axis=0)
            maxima[name] = channel_max if name not in maxima else np.maximum(maxima[name], channel_max)
    if len(maxima) != len(tensors):
        raise SearchError("no calibration cases: smoothing needs activations to measure")
    return maxima


def smoothing_scales(x_max: np.ndarray, weights: Sequence[np.ndarray], alpha: float) -> np.ndarray:
    """The per-channel scale s (see the module docstring) for one activation and the weights that read it."""
    w_max = np.max(np.abs(np.concatenate(list(weights), axis=1)), axis=1)
    scales = np.maximum(x_max, _FLOOR) ** alpha / np.maximum(w_max, _FLOOR) ** (1 - alpha)
    dead = (x_max < _FLOOR) | (w_max < _FLOOR)
    return np.where(dead, 1.0, np.maximum(scales, _FLOOR)).astype(np.float32)


class _Graph:
    """The parts of an ONNX graph a rewrite needs: initializers by name, producers and consumers by tensor."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.initializers = {i.name: i for i in model.graph.initializer}
        self.producer = {out: node for node in model.graph.node for out in node.output}
        self.consumers: dict[str, list[Any]] = defaultdict(list)
        for node in model.graph.node:
            for name in node.input:
                self.consumers[name].append(node)

    def array(self, name: str) -> np.ndarray:
        from onnx import numpy_helper

        return numpy_helper.to_array(self.initializers[name])

    def replace(self, node: Any, index: int, value: np.ndarray, suffix: str) -> None:
        """Point `node`'s input `index` at a new initializer holding `value`: the old one may be shared (the
        exporter keeps one copy of equal tensors, e.g. every LayerNorm's ones), so the new name is the node's."""
        from onnx import numpy_helper

        name = "%s/input%d/%s" % (node.name, index, suffix)
        self.model.graph.initializer.append(numpy_helper.from_array(value.astype(np.float32), name))
        node.input[index] = name

    def foldable_layernorm(self, tensor: str, group: Sequence[Any]) -> Any:
        """The LayerNormalization producing `tensor` if only `group` (and Shape nodes) read it, else None."""
        node = self.producer.get(tensor)
        if node is None or node.op_type != "LayerNormalization" or list(node.output).index(tensor) != 0:
            return None
        readers = [c for c in self.consumers[tensor] if c.op_type != "Shape"]
        params = [n for n in node.input[1:] if n]
        if {c.name for c in readers} != {m.name for m in group} or not all(p in self.initializers for p in params):
            return None
        return node


def smooth_graph(graph: Path, out: Path, matmuls: Sequence[str], feeds: Sequence[dict[str, np.ndarray]],
                 alpha: float = ALPHA) -> dict[str, Any]:
    """Write `graph` with `matmuls` smoothed to `out`; returns what was done, for the recipe."""
    import onnx

    model = onnx.load(str(graph))
    g = _Graph(model)
    groups: dict[str, list[Any]] = defaultdict(list)
    order = {node.name: i for i, node in enumerate(model.graph.node)}
    wanted = set(matmuls)
    for node in model.graph.node:
        if node.name in wanted and node.input[1] in g.initializers:
            groups[node.input[0]].append(node)
    maxima = activation_maxima(graph, list(groups), feeds)
    folded, muls, largest = 0, {}, 0.0
    for tensor, group in groups.items():
        weights = [g.array(m.input[1]) for m in group]
        scales = smoothing_scales(maxima[tensor], weights, alpha)
        largest = max(largest, float(scales.max() / scales.min()))
        for matmul, weight in zip(group, weights, strict=True):
            g.replace(matmul, 1, weight * scales[:, None], "smoothed")
        layernorm = g.foldable_layernorm(tensor, group)
        if layernorm is not None:
            for index in range(1, len(layernorm.input)):
                if layernorm.input[index]:
                    g.replace(layernorm, index, g.array(layernorm.input[index]) / scales, "smoothed")
            folded += 1
        else:
            muls[min(group, key=lambda m: order[m.name]).name] = _smoothing_mul(g, tensor, group, 1.0 / scales)
    nodes = list(model.graph.node)  # each Mul goes right before the first MatMul it feeds: still topological
    del model.graph.node[:]
    for node in nodes:
        model.graph.node.extend([muls[node.name]] if node.name in muls else [])
        model.graph.node.append(node)
    used = {name for node in model.graph.node for name in node.input}
    kept = [i for i in model.graph.initializer if i.name in used]  # the weights before smoothing are unused now
    del model.graph.initializer[:]
    model.graph.initializer.extend(kept)
    onnx.save(model, str(out))
    return {"method": "SmoothQuant scale migration (exact FP32 rewrite)", "alpha": alpha, "groups": len(groups),
            "folded_into_layernorm": folded, "scaled_by_mul": len(muls), "calibration_cases": len(feeds),
            "largest_scale_ratio": largest}


def _smoothing_mul(g: _Graph, tensor: str, group: Sequence[Any], inverse: np.ndarray) -> Any:
    """X / s for `group` alone: a Mul node (returned, for the caller to place) that `group` now reads."""
    import onnx
    from onnx import numpy_helper

    scaled, factor = tensor + "/smoothed", tensor + "/smoothing_inverse"
    g.model.graph.initializer.append(numpy_helper.from_array(inverse.astype(np.float32), factor))
    for matmul in group:
        matmul.input[0] = scaled
    return onnx.helper.make_node("Mul", [tensor, factor], [scaled], name=tensor + "/SmoothingMul")
