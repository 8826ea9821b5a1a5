"""How far the artifact's int8 scheme moves the demo's option-marker states, against how far apart they sit.

    python research/scripts/int8_marker_shift.py [--cases 60]

The demo is assembled and its built-in corpus recorded with upstream (about a minute); its first `--cases`
selection cases are run through upstream's model twice, in FP32 and under the fine-tune's fake quantization
(`laya_artifacts.qat.scheme`, the `encoder` candidate's scheme). At the encoder's output, for each question row:
the mean pairwise cosine of its option markers, their spread around their mean, and how far int8 moves them,
both as a fraction of a marker's norm. Medians over rows are printed. If int8 moved the markers by a small part
of their spread, the head would see little of it; docs/artifacts-gate.md ("measured on a quiet machine") reads it.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path


def _median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def main() -> int:
    import torch
    from torch.ao.quantization import disable_fake_quant, enable_fake_quant

    from laya_artifacts.checkpoints.demo import demo_checkpoint
    from laya_artifacts.export.onnx_export import load_reference
    from laya_artifacts.goldens.corpus import builtin_cases
    from laya_artifacts.goldens.record import record_goldens
    from laya_artifacts.qat.finetune import QatSettings, teacher_examples
    from laya_artifacts.qat.scheme import attach_fake_quant

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=60, help="selection cases measured (default %(default)s)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as scratch:
        checkpoint = demo_checkpoint(Path(scratch) / "checkpoint")
        goldens = record_goldens(checkpoint, "demo", None, cases=builtin_cases())
        examples, _ = teacher_examples(checkpoint, goldens, QatSettings(generated_per_case=0, threads=1), print)
        model, _, _ = load_reference(checkpoint)
    attach_fake_quant(model)
    model.eval()
    captured: dict[str, torch.Tensor] = {}
    model.encoder.register_forward_hook(lambda _m, _i, out: captured.__setitem__("h", out.last_hidden_state))

    def markers(batch: dict[str, torch.Tensor], fake_quant: bool) -> torch.Tensor:
        model.apply(enable_fake_quant if fake_quant else disable_fake_quant)
        with torch.no_grad():
            model(batch["input_ids"], batch["attention_mask"], batch["marker_pos"], batch["marker_mask"],
                  batch["qtype"])
        h = captured["h"]
        return torch.gather(h, 1, batch["marker_pos"].clamp(min=0)[:, :, None].expand(-1, -1, h.size(-1)))

    cosines, spreads, moves = [], [], []
    for example in [e for e in examples if e.origin == "selection"][:args.cases]:
        fp32, int8 = markers(example.batch, False), markers(example.batch, True)
        for row, count in enumerate(example.batch["marker_mask"].sum(-1).tolist()):
            v, w = fp32[row, :count], int8[row, :count]
            norm = v.norm(dim=-1).mean()
            pairs = torch.nn.functional.cosine_similarity(v[:, None], v[None], dim=-1)
            cosines.append(float(pairs[~torch.eye(count, dtype=torch.bool)].mean()))
            spreads.append(float((v - v.mean(0, keepdim=True)).norm(dim=-1).mean() / norm))
            moves.append(float((w - v).norm(dim=-1).mean() / norm))
    print("rows %d; median marker cosine %.3f; median spread / norm %.4f; median int8 move / norm %.4f; "
          "median move / spread %.2f" % (len(moves), _median(cosines), _median(spreads), _median(moves),
                                         _median([m / s for m, s in zip(moves, spreads, strict=True)])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
