"""The serving session gives its arena back after each run: one large pass does not raise RSS for good.

onnxruntime's CPU arena grows to the largest pass and kept it: a batch of long, deeply nested states took a server
from 287 MB to 847 MB, and it stayed there. A tiny graph with a large intermediate shows the same on any machine."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

from laya_serverless.core.session import OnnxDecisionSession

GROWN_MB = 128  # the large pass's float intermediates: 4096 x 4096 x 4 bytes = 64 MiB, twice


def _graph(path: Path) -> Path:
    """The five graph inputs; logits and act_logits from a sum over a float copy of `input_ids` (the large part)."""
    def value(name: str, kind: int, shape: list[str | int]) -> onnx.ValueInfoProto:
        return helper.make_tensor_value_info(name, kind, shape)

    nodes = [helper.make_node("Cast", ["input_ids"], ["wide"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["wide", "wide"], ["squared"]),
             helper.make_node("ReduceSum", ["squared"], ["summed"], keepdims=1),
             helper.make_node("Cast", ["marker_mask"], ["mask"], to=TensorProto.FLOAT),
             helper.make_node("Add", ["mask", "summed"], ["logits"]),
             helper.make_node("Identity", ["summed"], ["act_logits"])]
    inputs = [value("input_ids", TensorProto.INT64, ["r", "t"]), value("attention_mask", TensorProto.INT64, ["r", "t"]),
              value("marker_pos", TensorProto.INT64, ["r", "o"]), value("marker_mask", TensorProto.BOOL, ["r", "o"]),
              value("qtype", TensorProto.INT64, ["r"])]
    outputs = [value("logits", TensorProto.FLOAT, ["r", "o"]), value("act_logits", TensorProto.FLOAT, ["r", 1])]
    model = helper.make_model(helper.make_graph(nodes, "arena", inputs, outputs),
                              opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(path))
    return path


def _feeds(rows: int, tokens: int) -> dict[str, np.ndarray]:
    return {"input_ids": np.ones((rows, tokens), np.int64), "attention_mask": np.ones((rows, tokens), np.int64),
            "marker_pos": np.zeros((rows, 2), np.int64), "marker_mask": np.ones((rows, 2), bool),
            "qtype": np.zeros(rows, np.int64)}


def _rss_mb() -> int:
    return int(Path("/proc/self/statm").read_text().split()[1]) * 4096 >> 20


def test_one_large_pass_does_not_keep_its_memory(tmp_path: Path) -> None:
    session = OnnxDecisionSession(_graph(tmp_path / "model.onnx"), threads=1)
    session.run(_feeds(2, 8))
    before = _rss_mb()
    large = _feeds(4096, 4096)
    logits, _ = session.run(large)
    assert logits.shape == (4096, 2)
    del large
    session.run(_feeds(2, 8))
    # A kept arena holds at least GROWN_MB; half of it leaves room for the allocator's own slack (32 MB was seen
    # once after other tests had run in the same process).
    assert _rss_mb() - before < GROWN_MB // 2, (before, _rss_mb())
