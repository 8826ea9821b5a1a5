"""What the HTTP layer and the Lambda adapter add on top of a bare `Decider.predict`.

    laya-artifacts bench handler [--iterations 300]

Uses the local store that `make serve` publishes (minilm, cpu-int8). Interleaves, call by call:
a bare `Decider.predict`, the same request through the Mangum handler on an API Gateway v2
event, and a one-question request; prints p50/p90 of each and the added overhead.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from pathlib import Path
from typing import Any

from laya_artifacts.paths import BUILD_CACHE

ROOT = Path(__file__).resolve().parents[3]   # the checkout: benchmarks read its goldens and stores
REQUEST: dict[str, Any] = {"state": "I was charged twice for my order, please refund me.",
           "questions": {"team": {"type": "choice", "instructions": "Which team should handle this?",
                                  "criteria": {"billing": "payments", "tech": "bugs", "other": ""}}}}


def _event() -> dict:
    event = json.loads((ROOT / "tests" / "events" / "http-api-v2-systemone.json").read_text())
    event["body"] = json.dumps(REQUEST)
    event["headers"].pop("authorization", None)
    return event


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iterations", type=int, default=300)
    args = parser.parse_args(argv)

    from laya_serverless import Decider
    from laya_serverless.artifact.store import DEFAULT_LOCAL_STORE
    from laya_serverless.lambda_edge.api_handler import make_handler
    from laya_serverless.local_edge.start_api import lambda_context
    from laya_serverless.settings import CACHE_DIR, DEPLOYED, STORE, TARGET

    asyncio.set_event_loop(asyncio.new_event_loop())  # Mangum runs the app on this thread's loop
    # What `make serve` (laya-artifacts demo) publishes: the demo, at the target its gate let it serve.
    served = json.loads((ROOT / BUILD_CACHE / "demo-published.json").read_text())["target"]
    environ = {STORE: str(ROOT / DEFAULT_LOCAL_STORE), DEPLOYED: "english=demo", TARGET: served,
               CACHE_DIR: str(ROOT / BUILD_CACHE / "serving")}
    handler = make_handler(environ)
    decider = Decider.from_store(environ[STORE], "demo", served, cache_dir=environ[CACHE_DIR])
    event = _event()
    bare, through = [], []
    for _ in range(20):  # warm both paths
        decider.predict(REQUEST["state"], REQUEST["questions"])
        assert handler(event, lambda_context())["statusCode"] == 200
    for _ in range(args.iterations):
        started = time.perf_counter()
        decider.predict(REQUEST["state"], REQUEST["questions"])
        bare.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        handler(event, lambda_context())
        through.append((time.perf_counter() - started) * 1000)

    def p(values: list[float], q: float) -> float:
        return statistics.quantiles(values, n=100)[int(q * 100) - 1]

    print("| path | p50 ms | p90 ms |\n|---|---|---|")
    print("| bare Decider.predict | %.2f | %.2f |" % (p(bare, 0.5), p(bare, 0.9)))
    print("| Mangum handler (API Gateway v2 event) | %.2f | %.2f |" % (p(through, 0.5), p(through, 0.9)))
    print("\nadded by the HTTP layer and the adapter: p50 %.2f ms (ratio %.2f)" % (
        p(through, 0.5) - p(bare, 0.5), p(through, 0.5) / p(bare, 0.5)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
