"""Where ONNX Runtime's FP32 and PyTorch's FP32 part, layer by layer, against float64 (issue 58, item 6).

    python research/scripts/fp32_layer_drift.py CHECKPOINT [--cases 12] [--out /tmp/fp32-drift]

Exports the checkpoint twice (with the fused MultiHeadAttention, and without: `export_checkpoint(fused=...)`),
exposes every encoder layer's output (`/encoder/layers.N/Add_1`) and the final norm as graph outputs, and runs
gate-corpus cases (every n-th built-in case, encoded by upstream) through: ORT fused, ORT unfused, upstream's
model in FP32, and the same model in float64. Per layer it prints the max |difference| over real (unpadded)
tokens, relative to the layer's max |float64| activation, of each FP32 path against float64, and the max
|d logit| at the end. A path whose error grows faster than PyTorch's is where a more faithful graph could help.
"""

from __future__ import annotations

import argparse
import copy
import re
from pathlib import Path
from typing import Any

import numpy as np


def _with_layer_outputs(graph: Path, out: Path) -> list[str]:
    import onnx

    model = onnx.load(str(graph))
    produced = {o for n in model.graph.node for o in n.output}
    names = sorted((o for o in produced if re.fullmatch(r"/encoder/layers\.\d+/Add_1_output_0", o)),
                   key=lambda o: int(o.split("layers.")[1].split("/")[0]))[:-1]  # the last one: see the final norm
    names.append("/encoder/final_norm/LayerNormalization_output_0")
    for name in names:
        model.graph.output.append(onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None))
    onnx.save(model, str(out))
    return names


def _session(graph: Path) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED  # as the artifact is built
    options.intra_op_num_threads = 1
    return ort.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])


def _torch_states(model: Any, batch: dict[str, Any], dtype: Any) -> tuple[list[np.ndarray], np.ndarray]:
    import torch

    with torch.no_grad():
        found = model.encoder(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                              output_hidden_states=True)
        logits, _act = model(batch["input_ids"], batch["attention_mask"], batch["marker_pos"], batch["marker_mask"],
                             batch["qtype"])
    # hidden_states: the embeddings, then each layer's output, the last one after the final norm
    states = [h.to(dtype).numpy() for h in found.hidden_states[1:-1]] + [found.last_hidden_state.to(dtype).numpy()]
    return states, logits.to(dtype).numpy()


def main() -> None:
    import laya
    import torch
    from laya.common import collate_items

    from laya_artifacts.export.onnx_export import GRAPH_FILE, export_checkpoint
    from laya_artifacts.goldens.corpus import builtin_cases
    from laya_artifacts.goldens.record import _encode_case

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint")
    parser.add_argument("--cases", type=int, default=12)
    parser.add_argument("--out", default="/tmp/fp32-drift")
    parser.add_argument("--max-chars", type=int, default=0, help="only cases whose state is this short (0: any)")
    args = parser.parse_args()
    out = Path(args.out)
    torch.set_num_threads(1)
    sessions, names = {}, []
    for fused in (True, False):
        raw = export_checkpoint(args.checkpoint, out / ("raw-fused" if fused else "raw-unfused"), fused=fused)
        names = _with_layer_outputs(Path(raw) / GRAPH_FILE, out / ("probe-%s.onnx" % fused))
        sessions["ort-fused" if fused else "ort-unfused"] = _session(out / ("probe-%s.onnx" % fused))
    agent = laya.Agent(args.checkpoint, device="cpu")
    model32 = agent.model.eval()
    model64 = copy.deepcopy(model32).double()
    pool = [c for c in builtin_cases() if not args.max_chars or len(str(c["state"])) <= args.max_chars]
    cases = [c for i, c in enumerate(pool) if i % max(1, len(pool) // args.cases) == 0][: args.cases]
    worst: dict[str, list[float]] = {}
    for case in cases:
        _, items, _ = _encode_case(agent, case)
        if not items:
            continue
        batch = collate_items([items], agent.tok.pad_token_id)
        exact, exact_logits = _torch_states(model64, batch, torch.float64)
        found = {"torch-fp32": _torch_states(model32, batch, torch.float64)}
        feeds = {k: batch[k].numpy() for k in ("input_ids", "attention_mask", "marker_pos", "marker_mask", "qtype")}
        for label, session in sessions.items():
            kinds = {"tensor(bool)": np.bool_, "tensor(int64)": np.int64, "tensor(int32)": np.int32}
            feed = {i.name: feeds[i.name].astype(kinds.get(i.type, np.float32)) for i in session.get_inputs()}
            outputs = session.run(["logits"] + names, feed)
            found[label] = ([o.astype(np.float64) for o in outputs[1:]], outputs[0].astype(np.float64))
        keep = batch["attention_mask"].numpy().astype(bool)
        for label, (states, logits) in found.items():
            row = [float(np.abs(s[keep] - e[keep]).max() / np.abs(e[keep]).max())
                   for s, e in zip(states, exact, strict=True)]
            markers = batch["marker_mask"].numpy().astype(bool)
            row.append(float(np.abs(logits[markers] - exact_logits[markers]).max()))
            worst[label] = [max(a, b) for a, b in zip(worst.get(label, row), row, strict=True)]
    print("max over %d cases; per layer: max |x - x64| / max |x64| over real tokens; last: max |d logit|" % len(cases))
    header = ["layer %d" % i for i in range(len(names) - 1)] + ["final norm", "logits"]
    for label, row in worst.items():
        print("%-12s %s" % (label, " ".join("%s %.2e" % (h, v) for h, v in zip(header, row, strict=True))))


if __name__ == "__main__":
    main()
