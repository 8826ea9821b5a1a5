"""The encoder's position limit is read from the graph's position-embedding table, without the onnx package."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from laya_serverless.artifact.positions import graph_positions
from laya_serverless.errors import ArtifactError


def _graph(path: Path, tables: dict[str, tuple[int, int]]) -> Path:
    initializers = [numpy_helper.from_array(np.zeros(shape, dtype=np.float32), name) for name, shape in tables.items()]
    initializers.append(numpy_helper.from_array(np.ones((7, 3), dtype=np.float32), "encoder.word_embeddings.weight"))
    ids = helper.make_tensor_value_info("ids", TensorProto.INT64, ["n"])
    out = helper.make_tensor_value_info("out", TensorProto.FLOAT, ["n", 3])
    node = helper.make_node("Gather", ["encoder.word_embeddings.weight", "ids"], ["out"])
    model = helper.make_model(helper.make_graph([node], "g", [ids], [out], initializers), producer_name="test")
    path.write_bytes(model.SerializeToString())
    onnx.checker.check_model(str(path))
    return path


@pytest.mark.parametrize(("tables", "expected"), [
    ({"encoder.embeddings.position_embeddings.weight": (512, 8)}, 512),
    ({"encoder.embeddings.position_embeddings.weight_quantized": (128, 8)}, 128),   # an int8 graph's name
    ({"a.position_embeddings.weight": (512, 8), "b.position_embeddings.weight": (256, 8)}, 256),
    ({}, None),   # rotary (ModernBERT): no table, no limit from the graph
])
def test_the_position_limit_is_the_position_table_s_rows(tmp_path: Path, tables: dict[str, tuple[int, int]],
                                                         expected: int | None) -> None:
    assert graph_positions(_graph(tmp_path / "model.onnx", tables)) == expected


def test_packed_dims_are_read_too(tmp_path: Path) -> None:
    """onnx writes dims unpacked (proto2); a proto3 writer packs them: a hand-made model with one packed table."""
    name = b"x.position_embeddings.weight"
    packed = bytes([0x0A, 3]) + bytes([0x80, 0x04, 8])   # field 1, packed varints 512, 8
    tensor = packed + bytes([0x42, len(name)]) + name
    graph = bytes([0x2A, len(tensor)]) + tensor
    path = tmp_path / "model.onnx"
    path.write_bytes(bytes([0x08, 8]) + bytes([0x3A, len(graph)]) + graph)
    assert graph_positions(path) == 512


def test_an_unreadable_or_truncated_graph_is_an_artifact_error(tmp_path: Path) -> None:
    whole = _graph(tmp_path / "model.onnx", {"p.position_embeddings.weight": (512, 8)}).read_bytes()
    (tmp_path / "cut.onnx").write_bytes(whole[: len(whole) // 2])
    with pytest.raises(ArtifactError, match="is not a readable ONNX model"):
        graph_positions(tmp_path / "cut.onnx")
    with pytest.raises(ArtifactError, match="cannot be read"):
        graph_positions(tmp_path / "missing.onnx")
