"""RSS of a served decider before and after one batch of long, deeply nested states: does the memory come back?

    laya-artifacts bench arena ARTIFACT_DIR [--keep-arena] [--states 64] [--depth 30] [--max-len 512]
    laya-artifacts bench arena ARTIFACT_DIR --per-run-cost [--rounds 8]

Prints one JSON line: RSS after the first short request, right after the long batch (one pass), after 20 more
short requests, the peak, and the mean time of a short request before and after. `--keep-arena` runs the session
without the run option the runtime sets (`memory.enable_memory_arena_shrinkage`), as it ran before.
`--per-run-cost` measures what that option costs a short request: ms per decision with and without it, alternating
rounds of 100 in one process, medians, and their ratio.
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

QUESTIONS = {
    "team": {"type": "choice", "instructions": "which team?", "criteria": {"billing": "refunds", "tech": None,
                                                                             "other": ""}},
    "urgent": {"type": "noul", "instructions": "is it urgent?"},
    "level": {"type": "score", "instructions": "how bad?", "criteria": ["low", "mid", "high"]},
}
SHORT = "i was charged twice"


def _rss_mb() -> int:
    return int(Path("/proc/self/statm").read_text().split()[1]) * 4096 >> 20


def _nested(depth: int) -> Any:
    state: Any = "deep " * 40
    for level in range(depth):
        state = {"k%d" % level: [state, "word " * 8]}
    return state


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("artifact")
    parser.add_argument("--keep-arena", action="store_true")
    parser.add_argument("--states", type=int, default=64)
    parser.add_argument("--depth", type=int, default=30)
    parser.add_argument("--max-len", type=int, default=512)
    parser.add_argument("--per-run-cost", action="store_true")
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args(argv)

    import onnxruntime as ort

    from laya_serverless import Decider

    decider = Decider.from_artifact(args.artifact, threads=1, verify=False)
    if args.keep_arena:
        decider.session._run_options = ort.RunOptions()  # type: ignore[attr-defined]

    def short_ms(n: int = 20) -> float:
        started = time.perf_counter()
        for _ in range(n):
            decider.predict(SHORT, QUESTIONS)
        return (time.perf_counter() - started) / n * 1000

    if args.per_run_cost:
        return _per_run_cost(decider, short_ms, args.rounds, ort.RunOptions())
    decider.predict(SHORT, QUESTIONS)
    first = _rss_mb()
    before = short_ms()
    decider.predict_batch([_nested(args.depth) for _ in range(args.states)], QUESTIONS, max_len=args.max_len)
    after_batch = _rss_mb()
    after = short_ms()
    print(json.dumps({"keep_arena": args.keep_arena, "rss_mb_first": first, "rss_mb_after_batch": after_batch,
                      "rss_mb_after_20_short": _rss_mb(), "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                      >> 10, "short_ms_before": round(before, 1), "short_ms_after": round(after, 1)}))
    return 0


def _per_run_cost(decider: Any, short_ms: Any, rounds: int, keep: Any) -> int:
    import statistics

    shrink = decider.session._run_options
    times: dict[str, list[float]] = {"shrink": [], "keep": []}
    short_ms(30)  # warm
    for r in range(rounds):
        order = (("shrink", shrink), ("keep", keep)) if r % 2 == 0 else (("keep", keep), ("shrink", shrink))
        for name, options in order:
            decider.session._run_options = options
            times[name].append(short_ms(100))
    medians = {name: statistics.median(values) for name, values in times.items()}
    print(json.dumps({"short_ms_shrink": round(medians["shrink"], 3), "short_ms_keep": round(medians["keep"], 3),
                      "shrink_over_keep": round(medians["shrink"] / medians["keep"], 3)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
