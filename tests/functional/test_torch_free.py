"""The runtime must answer from an artifact with neither torch nor transformers ever imported."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

_PROBE = """
import json, sys
from laya_serverless import Decider
decider = Decider.from_artifact(sys.argv[1], verify=False)
result = decider.predict({"ticket": "I was charged twice"}, {
    "team": {"type": "choice", "instructions": "Which team?", "criteria": ["billing", "tech", "other"]},
    "urgency": {"type": "score", "instructions": "How urgent?", "criteria": ["low", "medium", "high"]},
    "churn": {"type": "noul", "instructions": "Will the customer leave?"},
})
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "transformers", "laya", "optimum"))
print(json.dumps({"heavy": heavy, "answers": sorted(result["answers"])}))
"""


def test_runtime_answers_without_importing_torch_or_transformers(tiny_modernbert: tuple[Path, Path]) -> None:
    _, artifact = tiny_modernbert
    done = subprocess.run([sys.executable, "-c", _PROBE, str(artifact)], capture_output=True, text=True,
                          check=True, timeout=120)
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report == {"heavy": [], "answers": ["churn", "team", "urgency"]}
