"""The runtime's session computes with denormal floats flushed to zero (why: `core/session.py`).

onnxruntime applies the setting to the calling thread once per process, at its first session, so each case runs in
a fresh interpreter: the decision session first, and a plain onnxruntime session as the control.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

_RUN = r"""
import json, sys
import numpy as np
graph, kind = sys.argv[1], sys.argv[2]
feeds = {"input_ids": np.ones((1, 3), np.int64), "attention_mask": np.ones((1, 3), np.int64),
         "marker_pos": np.zeros((1, 2), np.int64), "marker_mask": np.ones((1, 2), bool), "qtype": np.zeros(1, np.int64)}
if kind == "decision":
    from pathlib import Path
    from laya_serverless.core.session import OnnxDecisionSession
    logits, _ = OnnxDecisionSession(Path(graph)).run(feeds)
else:
    import onnxruntime as ort
    logits = ort.InferenceSession(graph, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
print(json.dumps(float(np.asarray(logits).ravel()[0])))
"""


def _denormal_graph(path: Path) -> None:
    """The five decision-graph inputs; both outputs are 1e-20 * 1e-20 = 1e-40, a denormal float32."""
    from onnx import TensorProto, helper, numpy_helper

    ints = ("input_ids", "attention_mask", "marker_pos", "qtype")
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, None) for n in ints]
    inputs.append(helper.make_tensor_value_info("marker_mask", TensorProto.BOOL, None))
    tiny = numpy_helper.from_array(np.array(1e-20, np.float32), "tiny")
    nodes = [helper.make_node("Cast", ["input_ids"], ["x"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["x", "tiny"], ["small"]), helper.make_node("Mul", ["small", "tiny"], ["logits"]),
             helper.make_node("Identity", ["logits"], ["act_logits"])]
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("logits", "act_logits")]
    graph = helper.make_graph(nodes, "denormal", inputs, outputs, [tiny])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def _first_output(graph: Path, kind: str) -> float:
    run = subprocess.run([sys.executable, "-c", _RUN, str(graph), kind], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    return float(json.loads(run.stdout.strip().splitlines()[-1]))


def test_the_decision_session_flushes_denormals_and_plain_onnxruntime_does_not(tmp_path: Path) -> None:
    _denormal_graph(tmp_path / "g.onnx")
    assert 0 < _first_output(tmp_path / "g.onnx", "plain") < 1e-38   # the control: a denormal comes out
    assert _first_output(tmp_path / "g.onnx", "decision") == 0.0
