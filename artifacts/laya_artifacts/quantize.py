"""int8 weights and offline graph optimization, so the serving process spends no cold start on either.

Dynamic quantization with per-channel int8 weights, MatMul only (embedding tables stay FP32:
per-tensor weights and int8 embeddings both degraded MiniLM's states visibly), and never the
decision head (its transformer layers, scorer and act head sit right before the probabilities
the gate measures). How much of the encoder is quantized is a ladder, most first; the build
takes the first rung that passes the parity gate and records every attempt.
"""

from __future__ import annotations

import logging
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

OPTIMIZATION_LEVEL = "ORT_ENABLE_EXTENDED"  # portable across x86 CPUs, unlike the layout passes of ENABLE_ALL

# Node names of the TorchScript export: BERT-style (`/encoder/encoder/layer.N/...`) and
# ModernBERT (`/encoder/layers.N/attn/...`); the decision head's own layers are `/layers.N/...`.
_ATTENTION_IN = r"/(attention/self/(query|key|value)|attn/Wqkv)/MatMul$"
_ATTENTION_OUT = r"/(attention/output/dense|attn/Wo)/MatMul$"


@dataclass(frozen=True)
class Recipe:
    name: str
    quantize: str  # regex over node names; only matching MatMul nodes with constant weights are quantized

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "method": "onnxruntime.quantization.quantize_dynamic", "weight_type": "QInt8",
                "per_channel": True, "reduce_range": False, "op_types": ["MatMul"], "nodes": self.quantize}


INT8_LADDER = (
    Recipe("encoder", r"^/encoder/.*/MatMul$"),
    Recipe("encoder-attention", r"^/encoder/.*(%s|%s)" % (_ATTENTION_IN, _ATTENTION_OUT)),
    Recipe("encoder-attention-output", r"^/encoder/.*%s" % _ATTENTION_OUT),
)


def quantize_int8(fp32_graph: Path, int8_graph: Path, recipe: Recipe) -> dict[str, Any]:
    """Write the int8 graph for `recipe` and return its description (with how many nodes it quantized)."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    nodes = [n.name for n in onnx.load(str(fp32_graph), load_external_data=False).graph.node if n.op_type == "MatMul"]
    chosen = [n for n in nodes if re.search(recipe.quantize, n)]
    if not chosen:
        raise ValueError("int8 recipe %r matches no MatMul node of %s" % (recipe.name, fp32_graph))
    # The quantizer logs "please consider pre-processing" advice on the root logger at every call.
    logging.disable(logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            quantize_dynamic(
                str(fp32_graph), str(int8_graph), weight_type=QuantType.QInt8, per_channel=True, reduce_range=False,
                op_types_to_quantize=["MatMul"], nodes_to_quantize=chosen, extra_options={"MatMulConstBOnly": True},
            )
    finally:
        logging.disable(logging.NOTSET)
    return dict(recipe.as_dict(), quantized_nodes=len(chosen), matmul_nodes=len(nodes))


def optimize_offline(graph: Path, optimized: Path) -> str:
    """Run ORT's graph optimizations once at build time and save the result; returns the level used."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, OPTIMIZATION_LEVEL)
    options.optimized_model_filepath = str(optimized)
    ort.InferenceSession(str(graph), sess_options=options, providers=["CPUExecutionProvider"])
    return OPTIMIZATION_LEVEL
