"""ruff leaves build outputs alone because the configuration says so, not because git happens to ignore them: in a
copy without git, third-party code under build/ (the Lambda layer) is not linted, while our own code still is."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
UNTIDY = "import os,sys\nx=1;y = 2\n"


def _ruff(where: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ruff", "check", "."], cwd=where, capture_output=True, text=True,
                          timeout=120)


def test_a_layer_build_in_a_copy_without_git_is_not_linted(tmp_path: Path) -> None:
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    layer = tmp_path / "build" / "lambda" / "x86_64" / "layer" / "python" / "somepackage"
    layer.mkdir(parents=True)
    (layer / "module.py").write_text(UNTIDY)
    assert not (tmp_path / ".git").exists()
    assert _ruff(tmp_path).returncode == 0
    (tmp_path / "ours.py").write_text(UNTIDY)   # the same text outside build/ is still refused
    assert _ruff(tmp_path).returncode == 1
