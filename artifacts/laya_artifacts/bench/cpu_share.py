"""Busy-instance latency under Lambda's CPU share: the runtime's own thread sizing against hand settings.

    sudo laya-artifacts bench cpu-share ARTIFACT_DIR [--memory 1024,2048,3008] [--rounds 3] [--json OUT]

Lambda grants CPU time by memory (1,769 MB buys one vCPU) while showing two or more cores. Here that is
emulated with a cgroup-v1 CFS quota per memory size (period 100 ms, quota MB/1769 of it, a high
`cpu.shares` so that neighbouring processes do not bind before the quota does); it needs root and a
cgroup-v1 cpu controller at /sys/fs/cgroup/cpu. Each configuration runs in a fresh process that moves
itself into the size's cgroup before importing onnxruntime, then answers back to back (a busy instance):

- `runtime`: what the runtime chooses by itself (`core.cpu_share`, reading the cgroup it runs in);
- `ort-default`: ONNX Runtime's defaults (a thread per core, spinning on), what the runtime did before;
- `1t`, `2t`, `1t-spin`, `2t-spin`: hand settings.

Rounds alternate the configuration order, so drift and neighbours hit every configuration alike. The
figure per (size, configuration, scenario) is the median over rounds of the mean latency of a round.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from laya_serverless.core.cpu_share import MB_PER_VCPU

CGROUP_V1_CPU = Path("/sys/fs/cgroup/cpu")
PERIOD_US = 100_000
SHORT_STATE = "I was charged twice for my order, please refund me."
LONG_STATE = ("The customer writes that the invoice for March shows two identical charges, that support did "
              "not answer three emails, that the mobile app logs them out after every update, and that they "
              "are considering moving to a competitor unless this is resolved this week. ") * 3
QUESTIONS = {
    "team": {"type": "choice", "instructions": "Which team should handle this?",
             "criteria": {"billing": "payments and refunds", "tech": "bugs and outages", "other": ""}},
    "urgency": {"type": "score", "instructions": "How urgent is it?", "criteria": ["low", "medium", "high"]},
    "churn": {"type": "noul", "instructions": "Is the customer about to leave?"},
    "refund": {"type": "noul", "instructions": "Does the customer ask for a refund?"},
}
SCENARIOS = {  # name: (state, questions, timed decisions)
    "1q-short": (SHORT_STATE, 1, 40),
    "4q-short": (SHORT_STATE, 4, 20),
    "1q-long": (LONG_STATE, 1, 12),
}
CONFIGS = ("runtime", "ort-default", "1t", "2t", "1t-spin", "2t-spin")


def _threading(config: str) -> tuple[Any, dict[str, Any]]:
    from laya_serverless.core.cpu_share import size_threads
    from laya_serverless.core.session import Threading

    if config == "runtime":
        share = size_threads(None, False)
        return share.threading(), share.report()
    if config == "ort-default":
        return Threading(None, spinning=True), {}
    count, spin = config.split("-")[0], config.endswith("-spin")
    return Threading(int(count.rstrip("t")), spinning=spin), {}


def child(artifact: str, config: str, cgroup: str) -> None:
    Path(cgroup, "tasks").write_text(str(os.getpid()))  # before onnxruntime starts its threads
    from laya_serverless.core.decider import Decider

    threading, share = _threading(config)
    decider = Decider.from_artifact(artifact, threads=threading, verify=False)
    out: dict[str, Any] = {"config": config, "share": share, "scenarios": {}}
    for name, (state, count, runs) in SCENARIOS.items():
        questions = dict(list(QUESTIONS.items())[:count])
        for _ in range(3):
            decider.predict(state, questions)
        cpu, wall = time.process_time(), time.perf_counter()
        for _ in range(runs):
            decider.predict(state, questions)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        out["scenarios"][name] = {"mean_ms": wall / runs * 1000, "cpu_ms": cpu / runs * 1000}
    print(json.dumps(out))


def _cgroup(memory: int) -> Path:
    path = CGROUP_V1_CPU / ("laya-share-%d-%d" % (os.getpid(), memory))
    path.mkdir(exist_ok=True)
    (path / "cpu.cfs_period_us").write_text(str(PERIOD_US))
    (path / "cpu.cfs_quota_us").write_text(str(round(memory / MB_PER_VCPU * PERIOD_US)))
    (path / "cpu.shares").write_text("262144")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="laya-artifacts bench cpu-share", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("artifact")
    parser.add_argument("--memory", default="1024,2048,3008")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--json", type=Path)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--cgroup", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.artifact, args.child, args.cgroup)
        return 0
    sizes = [int(m) for m in args.memory.split(",")]
    configs = args.configs.split(",")
    groups = {m: _cgroup(m) for m in sizes}
    results: dict[str, Any] = {}
    try:
        for round_ in range(args.rounds):
            for memory in sizes:
                order = configs[round_ % len(configs):] + configs[:round_ % len(configs)]
                for config in order:
                    done = subprocess.run([sys.executable, __file__, args.artifact, "--child", config, "--cgroup",
                                           str(groups[memory])], capture_output=True, text=True, check=True)
                    found = json.loads(done.stdout.strip().splitlines()[-1])
                    runs = results.setdefault(str(memory), {}).setdefault(config, {"share": found["share"],
                                                                                    "rounds": []})
                    runs["rounds"].append(found["scenarios"])
                    print("round %d  %5d MB  %-11s %s" % (round_ + 1, memory, config, "  ".join(
                        "%s %.1f ms" % (k, v["mean_ms"]) for k, v in found["scenarios"].items())), flush=True)
    finally:
        for path in groups.values():
            path.rmdir()
    summary = summarize(results)
    if args.json:
        args.json.write_text(json.dumps({"results": results, "summary": summary}, indent=1))
    for line in table(summary):
        print(line)
    return 0


def summarize(results: dict[str, Any]) -> dict[str, Any]:
    """Per size, configuration and scenario: the median of the round means, and its ratio to the best."""
    summary: dict[str, Any] = {}
    for memory, by_config in results.items():
        medians = {config: {s: statistics.median(r[s]["mean_ms"] for r in runs["rounds"]) for s in SCENARIOS}
                   for config, runs in by_config.items()}
        cpu = {config: {s: statistics.median(r[s]["cpu_ms"] for r in runs["rounds"]) for s in SCENARIOS}
               for config, runs in by_config.items()}
        hand = [c for c in medians if c != "runtime"]
        best = {s: min(medians[c][s] for c in hand) for s in SCENARIOS}
        summary[memory] = {"mean_ms": medians, "cpu_ms": cpu, "best_hand_ms": best,
                           "runtime_share": by_config.get("runtime", {}).get("share"),
                           "runtime_vs_best": {s: best[s] / medians["runtime"][s] for s in SCENARIOS}
                           if "runtime" in medians else None,
                           "runtime_vs_ort_default": {s: medians["ort-default"][s] / medians["runtime"][s]
                                                      for s in SCENARIOS}
                           if "runtime" in medians and "ort-default" in medians else None}
    return summary


def table(summary: dict[str, Any]) -> list[str]:
    lines = []
    for memory, found in summary.items():
        lines.append("%s MB (runtime chose %s)" % (memory, found["runtime_share"]))
        for config, by_scenario in found["mean_ms"].items():
            lines.append("  %-11s " % config + "  ".join("%s %6.1f ms (cpu %6.1f)" % (s, v, found["cpu_ms"][config][s])
                                                         for s, v in by_scenario.items()))
        for key in ("runtime_vs_best", "runtime_vs_ort_default"):
            if found[key]:
                lines.append("  %-23s " % key + "  ".join("%s %.2fx" % kv for kv in found[key].items()))
    return lines


if __name__ == "__main__":
    raise SystemExit(main())
