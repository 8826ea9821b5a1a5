"""Export a Laya checkpoint to a self-contained FP32 artifact directory.

    model.onnx          the decision graph: 5 inputs -> logits, act_logits; dynamic rows, tokens, options;
                        every attention one ORT MultiHeadAttention node (export/fusion.py)
    tokenizer.json      the exact Rust tokenizer upstream's HF wrapper runs
    decode_config.json  budgets, temperatures, special tokens: all the runtime reads besides the graph
"""

from __future__ import annotations

import contextlib
import json
import logging
import warnings
from pathlib import Path
from typing import Any

from laya_artifacts.errors import ExportError
from laya_serverless.artifact.layout import (
    GRAPH_FILE,
    GRAPH_INPUTS,
    GRAPH_OUTPUTS,
    TOKENIZER_FILE,
    SpecialTokens,
    write_decode_config,
)

OPSET = 17
FUSION_RECORD = "fusion.json"  # beside the raw export only; build.py moves it into the manifest
DYNAMIC_AXES = {
    "input_ids": {0: "rows", 1: "tokens"},
    "attention_mask": {0: "rows", 1: "tokens"},
    "marker_pos": {0: "rows", 1: "options"},
    "marker_mask": {0: "rows", 1: "options"},
    "qtype": {0: "rows"},
    "logits": {0: "rows", 1: "options"},
    "act_logits": {0: "rows"},
}


def load_reference(checkpoint_dir: str | Path) -> tuple[Any, Any, dict[str, Any]]:
    """Upstream's own loader: (model in FP32 eval mode, HF tokenizer, rl_agent_config)."""
    from laya.train import load_checkpoint

    model, tok, cfg = load_checkpoint(str(checkpoint_dir))
    return model.eval(), tok, cfg


def write_checkpoint_decode_config(tok: Any, cfg: dict[str, Any], out: Path) -> Path:
    """The artifact's decode config from the checkpoint's `rl_agent_config.json` and its tokenizer."""
    special = SpecialTokens(cls_id=tok.cls_token_id, sep_id=tok.sep_token_id, mask_id=tok.mask_token_id,
                            pad_id=tok.pad_token_id, mask_text=tok.mask_token)
    return write_decode_config(out, special=special, max_len=int(cfg.get("max_len", 512)),
                               head_max_len=int(cfg.get("head_max_len", 192)),
                               temperature=cfg.get("temperature", [1.0, 1.0, 1.0]),
                               temperature_by_options=cfg.get("temperature_by_options", {}))


def example_inputs(tok: Any) -> tuple[Any, ...]:
    """A small two-question pass to trace with; every axis is declared dynamic."""
    import torch
    from laya.common import build_sequence, collate_items

    questions = [
        ({"t": "choice", "ins": "which team?", "crit": {"billing": "refunds", "tech": None, "other": ""}}, 0),
        ({"t": "noul", "ins": "is it urgent?", "crit": None}, 2),
    ]
    items = []
    for q, qtype in questions:
        ids, markers = build_sequence(tok, "I was charged twice.", q, 64, 32)
        items.append({"ids": ids, "markers": markers, "qtype": qtype})
    batch = collate_items([items], tok.pad_token_id)
    return tuple(torch.as_tensor(batch[name]) for name in GRAPH_INPUTS)


def export_graph(model: Any, tok: Any, graph_path: Path, *, fused: bool = True) -> dict[str, Any]:
    """Trace `model` into `graph_path`; returns what was fused ({"attention": n, "unfused_attention": m})."""
    import onnx
    import torch

    from laya_artifacts.export.fusion import MARKER_DOMAIN, fused_attention, to_multi_head_attention

    # Traced with autograd on: under no_grad, nn.TransformerEncoderLayer switches to a fused
    # kernel (aten::_transformer_encoder_layer_fwd) that has no ONNX form.
    routing = fused_attention() if fused else contextlib.nullcontext({"fused": 0, "unfused": 0})
    with warnings.catch_warnings(), torch.enable_grad(), routing as counts:
        # The tracer warns about Python branches it bakes in; the ones in Laya's head are
        # shape guards whose taken branch is the one every >= 2-column pass takes.
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model, example_inputs(tok), str(graph_path), dynamo=False, opset_version=OPSET,
            input_names=list(GRAPH_INPUTS), output_names=list(GRAPH_OUTPUTS), dynamic_axes=DYNAMIC_AXES,
            custom_opsets={MARKER_DOMAIN: 1} if fused else None,
        )
    if not fused:
        return {"attention": 0, "unfused_attention": counts["unfused"], "optimizer": None}
    from onnxscript import optimizer

    graph = onnx.load(str(graph_path))
    if to_multi_head_attention(graph) != counts["fused"]:
        raise ExportError("the export lost attention markers: %d traced, fewer in the graph" % counts["fused"])
    # onnxscript's optimizer folds the shape arithmetic the tracer leaves (about half the nodes) and the If
    # the head's `squeeze(-1)` becomes once a contrib node hides its input's shape from the exporter.
    quiet = logging.getLogger("onnxscript.optimizer")  # it warns once per Split it leaves unfolded
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        graph = optimizer.optimize(graph)
    finally:
        quiet.setLevel(level)
    # Its value_info would pin every tensor's type, which the FP16 conversion then contradicts; keep only
    # the fused nodes' outputs typed (ONNX's own shape inference cannot type a contrib node's output).
    typed = {node.output[0] for node in graph.graph.node if node.op_type == "MultiHeadAttention"}
    kept = [v for v in graph.graph.value_info if v.name in typed]
    del graph.graph.value_info[:]
    graph.graph.value_info.extend(kept)
    onnx.save(graph, str(graph_path))
    return {"attention": counts["fused"], "unfused_attention": counts["unfused"],
            "optimizer": "onnxscript.optimizer.optimize %s" % _version("onnxscript"), "nodes": len(graph.graph.node)}


def _version(package: str) -> str:
    from importlib.metadata import version

    return version(package)


def export_checkpoint(checkpoint_dir: str | Path, out_dir: str | Path, *, fused: bool = True) -> Path:
    """Write an FP32 artifact for `checkpoint_dir` into `out_dir` (created) and return it."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model, tok, cfg = load_reference(checkpoint_dir)
    if cfg.get("option_layout", "sequential") != "sequential":
        raise ExportError("option_layout=%r cannot be exported: the graph takes the sequential layout's "
                         "five inputs" % cfg.get("option_layout"))
    fusion = export_graph(model, tok, out / GRAPH_FILE, fused=fused)
    (out / FUSION_RECORD).write_text(json.dumps(fusion, sort_keys=True) + "\n", encoding="utf-8")
    backend = tok.backend_tokenizer
    backend.no_truncation()
    backend.no_padding()
    (out / TOKENIZER_FILE).write_text(backend.to_str(), encoding="utf-8")
    write_checkpoint_decode_config(tok, cfg, out)
    return out
