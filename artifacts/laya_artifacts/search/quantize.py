"""Reduced-precision candidates for the encoder, and offline graph optimization.

Every candidate is written by onnxruntime.quantization (nothing here quantizes by hand) and only
touches the encoder's MatMuls with constant weights: embedding tables stay FP32 (per-tensor weights
and int8 embeddings both degraded MiniLM's states visibly) and the decision head never changes (its
transformer layers, scorer and act head sit right before the probabilities the gate measures).

    encoder                  dynamic int8 (per-channel 7-bit weights, dynamic activations), every encoder MatMul
    encoder-ffn              the same, feed-forward MatMuls only
    encoder-attention        the same, attention Q/K/V (or fused Wqkv) and output projections
    encoder-attention-output the same, attention output projections only
    encoder-weight-only-8bit MatMulNBits: 8-bit weights in blocks of 32, FP32 activations and compute
    encoder-nbits-int8       MatMulNBits, the same weights, int8 compute (accuracy_level 4): activations are
                             quantized per block of 32 along K, so one outlier channel coarsens only its block
    nbits-sym-b32, -b64      the public recipe (third-party conversions of the real English checkpoint held
                             21/22-57/57 answers with it): MatMulNBits 8-bit symmetric weights in blocks of 32
                             or 64, int8 compute (accuracy_level 4); searched first (`PUBLIC_RECIPES`)
    nbits-sym-b32-ends-fp32, -b64-ends-fp32  the same with the first and last encoder layers left FP32
    encoder-smoothquant      dynamic int8 of every encoder MatMul after SmoothQuant scale migration, alpha 0.5
                             (`search/smoothing.py`: an exact FP32 rewrite, checked at the FP32 tolerance first)
    encoder-smoothquant-0.9  the same with alpha 0.9: more of the activations' range moves into the weights
    encoder-static           static int8 (QDQ): activation ranges calibrated once on selection rows, weights
                             per channel, 7-bit
    layers-<i,j,...>         dynamic int8 on every MatMul of the listed encoder layers (the per-layer mix)
    nodes-<n>                dynamic int8 on the listed encoder MatMuls only (the per-node mix)

Which candidate ships is decided by the precision search (`search/precision.py`) on the gate's selection split.

Kernel-exact int8: dynamic int8 weights are quantized to 7 bits (`reduce_range`). ONNX Runtime's
u8 x s8 kernels for x86 CPUs without VNNI (AVX2, AVX-512) add pairs of products in 16 bits
(VPMADDUBSW), which saturates with 8-bit weights; with 7-bit ones a pair (at most 2 x 255 x 64)
always fits, so every x86 class computes the same integers as VNNI does. Measured on the MiniLM test
checkpoint's all-encoder int8 (ORT 1.32.0, 2026-12-02): 8-bit weights answer max |dp| 0.142 on
AVX-512 VNNI and 0.192 as AVX2 (qemu -cpu Haswell; `session.x64quantprecision` does not reach the
fused DynamicQuantizeMatMul kernels); 7-bit weights 0.2092083 on both, at the same speed (1.61x FP32
vs 1.64x); uint8 weights (U8U8) are exact too but 1.24x. The build checks the equivalence on the
artifact itself (`emulated.equivalence`).
"""

from __future__ import annotations

import logging
import re
import shutil
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from laya_artifacts.errors import SearchError
from laya_serverless.artifact.layout import TOKENIZER_FILE, copy_decode_config

OPTIMIZATION_LEVEL = "ORT_ENABLE_EXTENDED"  # portable across x86 CPUs, unlike the layout passes of ENABLE_ALL
NBITS_BLOCK_SIZE = 32
REDUCE_RANGE = True  # 7-bit weights: kernel-exact int8 on every x86 class (module docstring)

# Node names of the TorchScript export: BERT-style (`/encoder/encoder/layer.N/...`) and
# ModernBERT (`/encoder/layers.N/...`); the decision head's own layers are `/layers.N/...`.
_LAYER = re.compile(r"^/encoder/(?:encoder/layer|layers)\.(\d+)/")
_PARTS = (
    ("attention-in", re.compile(r"/(attention/self/(query|key|value)|attn/Wqkv)/MatMul$")),
    ("attention-out", re.compile(r"/(attention/output/dense|attn/Wo)/MatMul$")),
    ("ffn", re.compile(r"(layer\.\d+/(intermediate|output)/dense|/mlp/(Wi|Wo))/MatMul$")),
)
PARTS = tuple(name for name, _ in _PARTS)


@dataclass(frozen=True)
class Candidate:
    """One way to reduce the encoder: a method and which (layer, part) MatMuls it touches."""

    name: str
    method: str  # "dynamic-int8" | "weight-only-8bit"
    parts: tuple[str, ...] = PARTS
    layers: tuple[int, ...] | None = None  # None: every encoder layer
    description: str = ""
    accuracy_level: int | None = None  # MatMulNBits only: 4 computes in int8 with blockwise activation scales
    nodes: tuple[str, ...] | None = None  # set: exactly these encoder MatMuls (node names), whatever parts/layers say
    smoothing: float | None = None  # set: SmoothQuant's alpha, applied to the chosen MatMuls before quantizing
    block_size: int = NBITS_BLOCK_SIZE  # MatMulNBits only
    symmetric: bool = False  # MatMulNBits only: no zero points (the public recipe)
    ends_fp32: bool = False  # the first and last encoder layers stay FP32 (the public recipe's variant)

    def selects(self, layer: int, part: str, node: str = "") -> bool:
        if self.nodes is not None:
            return node in self.nodes
        return part in self.parts and (self.layers is None or layer in self.layers)

    def as_dict(self) -> dict[str, Any]:
        recipe: dict[str, Any] = {"name": self.name, "description": self.description, "parts": list(self.parts),
                                  "layers": "all" if self.layers is None else list(self.layers)}
        if self.nodes is not None:
            recipe["nodes"] = list(self.nodes)
        if self.smoothing is not None:
            recipe["smoothing_alpha"] = self.smoothing
        if self.ends_fp32:
            recipe["ends_fp32"] = "the first and last encoder layers are not quantized"
        if self.method in ("dynamic-int8", "static-int8"):
            static = self.method == "static-int8"
            recipe.update({"method": "onnxruntime.quantization.quantize_%s" % ("static" if static else "dynamic"),
                           "weight_type": "QInt8", "per_channel": True, "reduce_range": REDUCE_RANGE,
                           "activations": "uint8, per tensor, %s" % (
                               "calibrated (MinMax) on selection rows, QDQ" if static else "dynamic"),
                           "op_types": ["MatMul"], "kernel_exact": "7-bit weights: no x86 int8 kernel saturates",
                           "weights_label": "int8, static activations" if static else "int8"})
        else:
            recipe.update({"method": "onnxruntime.quantization.matmul_nbits_quantizer.MatMulNBitsQuantizer",
                           "op": "com.microsoft.MatMulNBits", "bits": 8, "block_size": self.block_size,
                           "symmetric": self.symmetric, "accuracy_level": self.accuracy_level,
                           "compute": "int8, activations per block" if self.accuracy_level == 4 else "fp32",
                           "weights_label": ("8-bit blockwise, int8 compute" if self.accuracy_level == 4
                                             else "8-bit weight-only")})
        return recipe


FIXED_CANDIDATES = (
    Candidate("encoder", "dynamic-int8", description="all encoder MatMuls"),
    Candidate("encoder-ffn", "dynamic-int8", ("ffn",), description="feed-forward MatMuls only"),
    Candidate("encoder-attention", "dynamic-int8", ("attention-in", "attention-out"),
              description="attention Q/K/V and output projections"),
    Candidate("encoder-attention-output", "dynamic-int8", ("attention-out",),
              description="attention output projections only"),
    Candidate("encoder-weight-only-8bit", "weight-only-8bit", description="8-bit weight-only MatMulNBits"),
    Candidate("encoder-nbits-int8", "weight-only-8bit", accuracy_level=4,
              description="8-bit MatMulNBits, int8 compute with blockwise activation scales"),
    # alpha 0.5 is SmoothQuant's default; 0.9 measured best of 0.3-0.9 on both pretrained encoders here
    # (docs/artifacts-gate.md). Smoothing before static QDQ did not earn a candidate (measured there too).
    Candidate("encoder-smoothquant", "dynamic-int8", smoothing=0.5,
              description="all encoder MatMuls, SmoothQuant-scaled (alpha 0.5)"),
    Candidate("encoder-smoothquant-0.9", "dynamic-int8", smoothing=0.9,
              description="all encoder MatMuls, SmoothQuant-scaled (alpha 0.9)"),
    Candidate("encoder-static", "static-int8", description="all encoder MatMuls, static activation ranges"),
    *(Candidate("nbits-sym-b%d%s" % (block, "-ends-fp32" if ends else ""), "weight-only-8bit", accuracy_level=4,
                block_size=block, symmetric=True, ends_fp32=ends,
                description="8-bit symmetric MatMulNBits, block %d, int8 compute%s"
                            % (block, ", first and last layers FP32" if ends else ""))
      for ends in (False, True) for block in (32, 64)),
)
# The recipes that held on the public real checkpoint (issue 58): the search builds and times them first.
PUBLIC_RECIPES = tuple(c.name for c in FIXED_CANDIDATES if c.symmetric)


def search_order(names: Sequence[str]) -> list[Candidate]:
    """The requested fixed candidates, the public recipes first."""
    return sorted((c for c in FIXED_CANDIDATES if c.name in names), key=lambda c: c.name not in PUBLIC_RECIPES)


LAYER_MIX = "layer-mix"  # the name the search gives its per-layer candidate
NODE_MIX = "node-mix"  # ... and its per-node (single MatMul) candidate


def layer_candidate(layers: Sequence[int], name: str | None = None) -> Candidate:
    chosen = tuple(sorted(set(int(i) for i in layers)))
    return Candidate(name or "layers-" + ",".join(map(str, chosen)), "dynamic-int8", PARTS, chosen,
                     description="every MatMul of encoder layers %s" % ", ".join(map(str, chosen)))


def node_candidate(nodes: Sequence[str], name: str | None = None) -> Candidate:
    chosen = tuple(sorted(set(nodes)))
    return Candidate(name or "nodes-%d" % len(chosen), "dynamic-int8", PARTS, None,
                     description="%d chosen encoder MatMul(s)" % len(chosen), nodes=chosen)


@dataclass
class EncoderMatMuls:
    """The encoder's constant-weight MatMuls of a graph, by (layer, part)."""

    nodes: dict[str, tuple[int, str]] = field(default_factory=dict)
    all_matmuls: list[str] = field(default_factory=list)

    @property
    def layers(self) -> list[int]:
        return sorted({layer for layer, _ in self.nodes.values()})

    def select(self, candidate: Candidate) -> list[str]:
        ends = (min(self.layers), max(self.layers)) if candidate.ends_fp32 and self.layers else ()
        return [name for name, (layer, part) in self.nodes.items()
                if candidate.selects(layer, part, name) and layer not in ends]


def encoder_matmuls(graph: Path) -> EncoderMatMuls:
    import onnx

    model = onnx.load(str(graph), load_external_data=False)
    constants = {i.name for i in model.graph.initializer}
    found = EncoderMatMuls()
    for node in model.graph.node:
        if node.op_type != "MatMul":
            continue
        found.all_matmuls.append(node.name)
        layer = _LAYER.match(node.name)
        if not layer or node.input[1] not in constants:
            continue
        for part, pattern in _PARTS:
            if pattern.search(node.name):
                found.nodes[node.name] = (int(layer.group(1)), part)
                break
    return found


def _quiet() -> Any:
    """The quantizers log "please consider pre-processing" advice on the root logger at every call."""
    class _Quiet:
        def __enter__(self) -> None:
            logging.disable(logging.WARNING)
            self._warnings = warnings.catch_warnings()
            self._warnings.__enter__()
            warnings.simplefilter("ignore")

        def __exit__(self, *exc: Any) -> None:
            self._warnings.__exit__(*exc)
            logging.disable(logging.NOTSET)
    return _Quiet()


def quantize_candidate(fp32_graph: Path, out_graph: Path, candidate: Candidate,
                       calibration: Sequence[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Write `candidate`'s graph and return its recipe (with how many MatMuls it touched). `fp32_graph` is
    already smoothed when the candidate says so (`search._Search.build`); `calibration` feeds a static one."""
    matmuls = encoder_matmuls(fp32_graph)
    chosen = matmuls.select(candidate)
    if not chosen:
        raise SearchError("candidate %r matches no encoder MatMul of %s" % (candidate.name, fp32_graph))
    if candidate.method == "static-int8":
        if not calibration:
            raise SearchError("candidate %r needs calibration cases" % candidate.name)
        _quantize_static(fp32_graph, out_graph, chosen, calibration)
    elif candidate.method == "dynamic-int8":
        import onnx
        from onnxruntime.quantization import QuantType, quantize_dynamic

        with _quiet():
            quantize_dynamic(
                str(fp32_graph), str(out_graph), weight_type=QuantType.QInt8, per_channel=True,
                reduce_range=REDUCE_RANGE, op_types_to_quantize=["MatMul"], nodes_to_quantize=chosen,
                # DefaultTensorType: past a contrib node (the fused attention) shape inference has no type
                extra_options={"MatMulConstBOnly": True, "DefaultTensorType": onnx.TensorProto.FLOAT},
            )
    elif candidate.method == "weight-only-8bit":
        import onnx

        try:
            from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer
        except ImportError as exc:  # it imports onnx_ir, which onnxruntime does not depend on
            raise SearchError("weight-only 8-bit needs the onnx_ir package (the build extra pins it): %s"
                               % exc) from exc
        with _quiet():
            quantizer = MatMulNBitsQuantizer(
                onnx.load(str(fp32_graph)), bits=8, block_size=candidate.block_size, is_symmetric=candidate.symmetric,
                nodes_to_exclude=[n for n in matmuls.all_matmuls if n not in set(chosen)],
                op_types_to_quantize=("MatMul",), accuracy_level=candidate.accuracy_level)
            quantizer.process()
            quantizer.model.save_model_to_file(str(out_graph), use_external_data_format=False)
    else:
        raise ValueError("unknown quantization method %r" % candidate.method)
    return dict(candidate.as_dict(), quantized_nodes=len(chosen), matmul_nodes=len(matmuls.all_matmuls),
                encoder_layers=len(matmuls.layers))


def _quantize_static(fp32_graph: Path, out_graph: Path, chosen: Sequence[str],
                     calibration: Sequence[dict[str, Any]]) -> None:
    import onnx
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    class _Cases(CalibrationDataReader):
        def __init__(self) -> None:
            self._feeds = iter(calibration)

        def get_next(self) -> dict[str, Any] | None:
            return next(self._feeds, None)

    with _quiet():
        quantize_static(
            str(fp32_graph), str(out_graph), _Cases(), quant_format=QuantFormat.QDQ, op_types_to_quantize=["MatMul"],
            per_channel=True, reduce_range=REDUCE_RANGE, activation_type=QuantType.QUInt8,
            weight_type=QuantType.QInt8, nodes_to_quantize=list(chosen), calibrate_method=CalibrationMethod.MinMax,
            extra_options={"MatMulConstBOnly": True, "DefaultTensorType": onnx.TensorProto.FLOAT})


def optimize_offline(graph: Path, optimized: Path) -> str:
    """Run ORT's graph optimizations once at build time and save the result; returns the level used."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, OPTIMIZATION_LEVEL)
    options.optimized_model_filepath = str(optimized)
    ort.InferenceSession(str(graph), sess_options=options, providers=["CPUExecutionProvider"])
    return OPTIMIZATION_LEVEL


def prepare_artifact(graph: Path, raw: Path, out_dir: Path) -> Path:
    """`graph` optimized offline into `out_dir`, beside the export's tokenizer and decode config."""
    out_dir.mkdir(parents=True, exist_ok=True)
    optimize_offline(graph, out_dir / "model.onnx")
    shutil.copy(raw / TOKENIZER_FILE, out_dir / TOKENIZER_FILE)
    copy_decode_config(raw, out_dir, optimized_offline=True)
    return out_dir
