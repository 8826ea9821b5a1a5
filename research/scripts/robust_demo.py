"""Train a demo head whose int8 answers as its own FP32 (laya_training.robust), and measure it.

    python research/scripts/robust_demo.py --out DIR [--steps 1500 --lr 1e-4 --consistency-weight 4]

Starts from the shipped head (stage 14a). Prints, every `--eval-every` steps, the fake-quantized model
against its own FP32 on the gate's selection cases and on generated cases never trained on, and the FP32
accuracy on dev-1 + dev-2; writes `head.safetensors`, `demo_config.json` (14a's temperatures, the recipe)
and `robust_log.json` to `--out`. The gate's confirmation split is never read.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from laya_artifacts.checkpoints.demo import CONFIG_FILE, HEAD_FILE, HEAD_MAX_LEN, MAX_LEN, assemble_demo, demo_config
from laya_artifacts.goldens.record import shipped_goldens
from laya_artifacts.qat.data import generated_cases, held_out, selection_cases
from laya_artifacts.qat.finetune import _examples
from laya_artifacts.qat.scheme import attach_fake_quant
from laya_training.cases import REPO_DIR, eval_examples, load_cases
from laya_training.data import generate
from laya_training.handwritten import hand_written_examples
from laya_training.robust import RobustSettings, accuracy, self_fidelity, train_robust
from laya_training.train import build_sequences

TRAIN_SETS = ["research/cases/train-%d.jsonl" % i for i in range(1, 5)]
DEV_SETS = ["research/cases/dev-1.jsonl", "research/cases/dev-2.jsonl"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--steps", type=int, default=RobustSettings.steps)
    parser.add_argument("--lr", type=float, default=RobustSettings.lr)
    parser.add_argument("--consistency-weight", type=float, default=RobustSettings.consistency_weight)
    parser.add_argument("--band-weight", type=float, default=RobustSettings.band_weight)
    parser.add_argument("--train-layers", type=int, default=RobustSettings.train_layers)
    parser.add_argument("--eval-every", type=int, default=RobustSettings.eval_every)
    parser.add_argument("--quantized-task", action="store_true",
                        help="the task loss on the fake-quantized pass too")
    parser.add_argument("--worlds", type=int, default=1500)
    parser.add_argument("--seed", type=int, default=RobustSettings.seed)
    args = parser.parse_args()
    settings = RobustSettings(steps=args.steps, lr=args.lr, consistency_weight=args.consistency_weight,
                              band_weight=args.band_weight, train_layers=args.train_layers,
                              eval_every=args.eval_every, seed=args.seed,
                              quantized_task=args.quantized_task)
    import laya
    import torch

    from laya_artifacts.export.onnx_export import load_reference

    torch.manual_seed(settings.seed)
    torch.set_num_threads(settings.threads)
    say = lambda m: print("[%s] %s" % (time.strftime("%H:%M:%S"), m), flush=True)  # noqa: E731
    args.out.mkdir(parents=True, exist_ok=True)
    checkpoint = args.out / "start-checkpoint"
    if not (checkpoint / "rl_agent_config.json").is_file():
        assemble_demo(checkpoint, progress=say)
    config = demo_config()["checkpoint_config"]
    goldens = json.loads(shipped_goldens(checkpoint).read_text(encoding="utf-8"))
    agent = laya.Agent(str(checkpoint), device="cpu")
    selection = selection_cases(goldens)
    generated = generated_cases(selection, settings.seed, 3)
    cases = _examples(agent, selection + [c for c in generated if not held_out(c["id"], 5)], say)
    held = _examples(agent, [c for c in generated if held_out(c["id"], 5)], say)
    select = [e for e in cases if e.origin == "selection"]
    say("gate cases: %d trained on (%d selection), %d generated held out" % (len(cases), len(select), len(held)))

    tok = agent.tok
    gold = eval_examples([c for name in TRAIN_SETS for c in load_cases(REPO_DIR / name)])
    examples = generate(args.worlds, settings.seed, 4) + hand_written_examples(gold, 4, settings.seed + 5_000_003)
    rows = build_sequences(tok, examples, MAX_LEN, HEAD_MAX_LEN)
    dev = build_sequences(tok, eval_examples([c for n in DEV_SETS for c in load_cases(REPO_DIR / n)]),
                          MAX_LEN, HEAD_MAX_LEN)
    say("%d labelled training rows, %d dev rows" % (len(rows), len(dev)))

    model, _tok, _cfg = load_reference(checkpoint)
    attach_fake_quant(model)
    log: list[dict] = []

    def measure(step: int) -> None:
        entry = {"step": step, "selection": self_fidelity(model, select), "held_out": self_fidelity(model, held),
                 "dev_accuracy": accuracy(model, dev, tok.pad_token_id)}
        log.append(entry)
        say("measured at %d: %s" % (step, json.dumps(entry)))
        (args.out / "robust_log.json").write_text(json.dumps({"settings": settings.as_dict(), "log": log}, indent=1))

    train_robust(model, rows, cases, config["temperature"], tok.pad_token_id, settings, measure, say)
    write_head(model, args.out, settings, config)
    return 0


def write_head(model, out: Path, settings: RobustSettings, config: dict) -> None:
    from safetensors.torch import save_file

    from laya_artifacts.checkpoints.demo import sha256_file

    n = len(model.encoder.encoder.layer)
    top = tuple("encoder.encoder.layer.%d." % i for i in range(n - settings.train_layers, n))
    state = {k: v.detach().half().contiguous() for k, v in model.state_dict().items()
             if (not k.startswith("encoder.") or k.startswith(top)) and "fake_quant" not in k
}
    save_file(state, str(out / HEAD_FILE), metadata={"format": "pt"})
    meta = dict(demo_config(), head_sha256=sha256_file(out / HEAD_FILE), checkpoint_config=config,
                robust_recipe=settings.as_dict())
    (out / CONFIG_FILE).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
