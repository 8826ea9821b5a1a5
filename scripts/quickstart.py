"""Build the local MiniLM checkpoint and its FP32 artifact (cached under .cache/), then answer the README example.

The head of this checkpoint is random (a seeded stand-in until the trained demo checkpoint
lands), so the answers show the wire shape, not sensible decisions.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".cache"
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


def main() -> int:
    from laya_artifacts.checkpoints import make_checkpoint
    from laya_artifacts.export import export_checkpoint

    checkpoint = CACHE / "checkpoints" / "minilm"
    artifact = CACHE / "artifacts" / "minilm-cpu-fp32"
    if not (checkpoint / "rl_agent_config.json").is_file():
        make_checkpoint("minilm", checkpoint, progress=say)
    if not (artifact / "decode_config.json").is_file():
        say("exporting the checkpoint to ONNX")
        export_checkpoint(checkpoint, artifact)

    from laya_serverless import Decider

    started = time.perf_counter()
    decider = Decider.from_artifact(artifact)
    result = decider.predict(EXAMPLE_STATE, EXAMPLE_QUESTIONS)
    say("answered in %.0f ms (session load included)" % ((time.perf_counter() - started) * 1000))
    print(json.dumps(result, ensure_ascii=False, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
