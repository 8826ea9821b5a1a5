"""The embedded default, end to end: build the local MiniLM checkpoint, build and gate its cpu-int8
artifact, publish it to the local store (.laya-store), then serve the Jev protocol from the store
(verified) on http://127.0.0.1:8000 (`--once` answers the README example in-process instead).

The decision head of this checkpoint is random (a seeded stand-in until the trained demo
checkpoint lands), so the answers show the wire shape and the pipeline, not sensible decisions.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".cache"
STORE = ROOT / ".laya-store"
CHECKPOINT_NAME, TARGET = "minilm", "cpu-int8"
EXAMPLE_STATE = {"ticket": "I was charged twice for my March invoice and nobody answers my emails. "
                           "If this is not fixed today I will cancel."}
EXAMPLE_QUESTIONS = {
    "team": {"type": "choice", "instructions": "Which team should handle this ticket?",
             "criteria": {"billing": "payments, invoices, refunds", "tech": "bugs, outages, login",
                          "other": "anything else"}},
    "urgency": {"type": "score", "instructions": "How urgent is this ticket?",
                "criteria": ["not urgent", "somewhat urgent", "urgent", "critical"]},
    "churn": {"type": "noul", "instructions": "Is the customer about to cancel?"},
}


def say(message: str) -> None:
    print("[quickstart] %s" % message, file=sys.stderr, flush=True)


def ensure_published() -> None:
    from laya_artifacts.build import build_artifact
    from laya_artifacts.checkpoints import make_checkpoint
    from laya_artifacts.publish import publish
    from laya_serverless.store import LocalStore, pointer_key

    store = LocalStore(STORE)
    if store.read(pointer_key(CHECKPOINT_NAME, TARGET)) is not None:
        say("%s/%s is already published in %s" % (CHECKPOINT_NAME, TARGET, STORE))
        return
    checkpoint = CACHE / "checkpoints" / CHECKPOINT_NAME
    if not (checkpoint / "rl_agent_config.json").is_file():
        make_checkpoint(CHECKPOINT_NAME, checkpoint, progress=say)
    artifact = CACHE / "artifacts" / ("%s-%s-%d" % (CHECKPOINT_NAME, TARGET, time.time()))
    build_artifact(checkpoint, TARGET, artifact, name=CHECKPOINT_NAME, progress=say)
    publish(artifact, store, say)


def main() -> int:
    ensure_published()
    if "--once" in sys.argv[1:]:
        from laya_serverless import Decider

        started = time.perf_counter()
        decider = Decider.from_store(STORE, CHECKPOINT_NAME, TARGET, cache_dir=CACHE / "serving")
        result = decider.predict(EXAMPLE_STATE, EXAMPLE_QUESTIONS)
        say("loaded from the store (verified) and answered in %.0f ms" % ((time.perf_counter() - started) * 1000))
        print(json.dumps(result, ensure_ascii=False, indent=2))
        return 0
    import os

    from laya_serverless.cli import main as serve

    os.environ.setdefault("LAYA_STORE", str(STORE))
    os.environ.setdefault("LAYA_DEPLOYED", "english=%s" % CHECKPOINT_NAME)
    os.environ.setdefault("LAYA_CACHE_DIR", str(CACHE / "serving"))
    return serve(["serve"])


if __name__ == "__main__":
    raise SystemExit(main())
