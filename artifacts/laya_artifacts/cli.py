"""`laya-artifacts`: build artifacts from Laya checkpoints, and make local test checkpoints."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

TARGETS = ("cpu-fp32",)


def _progress(message: str) -> None:
    print("[laya-artifacts] %s" % message, file=sys.stderr, flush=True)


def _build(args: argparse.Namespace) -> int:
    from .export import export_checkpoint

    checkpoint = Path(args.checkpoint)
    if not (checkpoint / "rl_agent_config.json").is_file():
        _progress("error: %s is not a Laya checkpoint directory (no rl_agent_config.json)" % checkpoint)
        return 2
    started = time.perf_counter()
    _progress("exporting %s to ONNX (%s) into %s" % (checkpoint, args.target, args.out))
    out = export_checkpoint(checkpoint, args.out)
    _progress("done in %.1f s: %s" % (time.perf_counter() - started, out))
    return 0


def _make_checkpoint(args: argparse.Namespace) -> int:
    from .checkpoints import make_checkpoint

    make_checkpoint(args.kind, args.out, seed=args.seed, progress=_progress)
    return 0


def parser() -> argparse.ArgumentParser:
    from .checkpoints import KINDS

    root = argparse.ArgumentParser(prog="laya-artifacts", description=__doc__)
    commands = root.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", help="export a checkpoint to a serving artifact")
    build.add_argument("checkpoint", help="a local checkpoint directory in the upstream Laya layout")
    build.add_argument("--target", choices=TARGETS, default="cpu-fp32")
    build.add_argument("--out", required=True, help="artifact directory to write")
    build.set_defaults(run=_build)
    make = commands.add_parser("make-checkpoint", help="write a local test/benchmark checkpoint")
    make.add_argument("kind", choices=KINDS)
    make.add_argument("--out", required=True)
    make.add_argument("--seed", type=int, default=0)
    make.set_defaults(run=_make_checkpoint)
    return root


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return int(args.run(args))


if __name__ == "__main__":
    raise SystemExit(main())
