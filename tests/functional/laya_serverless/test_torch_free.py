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


_GATE_PROBE = """
import json, sys
sys.path[:0] = [sys.argv[1], sys.argv[2]]  # the package as the Lambda asset lays it out, nothing else of the repo
from laya_serverless.gate.regate import handler
from laya_serverless.gate.replay import run_gate
report = run_gate(sys.argv[3], json.loads(open(sys.argv[4]).read()), "cpu-fp32")
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "transformers", "laya", "optimum", "onnx"))
print(json.dumps({"heavy": heavy, "passed": report.passed, "rows": report.rows,
                  "build_side": sorted(m for m in sys.modules if m.split(".")[0] == "laya_artifacts")}))
"""


def test_the_deploy_gate_runs_from_the_runtime_package_alone(tiny_modernbert: tuple[Path, Path],
                                                              tmp_path: Path) -> None:
    """The function asset is the runtime package whole; the deploy gate replays from it without importing any
    build-side module (`laya-artifacts package` copies nothing else)."""
    from tests.conftest import golden_slice, write_goldens_file
    from tests.paths import ROOT

    (tmp_path / "asset").mkdir()
    goldens = write_goldens_file(golden_slice("tiny-modernbert", keep_case=lambda i, _r: i % 30 == 0), tmp_path)
    done = subprocess.run([sys.executable, "-I", "-c", _GATE_PROBE, str(tmp_path / "asset"), str(ROOT / "functions"),
                           str(tiny_modernbert[1]), str(goldens)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["heavy"] == [] and report["passed"] and report["rows"] > 0
    assert report["build_side"] == []
