"""A compact graph's FP16-stored weights, found in its protobuf, and the graph onnxruntime reads in their place.

The build's compact storage (`laya_artifacts.export.compact`) keeps a weight in FP16 behind a `Cast` to FP32.
`scan` finds every such weight (an FP16 initializer read by nothing but one Cast to FLOAT) and decides how it goes
into onnxruntime (`core.restore`): read in place, folded by onnxruntime as stored, or widened. `parts` is the
rewritten model as a list of byte ranges of the stored one, literal bytes and ranges to widen, in order. The graph
is read as protobuf without the `onnx` package (the runtime does not ship it): only the fields that decide are
decoded, and everything else is passed on byte for byte.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["FOLD_SHARE", "PLACEHOLDER", "Part", "Weight", "cast_model", "dims", "parts", "scan"]

_VARINT, _FIXED64, _LEN, _FIXED32 = 0, 1, 2, 5
# onnx.proto field numbers: ModelProto.graph; GraphProto node, initializer, input, output; NodeProto input, output,
# op_type, attribute, domain; AttributeProto name, i, g, graphs; TensorProto dims, data_type, name, raw_data
_MODEL_GRAPH = 7
_NODE, _INITIALIZER, _INPUT, _OUTPUT = 1, 5, 11, 12
_NODE_IN, _NODE_OUT, _NODE_OP, _NODE_ATTR, _NODE_DOMAIN = 1, 2, 4, 5, 7
_ATTR_NAME, _ATTR_INT, _ATTR_GRAPH, _ATTR_GRAPHS = 1, 3, 6, 11
_DIMS, _DATA_TYPE, _NAME, _RAW, _EXTERNAL_DATA, _DATA_LOCATION = 1, 2, 8, 9, 13, 14
_OTHER_DATA = {3, 4, 5, 6, 7, 10, 11, 13, 14}   # a tensor's data held or placed otherwise: left as stored
_FLOAT, _FLOAT16, _EXTERNAL = 1, 10, 1
FOLD_SHARE = 0.2             # of the weights' FP32 bytes, at most this much in FP16 is left for onnxruntime to fold
PLACEHOLDER = "in-place.bin"  # where in-place weights are declared to live: a sparse file onnxruntime never reads
Span = tuple[int, int]


def _varint(buf: Any, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        byte = buf[pos]
        pos, value, shift = pos + 1, value | (byte & 0x7F) << shift, shift + 7
        if byte < 0x80:
            return value, pos
        if shift > 63:
            raise ValueError("varint too long")


def _fields(buf: Any, span: Span) -> Iterator[tuple[int, int, int, int, int]]:
    """(field number, wire type, where the field starts, where its value starts, where it ends) of one message."""
    pos, end = span
    while pos < end:
        begin = pos
        key, pos = _varint(buf, pos)
        wire = key & 7
        if wire == _VARINT:
            value, pos = pos, _varint(buf, pos)[1]
        elif wire in (_FIXED64, _FIXED32):
            value, pos = pos, pos + (8 if wire == _FIXED64 else 4)
        elif wire == _LEN:
            size, value = _varint(buf, pos)
            pos = value + size
        else:
            raise ValueError("unsupported wire type %d" % wire)
        if pos > end:
            raise ValueError("a field runs past its message")
        yield key >> 3, wire, begin, value, pos


def _encode(value: int) -> bytes:
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _tag(number: int, wire: int) -> bytes:
    return _encode(number << 3 | wire)


def _text(number: int, value: str) -> bytes:
    data = value.encode("utf-8")
    return _tag(number, _LEN) + _encode(len(data)) + data


def _message(number: int, body: bytes) -> bytes:
    return _tag(number, _LEN) + _encode(len(body)) + body


def _str(buf: Any, start: int, end: int) -> str:
    return bytes(buf[start:end]).decode("utf-8")


@dataclass
class Weight:
    """An FP16 initializer read only by a Cast to FP32, and which way it goes in (see the module)."""

    place: Span     # the initializer's field in the graph
    message: Span   # its TensorProto
    raw: Span       # its raw_data
    cast: Span      # the Cast node's field in the graph
    name: str       # the Cast's output: the FP32 tensor's name
    way: str        # "in-place", "fold" or "widen"


def _node(buf: Any, span: Span) -> tuple[str, list[str], list[str], int | None, bool]:
    """(op_type, with its domain unless ONNX's, inputs, outputs, its `to` attribute, whether it holds a subgraph)."""
    inputs: list[str] = []
    outputs: list[str] = []
    op, domain, to, nested = "", "", None, False
    for number, _wire, _begin, value, stop in _fields(buf, span):
        if number in (_NODE_IN, _NODE_OUT):
            (inputs if number == _NODE_IN else outputs).append(_str(buf, value, stop))
        elif number in (_NODE_OP, _NODE_DOMAIN):
            op, domain = (_str(buf, value, stop), domain) if number == _NODE_OP else (op, _str(buf, value, stop))
        elif number == _NODE_ATTR:
            attribute = {n: (v, s) for n, _w, _b, v, s in _fields(buf, (value, stop))}
            nested = nested or _ATTR_GRAPH in attribute or _ATTR_GRAPHS in attribute
            if _ATTR_INT in attribute and _str(buf, *attribute.get(_ATTR_NAME, (0, 0))) == "to":
                to = _varint(buf, attribute[_ATTR_INT][0])[0]
    return (op if domain in ("", "ai.onnx") else domain + "::" + op), inputs, outputs, to, nested


def _fp16_tensor(buf: Any, span: Span) -> tuple[str, Span] | None:
    """(name, raw_data) of an FP16 tensor whose bytes are all in raw_data; None for any other tensor."""
    name, kind, raw, other = "", None, None, False
    for number, _wire, _begin, value, stop in _fields(buf, span):
        if number == _NAME:
            name = _str(buf, value, stop)
        elif number == _DATA_TYPE:
            kind = _varint(buf, value)[0]
        elif number == _RAW:
            raw = (value, stop)
        other = other or number in _OTHER_DATA
    return (name, raw) if kind == _FLOAT16 and raw and (raw[1] - raw[0]) % 2 == 0 and not other else None


def _ways(weights: list[Weight]) -> list[Weight]:
    """Which weights onnxruntime folds: in graph order, while their FP16 bytes stay within `FOLD_SHARE` of all the
    weights' FP32 bytes; in-place ones excepted."""
    room = FOLD_SHARE * sum(2 * (w.raw[1] - w.raw[0]) for w in weights)
    for weight in sorted(weights, key=lambda w: w.place):
        size = weight.raw[1] - weight.raw[0]
        if weight.way == "widen" and size <= room:
            weight.way, room = "fold", room - size
    return sorted(weights, key=lambda w: w.place)


def scan(buf: Any) -> tuple[list[tuple[int, int, int, int, int]], Span, list[Weight]] | None:
    """(the model's fields, the graph's span, its FP16-stored weights and their ways) of the serialized model `buf`;
    None when onnxruntime would fold them all anyway, or a subgraph could read them (left to onnxruntime)."""
    model = list(_fields(buf, (0, len(buf))))
    graphs = [(value, stop) for number, wire, _b, value, stop in model if number == _MODEL_GRAPH and wire == _LEN]
    if len(graphs) != 1:
        return None
    casts: dict[str, tuple[Span, str]] = {}
    readers: dict[str, list[tuple[str, int]]] = {}
    tensors: dict[str, tuple[Span, Span, Span]] = {}
    ends: set[str] = set()   # the graph's inputs and outputs: never rewritten
    for number, wire, begin, value, stop in _fields(buf, graphs[0]):
        if number == _NODE and wire == _LEN:
            op, inputs, outputs, to, nested = _node(buf, (value, stop))
            if nested:
                return None
            for index, name in enumerate(inputs):
                readers.setdefault(name, []).append((op, index))
            if op == "Cast" and to == _FLOAT and len(inputs) == 1 and len(outputs) == 1:
                casts[inputs[0]] = ((begin, stop), outputs[0])
        elif number == _INITIALIZER and wire == _LEN:
            found = _fp16_tensor(buf, (value, stop))
            if found:
                tensors[found[0]] = ((begin, stop), (value, stop), found[1])
        elif number in (_INPUT, _OUTPUT) and wire == _LEN:
            ends.update(_str(buf, v, s) for n, _w, _b, v, s in _fields(buf, (value, stop)) if n == 1)
    weights = _ways([Weight(*tensors[stored], cast, name,
                             "in-place" if all(r == ("Gather", 0) for r in readers.get(name, [("", 0)])) else "widen")
                     for stored, (cast, name) in casts.items()
                     if stored in tensors and not {stored, name} & ends and len(readers[stored]) == 1])
    return (model, graphs[0], weights) if any(w.way != "fold" for w in weights) else None


def dims(buf: Any, span: Span) -> list[int]:
    dims: list[int] = []
    for number, _wire, _begin, value, stop in _fields(buf, span):
        while number == _DIMS and value < stop:   # one varint, or packed ones
            dim, value = _varint(buf, value)
            dims.append(dim)
    return dims


def _header(buf: Any, weight: Weight, size: int) -> bytes:
    """The FP32 tensor's initializer field up to its data: the stored tensor's other fields, FLOAT, the Cast's
    output name, then raw_data's tag and length, or (in place) the sparse file it is declared to live in."""
    kept = b"".join(bytes(buf[b:s]) for n, _w, b, _v, s in _fields(buf, weight.message)
                    if n not in (_DATA_TYPE, _NAME, _RAW))
    body = kept + _tag(_DATA_TYPE, _VARINT) + _encode(_FLOAT) + _text(_NAME, weight.name)
    if weight.way == "widen":
        body += _tag(_RAW, _LEN) + _encode(size)
        return _tag(_INITIALIZER, _LEN) + _encode(len(body) + size) + body
    for key, value in (("location", PLACEHOLDER), ("offset", "0"), ("length", str(size))):
        body += _message(_EXTERNAL_DATA, _text(1, key) + _text(2, value))   # StringStringEntryProto
    return _message(_INITIALIZER, body + _tag(_DATA_LOCATION, _VARINT) + _encode(_EXTERNAL))


# What the stream writes, in order: ("copy", start, end) of the source, ("bytes", b"..."), ("widen", start, end).
Part = tuple[Any, ...]


def parts(buf: Any, model: list[tuple[int, int, int, int, int]], graph: Span, weights: list[Weight]) -> list[Part]:
    moved = {w.place[0]: w for w in weights if w.way != "fold"}
    dropped = {w.cast[0] for w in weights if w.way != "fold"}
    inner: list[Part] = []
    for _number, _wire, begin, _value, stop in _fields(buf, graph):
        weight = moved.get(begin)
        if weight is not None:
            inner.append(("bytes", _header(buf, weight, 2 * (weight.raw[1] - weight.raw[0]))))
            inner += [("widen", *weight.raw)] if weight.way == "widen" else []
        elif begin not in dropped:
            inner.append(("copy", begin, stop))
    size = sum(len(p[1]) if p[0] == "bytes" else (p[2] - p[1]) * (2 if p[0] == "widen" else 1) for p in inner)
    parts: list[Part] = []
    for number, _wire, begin, _value, stop in model:
        parts += [("bytes", _tag(_MODEL_GRAPH, _LEN) + _encode(size)), *inner] if number == _MODEL_GRAPH else \
            [("copy", begin, stop)]
    return parts


def cast_model() -> bytes:
    """A model of one Cast from FP16 to FP32 over a vector: onnxruntime's own kernel widens the weights."""
    def vector(name: str, kind: int) -> bytes:   # ValueInfoProto: name, TypeProto.tensor_type (elem_type, shape)
        shape = _message(2, _message(1, _text(2, "n")))
        return _text(1, name) + _message(2, _message(1, _tag(1, _VARINT) + _encode(kind) + shape))
    to = _text(1, "to") + _tag(3, _VARINT) + _encode(_FLOAT) + _tag(20, _VARINT) + _encode(2)   # an INT attribute
    node = _text(1, "x") + _text(2, "y") + _text(4, "Cast") + _message(5, to)
    graph = _message(1, node) + _text(2, "widen") + _message(11, vector("x", _FLOAT16)) + \
        _message(12, vector("y", _FLOAT))
    opset = _text(1, "") + _tag(2, _VARINT) + _encode(17)
    return _tag(1, _VARINT) + _encode(8) + _message(8, opset) + _message(_MODEL_GRAPH, graph)
