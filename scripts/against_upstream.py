"""Ours against upstream on one checkpoint and its built artifact, in one run: cold (spawn to first answer, wall
and CPU seconds), warm p50 per call (`bench/runtime.py`'s scenarios: 1 question at ~12, ~128 and 512 tokens, 8
questions short and long) and peak RSS, each contender in a fresh process, rounds rotating the order, optionally
under the CFS quota of a Lambda memory size (`--memory`: MB/1769 vCPU; needs root and cgroup v1's cpu controller).
The contenders and their children are `laya-artifacts bench runtime`'s; this takes a checkpoint and artifact already
built (the published shapes take tens of minutes to build).

    python scripts/against_upstream.py CHECKPOINT ARTIFACT [--contenders ours-fp32,laya-torch,laya-onnx] [--rounds 2]
                                       [--memory MB]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from laya_artifacts.bench.runtime import REFERENCE, SCENARIOS, _run_child
from laya_artifacts.tune.quota import close_quota, open_quota


def parser() -> argparse.ArgumentParser:
    """This script's arguments (tests/unit/test_docs_commands.py parses the docs' command lines with it)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("artifact", type=Path)
    parser.add_argument("--contenders", default="ours-fp32,laya-torch,laya-onnx")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--memory", type=int, metavar="MB", help="run every contender under this Lambda size's quota")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    contenders = args.contenders.split(",")
    reports: dict[str, list[dict]] = {c: [] for c in contenders}
    quota = open_quota(args.memory, "laya-against-upstream") if args.memory else None
    try:
        for index in range(args.rounds):
            for contender in contenders[index % len(contenders):] + contenders[:index % len(contenders)]:
                report = _run_child(contender, args.checkpoint, args.artifact, args.quick,
                                    quota.tasks_file() if quota is not None else None)
                reports[contender].append(report)
                print(json.dumps({"round": index, "contender": contender, "memory_mb": args.memory,
                                  "cold_ms": round(report["cold_ms"]), "cold_cpu_s": round(report["cold_cpu_s"], 2),
                                  "peak_rss_mb": round(report["peak_rss_mb"]),
                                  **{k: round(statistics.median(v), 1) for k, v in report["warm_ms"].items()}}),
                      flush=True)
    finally:
        if quota is not None:
            close_quota(quota)
    columns = ("cold_ms", "cold_cpu_s", *SCENARIOS)
    summary = {c: {"cold_ms": statistics.median(r["cold_ms"] for r in rs),
                   "cold_cpu_s": statistics.median(r["cold_cpu_s"] for r in rs),
                   **{k: statistics.median(x for r in rs for x in r["warm_ms"][k]) for k in SCENARIOS}}
               for c, rs in reports.items()}
    print("| contender | cold wall | cold CPU | " + " | ".join(SCENARIOS) + " |")
    print("|---|---:|---:|" + "---:|" * len(SCENARIOS))
    for contender, row in summary.items():
        ref = summary.get(REFERENCE, row)
        cells = [("%.1f s" if k == "cold_cpu_s" else "%.0f ms") % row[k] + " (x%.2f)" % (ref[k] / row[k])
                 for k in columns]
        print("| %s | %s |" % (contender, " | ".join(cells)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
