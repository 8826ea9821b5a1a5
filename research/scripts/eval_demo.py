"""Evaluate the demo model on hand-written cases (never generated); by default the test sets test-1 and test-2.

The shipped head trained on train-1..train-4 (sets A-D) and was chosen on dev-1 and dev-2 (E, F), so only
test-1 and test-2 (G, H), written before its result and read once, measure it honestly; `--cases` takes any
set (or several, pooled).

    python research/scripts/eval_demo.py                  # what the quickstart serves: demo/cpu-fp32 from .laya-store
    python research/scripts/eval_demo.py --artifact DIR   # any built artifact (verified before use)
    python research/scripts/eval_demo.py --checkpoint DIR # upstream laya.Agent (PyTorch FP32) on a checkpoint
    python research/scripts/eval_demo.py --cases research/cases/dev-1.jsonl research/cases/dev-2.jsonl   # pooled

Prints a Markdown table (accuracy, top-1, confidence, ECE per type; accuracy per domain) and, with
--json, writes the graded rows' summary there.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from laya_serverless.artifact.store import DEFAULT_LOCAL_STORE
from laya_training.cases import case_file

ROOT = Path(__file__).resolve().parents[2]   # the repository root (.laya-store, .cache)
DEFAULT_CASES = (case_file("test-1"), case_file("test-2"))   # the held-out test sets (G, H)


def main(argv: list[str] | None = None) -> int:
    from laya_artifacts.checkpoints.demo import DEMO_NAME
    from laya_training.cases import load_cases
    from laya_training.eval import grade_cases, summary, table

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--artifact", type=Path, help="a built artifact directory")
    source.add_argument("--checkpoint", type=Path, help="a Laya checkpoint, run by upstream laya on PyTorch")
    parser.add_argument("--store", type=Path, default=ROOT / DEFAULT_LOCAL_STORE, help="local store (%(default)s)")
    parser.add_argument("--target", default="cpu-fp32")
    parser.add_argument("--cases", type=Path, nargs="+", default=list(DEFAULT_CASES),
                        help="JSON-lines case files, pooled (default: the test sets test-1 and test-2)")
    parser.add_argument("--json", type=Path, help="also write the summary as JSON here")
    args = parser.parse_args(argv)

    if args.checkpoint:
        import laya

        agent = laya.Agent(str(args.checkpoint), device="cpu")
        predict, what = agent.predict, "upstream laya (PyTorch FP32) on %s" % args.checkpoint
    else:
        from laya_serverless import Decider

        if args.artifact:
            decider = Decider.from_artifact(args.artifact)
            what = "artifact %s" % args.artifact
        else:
            decider = Decider.from_store(args.store, DEMO_NAME, args.target, cache_dir=ROOT / ".cache" / "serving")
            what = "%s/%s from %s" % (DEMO_NAME, args.target, args.store)
        predict = decider.predict
    missing = [str(path) for path in args.cases if not path.is_file()]
    if missing:
        parser.error("no such case file: %s" % ", ".join(missing))
    cases = [case for path in args.cases for case in load_cases(path)]
    graded = grade_cases(predict, cases)
    print("# %d hand-written cases, %d questions (%s) — %s\n"
          % (len(cases), len(graded), ", ".join(path.name for path in args.cases), what))
    print(table(graded))
    if args.json:
        args.json.write_text(json.dumps({"model": what, "summary": summary(graded)}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
