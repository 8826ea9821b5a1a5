"""The serving session gives its arena back after each run: one large pass does not raise RSS for good.

onnxruntime's CPU arena grows to the largest pass and kept it: a batch of long, deeply nested states took a server
from 287 MB to 847 MB, and it stayed there. A tiny graph with a large intermediate shows the same on any machine."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

from laya_serverless.core.session import OnnxDecisionSession
from tests.paths import ROOT

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


def grown_mb(graph: Path) -> tuple[int, int]:
    """RSS before one large pass and after it (and a small one), in this process."""
    session = OnnxDecisionSession(_graph(graph), threads=1)
    session.run(_feeds(2, 8))
    before = _rss_mb()
    large = _feeds(4096, 4096)
    logits, _ = session.run(large)
    assert logits.shape == (4096, 2)
    del large
    session.run(_feeds(2, 8))
    return before, _rss_mb()


def test_one_large_pass_does_not_keep_its_memory(tmp_path: Path) -> None:
    # In a fresh process: a worker that ran other suites first carries their allocator's state (324 MB of it was
    # seen once under `-n 2`), which says nothing about this session.
    code = ("import json, sys; from pathlib import Path; "
            "from tests.functional.laya_serverless.core.test_session_memory import grown_mb; "
            "print(json.dumps(grown_mb(Path(sys.argv[1]))))")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "model.onnx")], capture_output=True, text=True,
                          cwd=ROOT, check=True)
    before, after = json.loads(done.stdout.strip().splitlines()[-1])
    # A kept arena holds at least GROWN_MB; half of it leaves room for the allocator's own slack.
    assert after - before < GROWN_MB // 2, (before, after)
