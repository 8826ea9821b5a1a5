"""`laya-artifacts parity` replays a golden file on the serving machine: both splits, and no torch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

_PROBE = """
import json, sys
from laya_artifacts.cli import main
code = main(["parity", sys.argv[1], "--goldens", sys.argv[2], "--target", "cpu-int8"])
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "transformers", "laya", "optimum"))
print(json.dumps({"code": code, "heavy": heavy}))
"""


def test_the_replay_passes_both_splits_and_imports_no_torch(tiny_int8: Path, tiny_int8_goldens: Path) -> None:
    done = subprocess.run([sys.executable, "-c", _PROBE, str(tiny_int8), str(tiny_int8_goldens)],
                          capture_output=True, text=True, check=True, timeout=300)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {"code": 0, "heavy": []}, done.stdout
    table = done.stdout
    assert "PASSED" in table and "selection" in table and "confirmation" in table and "corpus sha256" in table
