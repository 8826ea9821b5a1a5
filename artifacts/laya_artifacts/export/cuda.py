"""CUDA targets' graphs: `cuda-fp16` converted from the FP32 export, `cuda-fp32` the export as is.

The build recipe (`build.py`) stages them unoptimized, gates them on the GPU that will serve them
and again on the CPU provider (the out-of-memory retry), and writes the manifest's `cuda` block;
a machine without CUDA is refused before any work, and nothing (no manifest) is written.

The FP16 graph runs the encoder's matrix products in FP16 and keeps in FP32 what precision needs:
softmax and normalization ops, the rotary-position tables (angles up to ~500 rad lose whole radians
in FP16) and the whole decision head, which sits right before the probabilities the gate measures;
graph inputs and outputs stay as exported (int64/bool in, FP32 out). Tolerances are fixed before
measurement (`parity.TOLERANCES`): FP16 0.02 with no hard mismatch, FP32 1e-4 with TF32 off.

The converted graph is made valid ONNX here, whatever onnxruntime's converter left (versions differ:
1.32 leaves nodes out of topological order; 1.31 also repeats a Cast per reader, each writing the same
tensor under the same node name, which onnxruntime-gpu 1.31 refuses): repeated nodes dropped, node names
made unique, nodes sorted topologically, the IR version capped at one every onnxruntime the project meets
reads, then `onnx.checker` with `full_check` before the graph is written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from laya_artifacts.errors import ExportError
from laya_serverless.artifact.targets import CUDA_TARGETS

# Kept FP32 in the FP16 graph, beside onnxruntime's own list of ops without FP16 kernels.
FP32_OPS = ("Softmax", "LayerNormalization", "SkipLayerNormalization", "SimplifiedLayerNormalization",
            "ReduceMean", "ReduceSum", "Pow", "Sqrt", "Reciprocal", "Exp", "Log", "Cos", "Sin")
ENCODER_PREFIX, ROTARY = "/encoder/", "/rotary_emb"
# onnxruntime 1.31 reads IR <= 13 and onnx 1.23 writes 14 by default; opset 17 needs >= 8.
MAX_IR_VERSION = 10


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


def _subgraphs(node: Any) -> list[Any]:
    return [g for a in node.attribute for g in ([a.g] if a.HasField("g") else []) + list(a.graphs)]


def _reads(node: Any) -> set[str]:
    """What `node` reads: its inputs and the outer-scope names its subgraphs (an If's branches) use."""
    reads = {name for name in node.input if name}
    for graph in _subgraphs(node):
        reads |= _inputs_used(graph)
    return reads


def drop_repeated_nodes(graph: Any) -> int:
    """Remove each node that repeats an earlier one exactly (onnxruntime 1.31's converter adds one Cast per
    reader, all writing the same tensor); returns how many. Two different nodes writing one tensor raise."""
    first: dict[str, Any] = {}
    repeats = []
    for node in graph.node:
        for out in (o for o in node.output if o):
            if out not in first:
                first[out] = node
            elif first[out].SerializeToString(deterministic=True) == node.SerializeToString(deterministic=True):
                repeats.append(node)
                break
            else:
                raise ExportError("nodes %r and %r both write %r" % (first[out].name, node.name, out))
    for node in repeats:
        graph.node.remove(node)
    return len(repeats)


def unique_node_names(graph: Any) -> int:
    """Rename every node whose name an earlier node already has (`NAME_2`, ...); returns how many."""
    seen = {n.name for n in graph.node}
    taken: set[str] = set()
    renamed = 0
    for node in graph.node:
        if node.name and node.name not in taken:
            taken.add(node.name)
            continue
        base, k = node.name or node.op_type, 2
        while "%s_%d" % (base, k) in seen:
            k += 1
        node.name = "%s_%d" % (base, k)
        seen.add(node.name)
        taken.add(node.name)
        renamed += 1
    return renamed


def sort_topologically(graph: Any) -> int:
    """Put `graph`'s nodes in an order where each reads only what is already there (stable: a node moves
    only as far as it must); returns how many nodes changed place. A cycle raises ValueError."""
    import heapq

    nodes = list(graph.node)
    producer = {out: i for i, node in enumerate(nodes) for out in node.output if out}
    needs = [{producer[name] for name in _reads(node) if name in producer} - {i} for i, node in enumerate(nodes)]
    waiting_on = [len(n) for n in needs]
    readers: list[list[int]] = [[] for _ in nodes]
    for i, deps in enumerate(needs):
        for d in deps:
            readers[d].append(i)
    ready = [i for i, w in enumerate(waiting_on) if w == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for r in readers[i]:
            waiting_on[r] -= 1
            if waiting_on[r] == 0:
                heapq.heappush(ready, r)
    if len(order) != len(nodes):
        raise ExportError("the graph has a cycle through %d nodes" % (len(nodes) - len(order)))
    moved = sum(1 for place, i in enumerate(order) if place != i)
    del graph.node[:]
    graph.node.extend(nodes[i] for i in order)
    return moved


def make_valid(model: Any) -> dict[str, int]:
    """No repeated node, unique node names, topological order, a readable IR version; then the full ONNX check."""
    import onnx

    fixed = {"repeated_nodes_removed": drop_repeated_nodes(model.graph),
             "nodes_renamed": unique_node_names(model.graph), "nodes_reordered": sort_topologically(model.graph)}
    model.ir_version = min(model.ir_version, MAX_IR_VERSION)
    onnx.checker.check_model(model, full_check=True)
    return fixed


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
    fixed = make_valid(converted)
    onnx.save(converted, str(fp16_graph))
    halves = sum(1 for t in converted.graph.initializer if t.data_type == onnx.TensorProto.FLOAT16)
    return {"method": "onnxruntime.transformers.float16.convert_float_to_float16", "keep_io_types": True,
            "op_block_list": op_block, "fp32_nodes": "the decision head (outside %s) and %s" % (ENCODER_PREFIX, ROTARY),
            "fp32_node_count": len(node_block), "fp16_initializers": halves, "fp16_round_trips_removed": rewired,
            **fixed, "ir_version": converted.ir_version, "onnx_checker": "full_check passed"}


__all__ = ["CUDA_TARGETS", "FP32_OPS", "MAX_IR_VERSION", "convert_fp16", "keeps_fp32", "drop_repeated_nodes",
           "make_valid", "sort_topologically", "unique_node_names"]
