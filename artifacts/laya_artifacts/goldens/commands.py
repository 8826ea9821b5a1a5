"""The goldens stage's commands: `laya-artifacts goldens` (record with upstream) and `parity` (replay, no torch)."""

from __future__ import annotations

import argparse
from pathlib import Path

from laya_serverless.artifact.targets import CPU_INT8, TARGETS
from laya_serverless.command import Command


def _goldens(args: argparse.Namespace) -> int:
    from laya_artifacts.checkpoints.sources import resolve_checkpoint
    from laya_artifacts.goldens.corpus import gate_corpus
    from laya_artifacts.goldens.record import partial_path, record_goldens, write_goldens

    cases = gate_corpus(args.gate_cases)
    checkpoint, name, revision = resolve_checkpoint(args.checkpoint, args.revision, args.progress)
    args.progress("recording %d cases (%d question rows) with upstream laya" % (
        len(cases), sum(len(c["questions"]) for c in cases)))
    goldens = record_goldens(checkpoint, args.name or name, revision, cases=cases, progress=args.progress,
                             workers=args.workers, partial=partial_path(Path(args.out)))
    path = write_goldens(goldens, Path(args.out))
    summary = goldens["corpus"]["summary"]
    args.progress("wrote %s: %d cases, %d rows (%s), corpus sha256 %s" % (
        path, summary["cases"], summary["rows"],
        ", ".join("%s %d" % kv for kv in sorted(summary["rows_by_split"].items())), goldens["corpus"]["sha256"]))
    return 0


def _parity(args: argparse.Namespace) -> int:
    from laya_artifacts.goldens.corpus import SPLITS
    from laya_artifacts.goldens.record import load_goldens
    from laya_serverless.artifact.layout import DecodeConfig
    from laya_serverless.gate.replay import run_gate

    DecodeConfig.load(Path(args.artifact))  # a clear error for a directory that is not an artifact
    splits = tuple(args.split) if args.split else SPLITS
    report = run_gate(Path(args.artifact), load_goldens(Path(args.goldens)), args.target, splits=splits)
    print(report.table())
    return 0 if report.passed else 1


def _goldens_arguments(goldens: argparse.ArgumentParser) -> None:
    from laya_artifacts.goldens.record import RECORD_WORKERS

    goldens.add_argument("checkpoint")
    goldens.add_argument("--revision")
    goldens.add_argument("--name")
    goldens.add_argument("--out", required=True, help="directory for goldens.json (a stopped recording resumes there)")
    goldens.add_argument("--workers", type=int, default=RECORD_WORKERS,
                         help="processes recording at once, one torch thread each (default %(default)s)")
    goldens.add_argument("--gate-cases", action="append", default=[], metavar="FILE.jsonl",
                         help="your own gate cases added to the built-in corpus (repeatable)")


def _parity_arguments(parity: argparse.ArgumentParser) -> None:
    from laya_artifacts.goldens.corpus import SPLITS

    parity.add_argument("artifact")
    parity.add_argument("--goldens", required=True)
    parity.add_argument("--target", choices=TARGETS, default=CPU_INT8)
    parity.add_argument("--split", action="append", choices=SPLITS,
                        help="replay only this split (repeatable; default: both, and both must pass)")


COMMANDS = (
    Command("goldens", "record golden rows with upstream laya (PyTorch FP32)", _goldens_arguments, _goldens),
    Command("parity", "gate an artifact against golden rows (no torch needed)", _parity_arguments, _parity),
)
