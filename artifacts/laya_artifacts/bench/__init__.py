"""`laya-artifacts bench NAME ...`: the benchmarks and calibrations behind the figures in docs/.

Each module keeps its own `main(argv)`; run from the repository root (they read its goldens and stores).
"""

from __future__ import annotations

import argparse
import importlib

from laya_serverless.command import Command

BENCHMARKS = {
    "runtime": "side by side against upstream laya and ONNXAgent: warm, cold, RSS, size",
    "cold-start": "a fresh process to its first answer, from a published artifact",
    "handler": "the Lambda handler's own overhead on saved API Gateway events",
    "jobs": "batch-job throughput and the splitter's token rate (`-c token_rate`)",
    "load-path": "graph load paths: file, memory, ORT format",
    "graph-memory": "a graph's INIT peak and steady memory, way by way, in its own memory cgroup",
    "init-peak": "an artifact opened the runtime's way: INIT peak over steady, session time, answers, way by way",
    "tokenizer-load": "what loading a tokenizer costs a cold start: from_file, from_str, from_buffer, pickle",
    "int8-classes": "int8 gate verdicts on this CPU and an emulated AVX2 CPU",
    "profile-graph": "per-operator time of one artifact's graph",
    "cpu-share": "busy latency under an emulated Lambda CPU quota: the runtime's thread sizing vs hand settings",
    "request-overhead": "time outside the graph per request, ours against upstream ONNXAgent on one graph",
    "arena": "RSS before and after one large pass: does onnxruntime's arena give its memory back",
    "download": "S3 fetch of a large object: one stream against parallel ranged parts (local moto server)",
}


def run(args: argparse.Namespace) -> int:
    module = importlib.import_module("laya_artifacts.bench." + args.benchmark.replace("-", "_"))
    return int(module.main(args.arguments) or 0)


def _arguments(bench: argparse.ArgumentParser) -> None:
    bench.add_argument("benchmark", choices=BENCHMARKS)
    bench.add_argument("arguments", nargs=argparse.REMAINDER, help="the benchmark's own options (NAME --help)")


COMMANDS = (Command("bench", "run a benchmark (%s)" % ", ".join(BENCHMARKS), _arguments, run,
                    description="\n".join("%-14s %s" % item for item in BENCHMARKS.items())),)
