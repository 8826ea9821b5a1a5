"""Lossless compact storage: an FP32 graph's large initializers stored in FP16 where that is exact.

A Laya checkpoint stores its weights in FP16 (upstream's `save_checkpoint`), so most of an FP32 export's
weights are FP16 values widened: storing them as FP16 loses nothing and halves the bytes to fetch, hash and
parse. Each such initializer is kept in FP16 under a new name and a `Cast` to FP32 recreates the original
name, so every consumer reads the same FP32 tensor. A tensor is stored in FP16 only if widening its FP16
copy gives back the very same bits; any other stays FP32. The runtime opens the graph at `RESTORE_LEVEL`
(recorded in the decode config), whose constant folding runs each `Cast` once, at load: the session then
holds the FP32 weights it held before and computes bit for bit what the FP32-stored graph computes. Under
`ORT_DISABLE_ALL` the Casts would run on every call instead.

The Casts are written here with `onnx.helper`, before every other node (their inputs are initializers, so
the graph stays topologically sorted), and the result must pass `onnx.checker`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from laya_artifacts.export.cuda import MAX_IR_VERSION

# The level whose constant folding turns each Cast back into an FP32 initializer at load (ORT's basic passes).
RESTORE_LEVEL = "ORT_ENABLE_BASIC"
# Smaller tensors (norms, biases) stay FP32: a few bytes saved would cost a node each.
MIN_ELEMENTS = 4096
FP16_SUFFIX = ".fp16"


def _exact_fp16(values: Any) -> Any | None:
    """`values` as FP16 if widening that copy back gives the same bits (signed zeros, NaN payloads included)."""
    import numpy as np

    half = values.astype(np.float16)
    if np.array_equal(half.astype(np.float32).view(np.uint32), values.view(np.uint32)):
        return half
    return None


def compact_graph(source: Path, target: Path) -> dict[str, Any]:
    """Write `source` to `target` with its large FP32 initializers in FP16 where exact; returns the record the
    manifest keeps (`fp16`: tensors converted, `kept_fp32`: large ones that were not exact, the bytes before and
    after, the level that restores them). `source` and `target` may be the same file."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    model = onnx.load(str(source))
    graph = model.graph
    inputs = {i.name for i in graph.input}
    names = {i.name for i in graph.initializer} | {o for n in graph.node for o in n.output}
    casts, kept, before, after = [], [], 0, 0
    for index, tensor in enumerate(graph.initializer):
        if tensor.data_type != TensorProto.FLOAT or tensor.name in inputs:
            continue
        values = numpy_helper.to_array(tensor)
        if values.size < MIN_ELEMENTS:
            continue
        half = _exact_fp16(values)
        if half is None:
            kept.append(tensor.name)
            continue
        stored = tensor.name + FP16_SUFFIX
        while stored in names:  # never shadow another tensor
            stored += "_"
        names.add(stored)
        casts.append(helper.make_node("Cast", [stored], [tensor.name], name="restore_fp32/" + stored,
                                      to=TensorProto.FLOAT))
        before, after = before + values.nbytes, after + half.nbytes
        graph.initializer[index].CopyFrom(numpy_helper.from_array(half, stored))
    nodes = list(graph.node)
    del graph.node[:]
    graph.node.extend(casts + nodes)
    model.ir_version = min(model.ir_version, MAX_IR_VERSION)
    onnx.checker.check_model(model)
    onnx.save(model, str(target))
    return {"fp16": len(casts), "kept_fp32": len(kept), "bytes_fp32": before, "bytes_fp16": after,
            "restored_at_load_by": RESTORE_LEVEL if casts else None,
            "rule": "large FP32 initializers (>= %d elements) stored in FP16 where widening gives the same bits, "
                    "each behind a Cast to FP32" % MIN_ELEMENTS}


def compact_artifact(artifact_dir: Path) -> dict[str, Any]:
    """An artifact directory's graph stored compactly in place and, when any tensor went to FP16, its decode config
    told the level that restores them (the runtime opens the graph at it); returns `compact_graph`'s record."""
    from laya_serverless.artifact.layout import GRAPH_FILE, DecodeConfig, copy_decode_config

    graph = Path(artifact_dir) / GRAPH_FILE
    record = compact_graph(graph, graph)
    if record["fp16"]:
        config = DecodeConfig.load(Path(artifact_dir))
        copy_decode_config(Path(artifact_dir), Path(artifact_dir), optimized_offline=config.optimized_offline,
                           load_optimization=RESTORE_LEVEL)
    return record
