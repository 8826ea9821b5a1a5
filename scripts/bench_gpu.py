"""Warm latency of a gated cuda artifact beside upstream `laya.Agent(device="cuda")`, as JSON (scripts/gpu_check.sh).

    python scripts/bench_gpu.py --artifact DIR --checkpoint DIR [--rounds 30] > result.json

p50/p90 per call for 1 and 8 questions on a ~12-token and a ~400-token state, after warm-up; plus
whether this process's session really ran on CUDA and its /health-style fallback count.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

SHORT = "I was charged twice for my order, please refund me."
LONG = ("The customer writes that the March invoice shows two identical charges, that support did not answer "
        "three emails, and that the app logs them out after every update. ") * 8
ONE = {"team": {"type": "choice", "instructions": "Which team?",
                "criteria": {"billing": "payments and refunds", "tech": "bugs and outages", "other": ""}}}
EIGHT = {"%s%d" % (name, i): dict(q) for i in range(4) for name, q in (
    ("team", ONE["team"]), ("urgent", {"type": "noul", "instructions": "Is it urgent?"}))}


def timed(call: Callable[[], Any], rounds: int) -> dict[str, float]:
    for _ in range(3):
        call()
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1000.0)
    samples.sort()
    return {"p50_ms": round(statistics.median(samples), 3), "p90_ms": round(samples[int(0.9 * (len(samples) - 1))], 3)}


def cases(predict: Callable[[str, dict[str, Any]], Any], rounds: int) -> dict[str, Any]:
    return {"%s-%dq" % (label, len(qs)): timed(lambda s=state, q=qs: predict(s, q), rounds)
            for label, state in (("short", SHORT), ("long", LONG)) for qs in (ONE, EIGHT)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--artifact", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()

    from laya_serverless import Decider
    from laya_serverless.core.fallback import device_of, fallbacks_of

    ours = Decider.from_artifact(args.artifact, device="cuda")
    result: dict[str, Any] = {"ours": cases(lambda s, q: ours.predict(s, q), args.rounds),
                              "ours_device": device_of(ours.session), "ours_fallbacks": fallbacks_of(ours.session)}
    import laya
    import torch

    agent = laya.Agent(args.checkpoint, device="cuda")

    def upstream(state: str, questions: dict[str, Any]) -> Any:
        answer = agent.predict(state, questions)
        torch.cuda.synchronize()
        return answer

    result["upstream_cuda"] = cases(upstream, args.rounds)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
