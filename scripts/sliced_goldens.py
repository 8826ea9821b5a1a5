"""Goldens for a real-size checkpoint on a fixed slice of the gate corpus: every Nth built-in case (both splits).

    python scripts/sliced_goldens.py CHECKPOINT NAME OUT_DIR [--every 10]

Recording the whole corpus with upstream PyTorch takes over an hour at the published shapes on two cores; a
slice gives a build a gate to pass in minutes. The slice is named in the goldens (its case ids), so a build
gated on it says so; it is for measuring, never for publishing a real checkpoint.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from laya_artifacts.goldens.corpus import builtin_cases
from laya_artifacts.goldens.record import record_goldens, write_goldens


def parser() -> argparse.ArgumentParser:
    """This script's arguments (tests/unit/test_docs_commands.py parses the docs' command lines with it)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("name")
    parser.add_argument("out", type=Path)
    parser.add_argument("--every", type=int, default=10)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    cases = builtin_cases()[:: args.every]
    started = time.monotonic()
    goldens = record_goldens(args.checkpoint, args.name, None, cases=cases)
    path = write_goldens(goldens, args.out)
    print("%s: %d cases, %d rows in %.0f s" % (path, len(cases), len(goldens["rows"]), time.monotonic() - started))
    return 0


if __name__ == "__main__":
    sys.exit(main())
