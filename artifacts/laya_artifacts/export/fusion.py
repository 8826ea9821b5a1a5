"""Fused attention at export time: every attention of a checkpoint becomes one ORT `MultiHeadAttention`.

Both encoders (BERT-style and ModernBERT, through transformers' SDPA path) and Laya's decision head
call `torch.nn.functional.scaled_dot_product_attention`. While the graph is traced, `fused_attention()`
routes each call through a marker function that computes the same maths in PyTorch and records one
`laya::FusedAttention` node; `to_multi_head_attention()` then rewrites those nodes into ORT's contrib
`com.microsoft.MultiHeadAttention`. ORT's own pattern matcher (onnxruntime.transformers.optimizer)
finds no attention in these exports: the SDPA export wraps softmax in IsNaN/Where guards and masks
with Where, shapes it does not know.

The guards exist for query rows whose keys are all masked (softmax of all -inf is NaN). The fused node
adds a finite bias instead (MASKED_BIAS), so such rows get finite values and nothing is NaN: every
sequence the runtime builds starts with [CLS], so no real token's row is ever fully masked, and padded
rows' outputs are never read. Real rows are unchanged: exp(MASKED_BIAS + score) is 0 in float32 and
float16 alike. ModernBERT's sliding-window layers keep their window as that bias: the maths is local
attention, the compute is full-length (see docs/artifacts.md for why that is cheap at Laya's lengths).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import Any

MARKER_DOMAIN = "laya"
MARKER_OP = "FusedAttention"
ORT_DOMAIN = "com.microsoft"
MASKED_BIAS = -10000.0  # ORT's own mask_filter_value; representable in float16


def _marker_function(reference: Any) -> Any:
    import torch

    class AttentionMarker(torch.autograd.Function):
        """SDPA on (B, H, S, Dh) query/key/value with a (B, 1, S or 1, L) mask -> (B, H, S, Dh).

        The symbolic emits only constant-shape reshapes (ONNX's 0 copies a dimension), so the graph
        carries no Shape/Slice/Concat chains per attention: query as (B, S, H*Dh), key and value as
        they are (MultiHeadAttention reads BNSH key/value), a (B, 1, 1, L) boolean mask as the
        key-padding input, any other mask as an additive bias.
        """

        @staticmethod
        def forward(ctx: Any, query: Any, key: Any, value: Any, mask: Any, num_heads: int, head_dim: int,
                    scale: float, mask_kind: str) -> Any:
            return reference(query, key, value, attn_mask=_bias(mask, query.dtype), scale=scale)

        @staticmethod
        def symbolic(g: Any, query: Any, key: Any, value: Any, mask: Any, num_heads: int, head_dim: int,
                     scale: float, mask_kind: str) -> Any:
            def shape(*dims: int) -> Any:
                return g.op("Constant", value_t=torch.tensor(dims, dtype=torch.int64))
            q = g.op("Reshape", g.op("Transpose", query, perm_i=[0, 2, 1, 3]), shape(0, 0, -1))
            if mask_kind == "padding":
                given = g.op("Cast", g.op("Reshape", mask, shape(0, -1)), to_i=6)  # int32, 1 = attend
            else:
                given = _bias_symbolic(g, mask, mask_kind == "bool-bias")
            out = g.op("%s::%s" % (MARKER_DOMAIN, MARKER_OP), q, key, value, given,
                       num_heads_i=num_heads, scale_f=scale, mask_kind_s=mask_kind)
            # (rows, tokens, hidden) in the query's dtype: without a type the exporter's shape inference stops
            # here, and the head's `squeeze(-1)` downstream would be exported as an If on its size.
            out.setType(query.type().with_sizes([None, None, num_heads * head_dim]))
            heads = g.op("Reshape", out, shape(0, 0, num_heads, head_dim))
            result = g.op("Transpose", heads, perm_i=[0, 2, 1, 3])
            result.setType(query.type().with_sizes([None, num_heads, None, head_dim]))
            return result

    return AttentionMarker


def _bias(mask: Any, dtype: Any) -> Any:
    import torch

    if mask.dtype == torch.bool:
        return torch.where(mask, 0.0, MASKED_BIAS).to(dtype)
    return mask.to(dtype).clamp(min=MASKED_BIAS)


def _mask_kind(mask: Any) -> str:
    import torch

    if mask.dtype != torch.bool:
        return "float-bias"
    return "padding" if int(mask.shape[2]) == 1 else "bool-bias"


def _bias_symbolic(g: Any, mask: Any, is_bool: bool) -> Any:
    import torch

    if is_bool:
        zero, masked = (g.op("Constant", value_t=torch.tensor(v, dtype=torch.float32)) for v in (0.0, MASKED_BIAS))
        return g.op("Where", mask, zero, masked)
    return g.op("Max", mask, g.op("Constant", value_t=torch.tensor(MASKED_BIAS, dtype=torch.float32)))


def _fusable(query: Any, key: Any, value: Any, attn_mask: Any, dropout_p: float, is_causal: bool,
             enable_gqa: bool) -> bool:
    return (query.dim() == 4 and key.dim() == 4 and value.dim() == 4 and attn_mask is not None
            and not is_causal and not enable_gqa and dropout_p == 0.0 and key.shape[1] == query.shape[1]
            and attn_mask.dim() == 4 and attn_mask.shape[1] == 1)


@contextlib.contextmanager
def fused_attention() -> Iterator[dict[str, int]]:
    """Trace every masked, non-causal SDPA call as a marker node; yields {"fused": n, "unfused": m}."""
    import torch.nn.functional as F

    reference = F.scaled_dot_product_attention
    marker = _marker_function(reference)
    counts = {"fused": 0, "unfused": 0}

    def routed(query: Any, key: Any, value: Any, attn_mask: Any = None, dropout_p: float = 0.0,
               is_causal: bool = False, scale: float | None = None, enable_gqa: bool = False) -> Any:
        if not _fusable(query, key, value, attn_mask, dropout_p, is_causal, enable_gqa):
            counts["unfused"] += 1
            return reference(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal,
                             scale=scale, enable_gqa=enable_gqa)
        counts["fused"] += 1
        scale = float(scale) if scale is not None else 1.0 / math.sqrt(int(query.shape[-1]))
        return marker.apply(query, key, value, attn_mask, int(query.shape[1]), int(query.shape[-1]), scale,
                            _mask_kind(attn_mask))

    F.scaled_dot_product_attention = routed
    try:
        yield counts
    finally:
        F.scaled_dot_product_attention = reference


def to_multi_head_attention(model: Any) -> int:
    """Rewrite the marker nodes of an exported `onnx.ModelProto` in place; returns how many."""
    from onnx import TensorProto, helper

    rewritten = 0
    for node in model.graph.node:
        if node.domain != MARKER_DOMAIN or node.op_type != MARKER_OP:
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        query, key, value, mask = node.input
        # MultiHeadAttention's inputs: query, key, value, bias, key_padding_mask, attention_bias.
        masks = [mask] if attrs["mask_kind"] == b"padding" else ["", mask]
        del node.input[:]
        node.input.extend([query, key, value, "", *masks])
        del node.attribute[:]
        node.attribute.extend([helper.make_attribute("num_heads", int(attrs["num_heads"])),
                               helper.make_attribute("scale", float(attrs["scale"])),
                               helper.make_attribute("mask_filter_value", MASKED_BIAS)])
        node.op_type, node.domain = "MultiHeadAttention", ORT_DOMAIN
        # ONNX's shape inference does not know contrib ops; a typed output lets it (and the quantizers
        # that rely on it) carry on past the node: (rows, tokens, hidden) in the graph's FP32.
        model.graph.value_info.append(helper.make_tensor_value_info(node.output[0], TensorProto.FLOAT,
                                                                    ["rows", "tokens", "hidden"]))
        rewritten += 1
    imports = [op for op in model.opset_import if op.domain != MARKER_DOMAIN]
    del model.opset_import[:]
    model.opset_import.extend(imports)
    if rewritten and not any(op.domain == ORT_DOMAIN for op in imports):
        model.opset_import.append(helper.make_opsetid(ORT_DOMAIN, 1))
    return rewritten
