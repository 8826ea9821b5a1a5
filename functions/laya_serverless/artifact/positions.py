"""The encoder's position limit, read from the graph: the rows of its learned position-embedding table.

A BERT-style encoder (MiniLM, the demo model) has a table of, say, 512 positions; a row longer than that
fails inside onnxruntime. Rotary encoders (ModernBERT) have no table and no limit here. The graph is read
as protobuf without the `onnx` package (the runtime does not ship it): only initializer names and shapes
are decoded, every other field (weights included) is skipped by its length, so a 600 MB graph costs a few
thousand seeks.
"""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO

from ..errors import ArtifactError

_MODEL_GRAPH, _GRAPH_INITIALIZER = 7, 5  # onnx.proto: ModelProto.graph, GraphProto.initializer
_TENSOR_DIMS, _TENSOR_NAME = 1, 8  # TensorProto.dims, TensorProto.name
_VARINT, _FIXED64, _LEN, _FIXED32 = 0, 1, 2, 5
POSITION_TABLE = "position_embeddings"  # in the initializer's name, quantized or not


def _varint(data: BinaryIO) -> int:
    shift = result = 0
    while True:
        byte = data.read(1)
        if not byte:
            raise EOFError
        result |= (byte[0] & 0x7F) << shift
        if byte[0] < 0x80:
            return result
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def _skip(data: BinaryIO, wire: int) -> None:
    if wire == _VARINT:
        _varint(data)
    elif wire == _FIXED64:
        data.seek(8, 1)
    elif wire == _LEN:
        data.seek(_varint(data), 1)
    elif wire == _FIXED32:
        data.seek(4, 1)
    else:
        raise ValueError("unsupported wire type %d" % wire)


def _tensor_shape(data: BinaryIO, end: int) -> tuple[str, list[int]]:
    name, dims = "", []
    while data.tell() < end:
        key = _varint(data)
        number, wire = key >> 3, key & 7
        if number == _TENSOR_DIMS and wire == _VARINT:
            dims.append(_varint(data))
        elif number == _TENSOR_DIMS and wire == _LEN:  # packed
            stop = _varint(data) + data.tell()
            while data.tell() < stop:
                dims.append(_varint(data))
        elif number == _TENSOR_NAME and wire == _LEN:
            name = data.read(_varint(data)).decode("utf-8", "replace")
        else:
            _skip(data, wire)
    data.seek(end)
    return name, dims


def _position_tables(data: BinaryIO) -> list[int]:
    rows: list[int] = []
    while True:
        try:
            key = _varint(data)
        except EOFError:
            return rows
        if key >> 3 == _MODEL_GRAPH and key & 7 == _LEN:
            graph_end = _varint(data) + data.tell()
            while data.tell() < graph_end:
                inner = _varint(data)
                if inner >> 3 == _GRAPH_INITIALIZER and inner & 7 == _LEN:
                    tensor_end = _varint(data) + data.tell()
                    name, dims = _tensor_shape(data, tensor_end)
                    if POSITION_TABLE in name and len(dims) == 2:
                        rows.append(dims[0])
                else:
                    _skip(data, inner & 7)
            return rows
        _skip(data, key & 7)


def graph_positions(graph: Path) -> int | None:
    """The positions the graph's encoder can embed (the smallest position table's rows), or None without a table."""
    try:
        with open(graph, "rb") as data:
            rows = _position_tables(data)
    except OSError as exc:
        raise ArtifactError("model graph %s cannot be read: %s" % (graph, exc)) from exc
    except (EOFError, ValueError) as exc:
        raise ArtifactError("model graph %s is not a readable ONNX model" % graph) from exc
    return min(rows) if rows else None
