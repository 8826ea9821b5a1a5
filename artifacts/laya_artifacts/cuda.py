"""CUDA targets: `cuda-fp16` and `cuda-fp32` artifacts, built and gated on the GPU that will serve them.

    checkpoint -> FP32 export -> (FP16 conversion) -> gate on CUDAExecutionProvider -> gate of the CPU retry
               -> manifest (GPU model, driver, onnxruntime and its CUDA, provider options)

The FP16 graph runs the encoder's matrix products in FP16 and keeps in FP32 what precision needs:
softmax and normalization ops, the rotary-position tables (angles up to ~500 rad lose whole radians
in FP16) and the whole decision head, which sits right before the probabilities the gate measures;
graph inputs and outputs stay as exported (int64/bool in, FP32 out). Tolerances are fixed before
measurement (`parity.TOLERANCES`): FP16 0.02 with no hard mismatch, FP32 1e-4 with TF32 off. A
machine without CUDA is refused before any work, and nothing (no manifest) is written.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

from laya_serverless.artifact.gpu import gpu_profile
from laya_serverless.artifact.layout import GRAPH_FILE, TOKENIZER_FILE, DecodeConfig, copy_decode_config
from laya_serverless.artifact.manifest import sha256_bytes
from laya_serverless.artifact.targets import CUDA_FP16, CUDA_TARGETS
from laya_serverless.core.providers import CPU, CPU_PROVIDER, CUDA, CUDA_OPTIONS, ONNXRUNTIME, Placement, require_device
from laya_serverless.errors import GateFailed

from .build import REPORT_JSON, REPORT_TEXT, cpu_profile, write_manifest
from .export import OPSET, export_checkpoint
from .goldens import record_goldens, weights_sha256
from .parity import TOLERANCES, GateReport, run_gate
from .regate import canonical_goldens, goldens_sidecar

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


def _configuration(checkpoint: dict[str, Any], target: str, recipe: dict[str, Any] | None, decode: DecodeConfig,
                   retry: GateReport) -> dict[str, Any]:
    return {
        "checkpoint": checkpoint,
        "target": target,
        "graph": {"format": "onnx", "opset": OPSET, "exporter": "torch.onnx.export (TorchScript)",
                  "torch": version("torch"), "onnx": version("onnx"), "optimized_offline": None},
        "precision": {"weights": "fp16", "recipe": recipe} if recipe else {"weights": "fp32", "tf32": False},
        "shape_policy": {"rows": "dynamic", "tokens": "dynamic", "options": "dynamic, at least 2 columns",
                         "max_len": decode.max_len, "head_max_len": decode.head_max_len},
        "build_cpu": cpu_profile(),
        "cuda": {"build_gpu": gpu_profile(), "provider_options": dict(CUDA_OPTIONS),
                 "cpu_retry": {"provider": CPU_PROVIDER, "passed": retry.passed,
                               "max_probability_error": retry.max_probability_error,
                               "max_action_error": retry.max_action_error,
                               "hard_mismatches": len(retry.hard_mismatches)}},
    }


def _stage(checkpoint_dir: Path, target: str, out_dir: Path, progress: Callable[[str], None]) -> dict[str, Any] | None:
    """Export, convert when FP16, and lay the graph, tokenizer and decode config into `out_dir`."""
    with tempfile.TemporaryDirectory(prefix="laya-build-") as scratch:
        raw = Path(scratch) / "export"
        progress("2/5 exporting %s to an FP32 ONNX graph" % checkpoint_dir)
        export_checkpoint(checkpoint_dir, raw)
        recipe = None
        if target == CUDA_FP16:
            progress("3/5 converting to FP16 (softmax, normalization, rotary tables and the head kept FP32)")
            recipe = convert_fp16(raw / GRAPH_FILE, out_dir / GRAPH_FILE)
        else:
            progress("3/5 keeping the FP32 graph (TF32 off at run time)")
            shutil.copy(raw / GRAPH_FILE, out_dir / GRAPH_FILE)
        shutil.copy(raw / TOKENIZER_FILE, out_dir / TOKENIZER_FILE)
        # Not optimized offline: ORT's saved optimizations are specific to the provider they ran for.
        copy_decode_config(raw, out_dir, optimized_offline=False)
    return recipe


def build_cuda_artifact(checkpoint_dir: Path, target: str, out_dir: Path, *, name: str | None = None,
                        revision: str | None = None, goldens_path: Path | None = None,
                        progress: Callable[[str], None] = lambda _m: None,
                        placement: Placement = ONNXRUNTIME) -> tuple[Path, GateReport]:
    """Build, gate (on this machine's GPU) and describe one (checkpoint, cuda target) configuration in `out_dir`."""
    if target not in CUDA_TARGETS:
        raise ValueError("unknown CUDA target %r; choose one of %s" % (target, ", ".join(CUDA_TARGETS)))
    require_device(CUDA, placement)  # before goldens, export or any file: the gate can only run on a GPU
    out_dir = Path(out_dir)
    if out_dir.exists() and any(out_dir.iterdir()):
        raise FileExistsError("%s is not empty; builds never overwrite an artifact" % out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    name = name or Path(checkpoint_dir).name
    if goldens_path is None:
        progress("1/5 recording goldens with upstream laya (PyTorch CPU FP32)")
        goldens = record_goldens(Path(checkpoint_dir), name, revision)
    else:
        progress("1/5 reading goldens from %s" % goldens_path)
        goldens = json.loads(Path(goldens_path).read_text(encoding="utf-8"))
    recipe = _stage(Path(checkpoint_dir), target, out_dir, progress)
    progress("4/5 gating on %s at tolerance %g, then the CPU retry of the same graph" % (CUDA, TOLERANCES[target]))
    report = run_gate(out_dir, goldens, target)
    retry = run_gate(out_dir, goldens, target, device=CPU)
    (out_dir / REPORT_JSON).write_text(json.dumps(dict(report.as_dict(), cpu_retry=retry.as_dict()), indent=2)
                                       + "\n", encoding="utf-8")
    (out_dir / REPORT_TEXT).write_text("%s\n\ncpu retry (same graph on %s):\n%s\n" % (
        report.table(), CPU_PROVIDER, retry.table()), encoding="utf-8")
    progress(report.table())
    progress("cpu retry: %s" % ("gated, allowed" if retry.passed else "failed its gate: out-of-memory is a 503"))
    if not report.passed:
        raise GateFailed("the parity gate failed for %s; report: %s" % (out_dir, out_dir / REPORT_TEXT), report)
    progress("5/5 writing the manifest")
    checkpoint = {"name": name, "source": str(checkpoint_dir), "revision": revision,
                  "weights_sha256": weights_sha256(Path(checkpoint_dir))}
    corpus = canonical_goldens(goldens)
    configuration = _configuration(checkpoint, target, recipe, DecodeConfig.load(out_dir), retry)
    write_manifest(out_dir, configuration, report, sha256_bytes(corpus))
    goldens_sidecar(out_dir).write_bytes(corpus)
    return out_dir, report


__all__ = ["CUDA_TARGETS", "FP32_OPS", "build_cuda_artifact", "convert_fp16", "keeps_fp32"]
