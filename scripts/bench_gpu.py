"""Warm latency of cuda artifacts beside upstream `laya.Agent(device="cuda")`, as JSON (scripts/gpu_check.py).

    python scripts/bench_gpu.py --artifact cuda-fp16=DIR --artifact cuda-fp32=DIR --checkpoint DIR [--rounds 30]

p50/p90 per call for 1 and 8 questions on a ~12-token and a ~400-token state, after warm-up; plus whether
each session really ran on CUDA and its /health-style fallback count. A directory without a manifest (a
build whose gate failed leaves its staged graph) is opened unverified and reported as `"verified": false`.
`--device cpu` runs the same on the CPU (the dry run of the GPU check; those figures are not a benchmark).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

SHORT = "I was charged twice for my order, please refund me."
LONG = ("The customer writes that the March invoice shows two identical charges, that support did not answer "
        "three emails, and that the app logs them out after every update. ") * 8
ONE = {"team": {"type": "choice", "instructions": "Which team?",
                "criteria": {"billing": "payments and refunds", "tech": "bugs and outages", "other": ""}}}
EIGHT = {"%s%d" % (name, i): dict(q) for i in range(4) for name, q in (
    ("team", ONE["team"]), ("urgent", {"type": "noul", "instructions": "Is it urgent?"}))}
WARMUP = 3


def timed(call: Callable[[], Any], rounds: int) -> dict[str, float]:
    for _ in range(WARMUP):
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


def ours(directory: Path, device: str, rounds: int) -> dict[str, Any]:
    from laya_serverless import Decider
    from laya_serverless.core.fallback import device_of, fallbacks_of

    verified = (directory / "manifest.json").is_file()
    decider = Decider.from_artifact(directory, verify=verified, device=device)
    return {"verified": verified, "latency": cases(lambda s, q: decider.predict(s, q), rounds),
            "device": device_of(decider.session), "fallbacks": fallbacks_of(decider.session)}


def upstream(checkpoint: str, device: str, rounds: int) -> dict[str, Any]:
    import laya
    import torch

    agent = laya.Agent(checkpoint, device=device)

    def predict(state: str, questions: dict[str, Any]) -> Any:
        answer = agent.predict(state, questions)
        if device == "cuda":
            torch.cuda.synchronize()
        return answer

    return {"laya": getattr(laya, "__version__", "0.4.15"), "torch": torch.__version__,
            "latency": cases(predict, rounds)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--artifact", action="append", required=True, metavar="LABEL=DIR")
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    args = parser.parse_args()
    result: dict[str, Any] = {"rounds": args.rounds, "warmup": WARMUP, "device": args.device}
    for labelled in args.artifact:
        label, _, directory = labelled.partition("=")
        try:
            result[label] = ours(Path(directory), args.device, args.rounds)
        except Exception as exc:  # one artifact that cannot open is a result; the others still run
            result[label] = {"error": "%s: %s" % (type(exc).__name__, exc)}
    result["upstream"] = upstream(args.checkpoint, args.device, args.rounds)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
