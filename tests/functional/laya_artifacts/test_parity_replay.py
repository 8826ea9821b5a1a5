"""`laya-artifacts parity` replays a golden file on the serving machine: both splits (or one), and no torch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import GOLDENS

pytestmark = pytest.mark.slow

_PROBE = """
import json, sys
from laya_artifacts.cli import main
code = main(["parity", sys.argv[1], "--goldens", sys.argv[2], "--target", "cpu-int8"])
one = main(["parity", sys.argv[1], "--goldens", sys.argv[2], "--target", "cpu-int8", "--split", "confirmation"])
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "transformers", "laya", "optimum"))
print(json.dumps({"code": code, "one_split": one, "heavy": heavy}))
"""


def test_the_replay_passes_both_splits_and_imports_no_torch(tiny_int8: Path, tiny_int8_goldens: Path) -> None:
    done = subprocess.run([sys.executable, "-c", _PROBE, str(tiny_int8), str(tiny_int8_goldens)],
                          capture_output=True, text=True, check=True, timeout=300)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {"code": 0, "one_split": 0, "heavy": []}, done.stdout
    table = done.stdout
    assert "PASSED" in table and "selection" in table and "confirmation" in table and "corpus sha256" in table


def test_the_bit_identity_check_runs_every_fourth_case_twice_and_catches_a_drifting_kernel(tiny_fp32: Path) -> None:
    """A kernel whose second run differs from its first fails the gate on the cases it runs twice."""
    from laya_artifacts.goldens.record import load_goldens
    from laya_serverless import Decider
    from laya_serverless.gate import replay as parity

    goldens = load_goldens(GOLDENS / "tiny-modernbert")
    rows = [r for r in goldens["rows"] if parity.row_split(r) == "selection" and "logits" in r][:9]
    decider = Decider.from_artifact(tiny_fp32, verify=False, threads=1)
    steady = parity.gate_rows(decider, rows, "cpu-fp32", "selection")
    assert steady.passed and steady.repeats_checked == 3   # cases 0, 4 and 8 of 9

    calls = []
    honest = decider.run_rows

    def drifting(built, questions):   # every second call answers one ulp off
        logits, act = honest(built, questions)
        calls.append(1)
        return (np.nextafter(logits, np.inf) if len(calls) % 2 == 0 else logits), act

    decider.run_rows = drifting
    report = parity.gate_rows(decider, rows, "cpu-fp32", "selection")
    not_identical = [f for f in report.failures if "not bit-identical" in f]
    assert not_identical == ["%s: two runs of the same input are not bit-identical" % rows[i]["id"] for i in (0, 4, 8)]
    assert len(calls) == len(rows) + 3
