"""Where one pass of an artifact's graph spends its time, by operator type (onnxruntime's own profiler).

    laya-artifacts bench profile-graph ARTIFACT_DIR [--tokens 400] [--questions 1] [--runs 5] [--threads 2]
                                    [--keep-denormals] [--by-node] [--other-thread]

Loads the artifact as the runtime does (optimized offline, optimizations off at load, denormals as zero), runs
`--runs` passes of one state of about `--tokens` words with `--questions` questions, and prints, per operator
type, the share of the kernels' time and ms per pass (the first pass included). Shows which kernels a long
state is bound by. `--keep-denormals` leaves denormal floats as they are, to see what flushing them buys: run
it in its own process (onnxruntime applies the first session's setting to the calling thread for good).
`--by-node` adds the slowest nodes; `--other-thread` runs the passes on a thread other than the one that
created the session (as the HTTP server's inference worker may), to see whether the setting still holds there.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
from collections import defaultdict
from pathlib import Path

_WORDS = ("the customer writes that the invoice for march shows two identical charges and that support did not "
          "answer three emails ").split()


def main(argv: list[str] | None = None) -> int:
    import onnxruntime as ort

    from laya_serverless import Decider
    from laya_serverless.artifact.layout import DecodeConfig
    from laya_serverless.core.questions import parse_questions
    from laya_serverless.core.session import DENORMALS_AS_ZERO
    from laya_serverless.core.tokenize import TextEncoder

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("artifact", type=Path)
    parser.add_argument("--tokens", type=int, default=400)
    parser.add_argument("--questions", type=int, default=1)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--keep-denormals", action="store_true")
    parser.add_argument("--by-node", action="store_true")
    parser.add_argument("--top", type=int, default=8, help="how many nodes --by-node lists")
    parser.add_argument("--other-thread", action="store_true")
    args = parser.parse_args(argv)
    # the rows without a session: no session may be created before the profiled one (see --keep-denormals)
    decider = Decider(None, TextEncoder.from_artifact(args.artifact), DecodeConfig.load(args.artifact))  # type: ignore[arg-type]
    questions = parse_questions({"q%d" % i: {"type": "noul", "instructions": "Is point %d raised?" % i}
                                 for i in range(args.questions)})
    state = " ".join(_WORDS[i % len(_WORDS)] for i in range(args.tokens))
    rows = decider.rows_for(state, questions, max(args.tokens + 64, 512), decider.config.head_max_len)
    feeds = decider.feeds(rows, questions)
    with tempfile.TemporaryDirectory() as scratch:
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        options.intra_op_num_threads, options.inter_op_num_threads = args.threads, 1
        options.add_session_config_entry(DENORMALS_AS_ZERO, "0" if args.keep_denormals else "1")
        options.enable_profiling, options.profile_file_prefix = True, str(Path(scratch) / "profile")
        session = ort.InferenceSession(str(args.artifact / "model.onnx"), options, providers=["CPUExecutionProvider"])
        def passes() -> None:
            for _ in range(args.runs + 1):
                session.run(None, feeds)

        runner = threading.Thread(target=passes) if args.other_thread else None
        if runner is None:
            passes()
        else:
            runner.start()
            runner.join()
        events = json.loads(Path(session.end_profiling()).read_text())
    by_op: dict[str, float] = defaultdict(float)
    by_node: dict[str, float] = defaultdict(float)
    for event in events:
        if event.get("cat") == "Node" and event["name"].endswith("_kernel_time"):
            by_op[event["args"]["op_name"]] += event["dur"] / 1000
            by_node[event["name"].removesuffix("_kernel_time")] += event["dur"] / 1000
    total = sum(by_op.values())
    print("words %d (ids %d), questions %d, threads %d, %d passes on the %s thread, denormals %s"
          % (args.tokens, feeds["input_ids"].shape[1], args.questions, args.threads, args.runs + 1,
             "other" if args.other_thread else "session's", "kept" if args.keep_denormals else "as zero"))
    print("| operator | share | ms / pass |\n| --- | ---: | ---: |")
    for op, ms in sorted(by_op.items(), key=lambda item: -item[1])[:12]:
        print("| %s | %.1f%% | %.1f |" % (op, 100 * ms / total, ms / (args.runs + 1)))
    print("| all kernels | 100%% | %.1f |" % (total / (args.runs + 1)))
    if args.by_node:
        print("\n| node | ms / pass |\n| --- | ---: |")
        for node, ms in sorted(by_node.items(), key=lambda item: -item[1])[:args.top]:
            print("| %s | %.1f |" % (node, ms / (args.runs + 1)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
