"""The export-time attention fusion on a small attention module: each mask kind, exported and run by ORT."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")

from laya_artifacts.export.fusion import MARKER_DOMAIN, fused_attention, to_multi_head_attention  # noqa: E402

HEADS, HEAD_DIM, TOKENS = 4, 8, 7


class Attention(torch.nn.Module):
    """SDPA over a projected input, with a mask of the kind the encoders and the head hand over."""

    def __init__(self, mask_kind: str) -> None:
        super().__init__()
        self.mask_kind = mask_kind
        self.qkv = torch.nn.Linear(HEADS * HEAD_DIM, 3 * HEADS * HEAD_DIM)

    def forward(self, x: Any, keep: Any) -> Any:
        q, k, v = (t.unflatten(-1, (HEADS, HEAD_DIM)).transpose(1, 2) for t in self.qkv(x).chunk(3, dim=-1))
        if self.mask_kind == "padding":  # Laya's head: a (B, 1, 1, L) key-padding mask
            mask = keep[:, None, None, :]
        else:  # the encoders: a (B, 1, S, L) mask, here a sliding window of 2 over the real tokens
            positions = torch.arange(x.shape[1])
            window = (positions[:, None] - positions[None, :]).abs() <= 2
            mask = window[None, None] & keep[:, None, None, :]
            if self.mask_kind == "float":
                mask = torch.where(mask, 0.0, torch.finfo(torch.float32).min)
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return out.transpose(1, 2).flatten(2)


def _inputs() -> tuple[Any, Any]:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(2, TOKENS, HEADS * HEAD_DIM, generator=generator)
    keep = torch.ones(2, TOKENS, dtype=torch.bool)
    keep[1, 3:] = False  # the second row is padded: its last query rows see no real key in the window
    return x, keep


def _export(module: Any, path: Path) -> tuple[dict[str, int], Any]:
    import onnx

    with warnings.catch_warnings(), fused_attention() as counts:
        warnings.simplefilter("ignore")
        torch.onnx.export(module, _inputs(), str(path), dynamo=False, opset_version=17, input_names=["x", "keep"],
                          output_names=["out"], dynamic_axes={"x": {0: "b", 1: "s"}, "keep": {0: "b", 1: "s"}},
                          custom_opsets={MARKER_DOMAIN: 1})
    model = onnx.load(str(path))
    assert to_multi_head_attention(model) == counts["fused"]
    onnx.save(model, str(path))
    return counts, model


@pytest.mark.parametrize("mask_kind", ["padding", "bool", "float"])
def test_each_mask_kind_becomes_one_multi_head_attention_that_matches_pytorch(mask_kind: str, tmp_path: Path) -> None:
    module = Attention(mask_kind).eval()
    counts, model = _export(module, tmp_path / "attention.onnx")
    ops = [n.op_type for n in model.graph.node]
    assert counts == {"fused": 1, "unfused": 0}
    assert ops.count("MultiHeadAttention") == 1 and "IsNaN" not in ops and "Softmax" not in ops
    assert not any(n.domain == MARKER_DOMAIN for n in model.graph.node)
    x, keep = _inputs()
    session = ort.InferenceSession(str(tmp_path / "attention.onnx"), providers=["CPUExecutionProvider"])
    got = session.run(None, {"x": x.numpy(), "keep": keep.numpy()})[0]
    with torch.no_grad():
        want = module(x, keep).numpy()
    real = keep.numpy()
    assert np.isfinite(got).all()  # no NaN guard, and no NaN: padded rows get finite values
    assert np.abs(got[real] - want[real]).max() < 1e-5  # every real token's row is unchanged


def test_attention_the_fusion_cannot_express_is_left_to_pytorchs_export(tmp_path: Path) -> None:
    class Causal(torch.nn.Module):
        def forward(self, x: Any, keep: Any) -> Any:
            q = x.unflatten(-1, (HEADS, HEAD_DIM)).transpose(1, 2)
            return torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True).transpose(1, 2).flatten(2)

    counts, model = _export(Causal(), tmp_path / "causal.onnx")
    assert counts == {"fused": 0, "unfused": 1}
    assert "MultiHeadAttention" not in {n.op_type for n in model.graph.node}
    assert torch.nn.functional.scaled_dot_product_attention.__name__ == "scaled_dot_product_attention"  # restored
