"""The FP16 graph is valid ONNX whatever onnxruntime's converter left, and runs within the FP16 tolerance.

The converters of onnxruntime 1.31 and 1.32 both left invalid graphs (nodes out of order; 1.31 also one Cast
per reader, all writing the same tensor under one node name, which onnxruntime-gpu 1.31 refused on an H200):
`make_valid` is tested on a graph with those defects, and every converted graph on the full checker.
The numbers here come from the CPU provider: the gate proper runs on the GPU that builds (docs/gpu.md).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from laya_artifacts.export.cuda import MAX_IR_VERSION, convert_fp16, make_valid
from laya_serverless.artifact.layout import DECODE_CONFIG_FILE, GRAPH_FILE, TOKENIZER_FILE
from laya_serverless.gate.replay import TOLERANCES, run_gate
from tests.conftest import golden_slice


def _model(nodes: list[object], ir_version: int = 14) -> object:
    from onnx import TensorProto, helper

    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = ir_version
    return model


def _cast(to: int, source: str, out: str) -> object:
    from onnx import helper

    return helper.make_node("Cast", [source], [out], to=to, name=out + "_node")


def test_make_valid_mends_what_the_converters_left_and_the_full_checker_passes() -> None:
    import onnx
    from onnx import TensorProto, helper

    half, single = TensorProto.FLOAT16, TensorProto.FLOAT
    model = _model([
        helper.make_node("Add", ["x_fp32", "x_fp32"], ["y"], name="add"),   # reads a tensor written further down
        _cast(single, "x_fp16", "x_fp32"),
        _cast(single, "x_fp16", "x_fp32"),                                   # 1.31: the same Cast again, per reader
        _cast(half, "x", "x_fp16"),
        helper.make_node("Identity", ["x"], ["unused"], name="add"),          # a second node named alike
    ])
    with pytest.raises(onnx.checker.ValidationError, match=r"topologically sorted"):
        onnx.checker.check_model(model, full_check=True)
    assert make_valid(model) == {"repeated_nodes_removed": 1, "nodes_renamed": 1, "nodes_reordered": 2}
    assert [n.name for n in model.graph.node] == ["x_fp16_node", "x_fp32_node", "add", "add_2"]
    assert model.ir_version == MAX_IR_VERSION <= 13   # onnxruntime 1.31 reads IR <= 13


@pytest.mark.parametrize(("nodes", "message"), [
    ([_cast(1, "x", "y"), _cast(10, "x", "y")], r"nodes 'y_node' and 'y_node' both write 'y'"),
    ([_cast(1, "z", "y"), _cast(1, "y", "z")], r"the graph has a cycle through 2 nodes"),
])
def test_make_valid_refuses_what_no_reordering_can_mend(nodes: list[object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make_valid(_model(nodes))


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["tiny-modernbert", "minilm"])
def test_the_fp16_graph_passes_the_full_checker_and_the_fp16_tolerance_on_the_cpu_provider(
        kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """Every fourth case of the committed corpus, at the gate's own FP16 tolerance (0.02, no hard mismatch)."""
    import onnx

    export = request.getfixturevalue(kind.replace("-", "_"))[1]
    recipe = convert_fp16(export / GRAPH_FILE, tmp_path / GRAPH_FILE)
    model = onnx.load(str(tmp_path / GRAPH_FILE))
    onnx.checker.check_model(model, full_check=True)
    assert len({n.name for n in model.graph.node}) == len(model.graph.node)
    assert model.ir_version <= 13 and recipe["onnx_checker"] == "full_check passed"
    for name in (TOKENIZER_FILE, DECODE_CONFIG_FILE):
        shutil.copy(export / name, tmp_path / name)
    goldens = golden_slice(kind, keep_case=lambda i, _row: i % 4 == 0)
    report = run_gate(tmp_path, goldens, "cuda-fp16", device="cpu")
    assert report.rows > 100 and report.passed, report.failures
    assert max(report.max_probability_error, report.max_action_error) <= TOLERANCES["cuda-fp16"] == 0.02
