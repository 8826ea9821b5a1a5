"""CUDA targets' graphs: `cuda-fp16` converted from the FP32 export, `cuda-fp32` the export as is.

The build recipe (`build.py`) stages them unoptimized, gates them on the GPU that will serve them
and again on the CPU provider (the out-of-memory retry), and writes the manifest's `cuda` block;
a machine without CUDA is refused before any work, and nothing (no manifest) is written.

The FP16 graph runs the encoder's matrix products in FP16 and keeps in FP32 what precision needs:
softmax and normalization ops, the rotary-position tables (angles up to ~500 rad lose whole radians
in FP16) and the whole decision head, which sits right before the probabilities the gate measures;
graph inputs and outputs stay as exported (int64/bool in, FP32 out). Tolerances are fixed before
measurement (`parity.TOLERANCES`): FP16 0.02 with no hard mismatch, FP32 1e-4 with TF32 off.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from laya_serverless.artifact.targets import CUDA_TARGETS

# Kept FP32 in the FP16 graph, beside onnxruntime's own list of ops without FP16 kernels.
FP32_OPS = ("Softmax", "LayerNormalization", "SkipLayerNormalization", "SimplifiedLayerNormalization",
            "ReduceMean", "ReduceSum", "Pow", "Sqrt", "Reciprocal", "Exp", "Log", "Cos", "Sin")
ENCODER_PREFIX, ROTARY = "/encoder/", "/rotary_emb"


def keeps_fp32(node_name: str) -> bool:
    """Nodes outside the encoder (the decision head) and the rotary tables inside it stay FP32."""
    return not node_name.startswith(ENCODER_PREFIX) or ROTARY in node_name


def _cast_to(node: Any) -> int | None:
    return next((int(a.i) for a in node.attribute if a.name == "to"), None)


def _inputs_used(graph: Any) -> set[str]:
    """Every tensor name a node of `graph` reads, subgraphs (an If's branches) included."""
    used = set()
    for node in graph.node:
        used.update(node.input)
        for attribute in node.attribute:
            for subgraph in [attribute.g, *attribute.graphs] if attribute.HasField("g") else attribute.graphs:
                used |= _inputs_used(subgraph)
    return used


def drop_round_trips(model: Any) -> int:
    """Rewire FP32 -> FP16 -> FP32 cast pairs to take the FP32 tensor itself; returns how many.

    The converter casts every kept-FP32 node's output to FP16 and back for the next one, even when
    both are FP32 (and before the FP32 outputs): pure loss. In the head it underflows the entropy's
    epsilon to 0, and 0 * log(0) is NaN. A Cast to FP32 of an FP32 tensor is left, which ORT removes.
    """
    import onnx

    inferred = onnx.shape_inference.infer_shapes(model)
    values = [*inferred.graph.value_info, *inferred.graph.input, *inferred.graph.output]
    types = {v.name: v.type.tensor_type.elem_type for v in values}
    types.update({t.name: t.data_type for t in model.graph.initializer})
    producer = {out: node for node in model.graph.node for out in node.output}
    fp32, fp16 = onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16
    rewired = 0
    for node in model.graph.node:
        source = producer.get(node.input[0]) if node.op_type == "Cast" and node.input else None
        if (source is not None and source.op_type == "Cast" and _cast_to(node) == fp32
                and _cast_to(source) == fp16 and types.get(source.input[0]) == fp32):
            node.input[0] = source.input[0]
            rewired += 1
    used = _inputs_used(model.graph) | {o.name for o in model.graph.output}
    dead = [n for n in model.graph.node if n.op_type == "Cast" and not any(out in used for out in n.output)]
    for node in dead:
        model.graph.node.remove(node)
    return rewired


def convert_fp16(fp32_graph: Path, fp16_graph: Path) -> dict[str, Any]:
    """Write the FP16 graph of `fp32_graph` and return its recipe (what was kept FP32, how much became FP16)."""
    import onnx
    from onnxruntime.transformers.float16 import DEFAULT_OP_BLOCK_LIST, convert_float_to_float16

    model = onnx.load(str(fp32_graph))
    op_block = sorted(set(DEFAULT_OP_BLOCK_LIST) | set(FP32_OPS))
    node_block = [n.name for n in model.graph.node if keeps_fp32(n.name)]
    converted = convert_float_to_float16(model, keep_io_types=True, op_block_list=op_block,
                                         node_block_list=node_block)
    rewired = drop_round_trips(converted)
    onnx.save(converted, str(fp16_graph))
    halves = sum(1 for t in converted.graph.initializer if t.data_type == onnx.TensorProto.FLOAT16)
    return {"method": "onnxruntime.transformers.float16.convert_float_to_float16", "keep_io_types": True,
            "op_block_list": op_block, "fp32_nodes": "the decision head (outside %s) and %s" % (ENCODER_PREFIX, ROTARY),
            "fp32_node_count": len(node_block), "fp16_initializers": halves, "fp16_round_trips_removed": rewired}


__all__ = ["CUDA_TARGETS", "FP32_OPS", "convert_fp16", "keeps_fp32"]
