"""Ours against upstream on one checkpoint and its built artifact, in one run: cold (spawn to first answer), warm
p50 per call (1 and 8 questions on a ~12-token and a ~400-token state) and peak RSS, each contender in a fresh
process, rounds rotating the order. The contenders and their children are `laya-artifacts bench runtime`'s; this
takes a checkpoint and artifact already built (the published shapes take tens of minutes to build).

    python scripts/against_upstream.py CHECKPOINT ARTIFACT [--contenders ours-fp32,laya-torch,laya-onnx] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from laya_artifacts.bench.runtime import REFERENCE, SCENARIOS, _run_child


def parser() -> argparse.ArgumentParser:
    """This script's arguments (tests/unit/test_docs_commands.py parses the docs' command lines with it)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("artifact", type=Path)
    parser.add_argument("--contenders", default="ours-fp32,laya-torch,laya-onnx")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--quick", action="store_true")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    contenders = args.contenders.split(",")
    reports: dict[str, list[dict]] = {c: [] for c in contenders}
    for index in range(args.rounds):
        for contender in contenders[index % len(contenders):] + contenders[:index % len(contenders)]:
            report = _run_child(contender, args.checkpoint, args.artifact, args.quick)
            reports[contender].append(report)
            print(json.dumps({"round": index, "contender": contender, "cold_ms": round(report["cold_ms"]),
                              "peak_rss_mb": round(report["peak_rss_mb"]),
                              **{k: round(statistics.median(v), 1) for k, v in report["warm_ms"].items()}}),
                  flush=True)
    summary = {c: {"cold_ms": statistics.median(r["cold_ms"] for r in rs),
                   **{k: statistics.median(x for r in rs for x in r["warm_ms"][k]) for k in SCENARIOS}}
               for c, rs in reports.items()}
    print("| contender | cold | " + " | ".join(SCENARIOS) + " |")
    print("|---|---:|" + "---:|" * len(SCENARIOS))
    for contender, row in summary.items():
        ref = summary.get(REFERENCE, row)
        cells = ["%.0f ms (x%.2f)" % (row[k], ref[k] / row[k]) for k in ("cold_ms", *SCENARIOS)]
        print("| %s | %s |" % (contender, " | ".join(cells)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
