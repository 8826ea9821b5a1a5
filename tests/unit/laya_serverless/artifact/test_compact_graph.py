"""A compact graph's FP16-stored weights are found in its protobuf, without the onnx package, and each goes one way:
in place (only Gathers read it), folded by onnxruntime as stored (within `FOLD_SHARE`), or widened; the graph laid
out for onnxruntime is valid ONNX with the widened weights in FP32 under their Casts' names and those Casts gone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from laya_serverless.artifact import compact
from laya_serverless.artifact.compact import PLACEHOLDER, cast_model, dims, parts, scan


def _model(extra_nodes: list[Any] = (), outputs: tuple[str, ...] = ("y", "row")) -> onnx.ModelProto:   # type: ignore[assignment]
    """x @ w1 @ w2 and a Gather from `table`, each weight stored in FP16 behind a Cast; `shared` is FP16 read twice."""
    rng = np.random.default_rng(0)
    weights = {"w1": (8, 8), "w2": (8, 8), "table": (16, 8)}
    initializers = [numpy_helper.from_array(rng.standard_normal(s).astype(np.float16), n + ".fp16")
                    for n, s in weights.items()]
    initializers.append(numpy_helper.from_array(np.ones(8, np.float16), "shared"))
    nodes = [helper.make_node("Cast", [n + ".fp16"], [n], to=TensorProto.FLOAT, name="restore_fp32/" + n)
             for n in weights]
    nodes += [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("MatMul", ["h", "w2"], ["y"]),
              helper.make_node("Gather", ["table", "ids"], ["row"]),
              helper.make_node("Cast", ["shared"], ["shared32"], to=TensorProto.FLOAT),
              helper.make_node("Identity", ["shared"], ["shared16"]), *extra_nodes]
    value = {"y": ("y", TensorProto.FLOAT, [2, 8]), "row": ("row", TensorProto.FLOAT, [3, 8]),
             "shared32": ("shared32", TensorProto.FLOAT, [8]), "w1": ("w1", TensorProto.FLOAT, [8, 8])}
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8]),
                                           helper.make_tensor_value_info("ids", TensorProto.INT64, [3])],
                              [helper.make_tensor_value_info(*value[o]) for o in outputs], initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _ways(model: onnx.ModelProto, share: float, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.setattr(compact, "FOLD_SHARE", share)
    found = scan(model.SerializeToString())
    return {w.name: w.way for w in found[2]} if found else {}


def test_each_fp16_weight_read_only_by_a_cast_goes_one_way(monkeypatch: pytest.MonkeyPatch) -> None:
    model = _model()
    # the embedding-like table in place; w1 and w2 widened, or the first folded while it fits the share
    assert _ways(model, 0.0, monkeypatch) == {"w1": "widen", "w2": "widen", "table": "in-place"}
    # the share is of all the weights' FP32 bytes (1,024 here): 0.2 leaves room for w1's 128 FP16 bytes, not w2's too
    assert _ways(model, 0.2, monkeypatch) == {"w1": "fold", "w2": "widen", "table": "in-place"}
    # `shared` (two readers) is never among them; nothing but folds is nothing to do
    no_table = _model(outputs=("y",))
    no_table.graph.node.remove(next(n for n in no_table.graph.node if n.op_type == "Gather"))
    no_table.graph.node.remove(next(n for n in no_table.graph.node if n.output == ["table"]))
    assert _ways(no_table, 1.0, monkeypatch) == {}


def test_graph_ends_and_subgraphs_are_left_to_onnxruntime(monkeypatch: pytest.MonkeyPatch) -> None:
    assert "w1" not in _ways(_model(outputs=("y", "row", "w1")), 0.0, monkeypatch)   # a Cast's output is an output
    branch = helper.make_graph([helper.make_node("Identity", ["w2"], ["b"])], "branch", [],
                               [helper.make_tensor_value_info("b", TensorProto.FLOAT, [8, 8])])
    flag = numpy_helper.from_array(np.array(True), "flag")
    with_if = _model([helper.make_node("If", ["flag"], ["z"], then_branch=branch, else_branch=branch)])
    with_if.graph.initializer.append(flag)
    assert _ways(with_if, 0.0, monkeypatch) == {}   # a subgraph may read any outer weight


def _laid_out(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model `parts` lays out, its widened ranges widened here with numpy."""
    stored = model.SerializeToString()
    found = scan(stored)
    assert found is not None
    out = b""
    for part in parts(stored, *found):
        if part[0] == "bytes":
            out += part[1]
        elif part[0] == "copy":
            out += stored[part[1]:part[2]]
        else:
            out += np.frombuffer(stored[part[1]:part[2]], "<f2").astype("<f4").tobytes()
    return onnx.load_from_string(out)


def test_the_laid_out_graph_holds_fp32_weights_under_the_casts_names(monkeypatch: pytest.MonkeyPatch,
                                                                     tmp_path: Path) -> None:
    monkeypatch.setattr(compact, "FOLD_SHARE", 0.2)
    model = _model()
    laid = _laid_out(model)
    (tmp_path / "model.onnx").write_bytes(laid.SerializeToString())
    (tmp_path / PLACEHOLDER).write_bytes(bytes(16 * 8 * 4))   # as the runtime declares it (there, sparse)
    onnx.checker.check_model(str(tmp_path / "model.onnx"), full_check=True)
    stored = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    kinds = {t.name: t for t in laid.graph.initializer}
    assert numpy_helper.to_array(kinds["w2"]).tobytes() == stored["w2.fp16"].astype(np.float32).tobytes()
    assert kinds["w1.fp16"].data_type == TensorProto.FLOAT16   # folded by onnxruntime, as stored
    table = kinds["table"]   # in place: declared, its bytes elsewhere
    assert (table.data_type, list(table.dims), table.data_location) == (TensorProto.FLOAT, [16, 8],
                                                                         TensorProto.EXTERNAL)
    assert {e.key: e.value for e in table.external_data}["location"] == PLACEHOLDER
    casts = [n.input[0] for n in laid.graph.node if n.op_type == "Cast"]
    assert sorted(casts) == ["shared", "w1.fp16"]
    assert [n.op_type for n in laid.graph.node if n.op_type != "Cast"] == ["MatMul", "MatMul", "Gather", "Identity"]
    assert dims(model.SerializeToString(), _message_of(model, "table.fp16")) == [16, 8]


def _message_of(model: onnx.ModelProto, name: str) -> tuple[int, int]:
    found = scan(model.SerializeToString())
    assert found is not None
    return next(w.message for w in found[2] if w.name == name.removesuffix(".fp16"))


def test_the_cast_model_is_a_valid_fp16_to_fp32_cast() -> None:
    model = onnx.load_from_string(cast_model())
    onnx.checker.check_model(model, full_check=True)
    (node,) = model.graph.node
    assert (node.op_type, node.attribute[0].i) == ("Cast", TensorProto.FLOAT)
    assert [i.type.tensor_type.elem_type for i in (*model.graph.input, *model.graph.output)] == [
        TensorProto.FLOAT16, TensorProto.FLOAT]


@pytest.mark.parametrize("stored", [b"\x0a", b"\x3a\xff\xff\xff\x0f"])   # a cut varint; a length past the end
def test_a_malformed_model_is_refused(stored: bytes) -> None:
    with pytest.raises((ValueError, IndexError)):
        scan(stored)
