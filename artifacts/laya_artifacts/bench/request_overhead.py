"""Per-request time outside the graph: ours against upstream `ONNXAgent`, on the same ONNX graph.

    laya-artifacts bench request-overhead CHECKPOINT_DIR ARTIFACT_DIR [--rounds 5] [--calls 300]

Both run the artifact's `model.onnx` (ONNXAgent is handed it as `onnx_path`), one intra-op thread each,
each in a fresh process, rounds alternating which goes first. Each session's `run` is timed inside the
process, so a call splits into the graph and everything else: tokenization, question encoding, feeds,
decode, Python. The case is issue 46's short one: 1 question on a 12-token state. The figure is the median
over rounds of each round's median per call.

With `--graphs NAME=GRAPH ...` it times graphs alone instead, in one process, call by call interleaved
(one intra-op thread, spinning off, full graph optimization), on the same case's feeds: e.g. ours and
upstream's int8 graph of one checkpoint, to see how much of a gap is the graph's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

STATE = "I was charged twice for my order, please refund me."
QUESTIONS = {"team": {"type": "choice", "instructions": "Which team should handle this?",
                      "criteria": {"billing": "payments and refunds", "tech": "bugs and outages", "other": ""}}}
CONTENDERS = ("ours", "laya-onnx")


class _Timed:
    """An onnxruntime session whose `run` adds its wall time to `spent`."""

    def __init__(self, session: Any) -> None:
        self.session, self.spent = session, 0.0

    def run(self, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return self.session.run(*args, **kwargs)
        finally:
            self.spent += time.perf_counter() - started

    def __getattr__(self, name: str) -> Any:
        return getattr(self.session, name)


def _one_thread_session(graph: Path) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = 1, 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(str(graph), sess_options=options, providers=["CPUExecutionProvider"])


def child(contender: str, checkpoint: str, artifact: str, calls: int) -> None:
    import warnings

    warnings.simplefilter("ignore")
    graph = Path(artifact) / "model.onnx"
    if contender == "ours":
        from laya_serverless import Decider
        from laya_serverless.core.session import Threading

        decider = Decider.from_artifact(artifact, threads=Threading(1), verify=False)
        timed = decider.session._session = _Timed(decider.session._session)  # type: ignore[attr-defined]
        predict = lambda: decider.predict(STATE, QUESTIONS)  # noqa: E731
    else:
        from laya.onnx_agent import ONNXAgent

        agent = ONNXAgent(checkpoint, onnx_path=str(graph))
        timed = agent.session = _Timed(_one_thread_session(graph))
        predict = lambda: agent.system_one(STATE, QUESTIONS)  # noqa: E731
    for _ in range(20):
        predict()
    totals, graphs = [], []
    for _ in range(calls):
        timed.spent = 0.0
        started = time.perf_counter()
        predict()
        totals.append(time.perf_counter() - started)
        graphs.append(timed.spent)
    print(json.dumps({"total_ms": statistics.median(totals) * 1000, "graph_ms": statistics.median(graphs) * 1000,
                      "outside_ms": statistics.median(t - g for t, g in zip(totals, graphs, strict=True)) * 1000}))


def compare_graphs(artifact: str, graphs: dict[str, str], calls: int) -> None:
    """Each graph's median `run` on the short case's feeds, interleaved call by call."""
    import onnxruntime as ort

    from laya_serverless import Decider
    from laya_serverless.core.questions import parse_questions

    decider = Decider.from_artifact(artifact, threads=1, verify=False)
    questions = parse_questions(QUESTIONS)
    feeds = decider.feeds(decider.rows_for(STATE, questions, decider.config.max_len, decider.config.head_max_len),
                          questions)
    sessions = {}
    for name, graph in graphs.items():
        options = ort.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads = 1, 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        sessions[name] = ort.InferenceSession(graph, sess_options=options, providers=["CPUExecutionProvider"])
    spent: dict[str, list[float]] = {name: [] for name in sessions}
    for n in range(20 + calls):
        for name, session in sessions.items():
            started = time.perf_counter()
            session.run(["logits", "act_logits"], feeds)
            if n >= 20:
                spent[name].append(time.perf_counter() - started)
    print("%d tokens in the row, %d calls each" % (feeds["input_ids"].shape[1], calls))
    for name, times in spent.items():
        print("%-16s graph p50 %.3f ms" % (name, statistics.median(times) * 1000))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="laya-artifacts bench request-overhead", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoint")
    parser.add_argument("artifact")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--graphs", nargs="+", metavar="NAME=GRAPH", help="time these graphs alone instead")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.graphs:
        compare_graphs(args.artifact, dict(g.split("=", 1) for g in args.graphs), args.calls)
        return 0
    if args.child:
        child(args.child, args.checkpoint, args.artifact, args.calls)
        return 0
    found: dict[str, list[dict[str, float]]] = {c: [] for c in CONTENDERS}
    for round_ in range(args.rounds):
        for contender in (CONTENDERS if round_ % 2 == 0 else CONTENDERS[::-1]):
            done = subprocess.run([sys.executable, __file__, args.checkpoint, args.artifact, "--child", contender,
                                   "--calls", str(args.calls)], capture_output=True, text=True, check=True)
            found[contender].append(json.loads(done.stdout.strip().splitlines()[-1]))
            print("round %d %-10s %s" % (round_ + 1, contender, found[contender][-1]), flush=True)
    summary = {c: {k: statistics.median(r[k] for r in runs) for k in runs[0]} for c, runs in found.items()}
    for contender, figures in summary.items():
        print("%-10s total %.2f ms, graph %.2f ms, outside the graph %.3f ms" % (
            contender, figures["total_ms"], figures["graph_ms"], figures["outside_ms"]))
    print("outside the graph, upstream / ours: %.2fx" % (summary["laya-onnx"]["outside_ms"]
                                                        / summary["ours"]["outside_ms"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
