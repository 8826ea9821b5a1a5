"""Recording goldens at real size: a recording killed midway resumes from its partial file to the same goldens
as an uninterrupted one (a line torn by the kill included), two worker processes record the same goldens as one,
and progress says rows done of the total, the rate and the ETA."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from laya_artifacts.goldens.corpus import builtin_cases
from laya_artifacts.goldens.record import record_goldens

pytestmark = pytest.mark.slow


def _cases() -> list[dict[str, Any]]:
    return [case for i, case in enumerate(builtin_cases()) if i % 12 == 0]


def _kill_after(checkpoint: Path, partial: Path, lines: int) -> None:
    """Record in a child process and SIGKILL it once `lines` cases are kept."""
    code = ("import sys; from pathlib import Path; from laya_artifacts.goldens.corpus import builtin_cases\n"
            "from laya_artifacts.goldens.record import record_goldens\n"
            "cases = [c for i, c in enumerate(builtin_cases()) if i % 12 == 0]\n"
            "record_goldens(Path(sys.argv[1]), 'tiny', cases=cases, partial=Path(sys.argv[2]))\n")
    child = subprocess.Popen([sys.executable, "-c", code, str(checkpoint), str(partial)], env=dict(os.environ))
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and child.poll() is None:
            if partial.is_file() and partial.read_bytes().count(b"\n") >= 1 + lines:
                break
            time.sleep(0.05)
        assert child.poll() is None, "the recording ended before it could be killed"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()


def test_a_killed_recording_resumes_to_the_same_goldens(tiny_modernbert: tuple[Path, Path], tmp_path: Path) -> None:
    checkpoint, cases = tiny_modernbert[0], _cases()
    whole = record_goldens(checkpoint, "tiny", cases=cases)
    partial = tmp_path / "goldens.partial.jsonl"
    _kill_after(checkpoint, partial, 3)
    kept = partial.read_bytes().count(b"\n") - 1
    assert 3 <= kept < len(cases)
    with partial.open("ab") as torn:   # a kill in the middle of writing a line
        torn.write(b'{"index": 99, "row": {"id": "to')
    said: list[str] = []
    resumed = record_goldens(checkpoint, "tiny", cases=cases, partial=partial, progress=said.append)
    assert resumed == whole
    assert said[0] == "    resuming: %d of %d cases were recorded already (%s)" % (kept, len(cases), partial)
    rows = sum(len(c["questions"]) for c in cases)
    assert said[-1].startswith("    %d/%d rows (%d/%d cases) recorded, " % (rows, rows, len(cases), len(cases)))
    assert " rows/s, " in said[-1] and " ETA " in said[-1]
    assert not partial.exists()   # complete: the goldens hold every row


def test_a_partial_file_for_other_cases_is_not_used(tiny_modernbert: tuple[Path, Path], tmp_path: Path) -> None:
    partial = tmp_path / "goldens.partial.jsonl"
    partial.write_text('{"weights_sha256": "other", "partial_goldens": 1}\n{"index": 0, "row": {"id": "x"}}\n')
    said: list[str] = []
    found = record_goldens(tiny_modernbert[0], "tiny", cases=_cases()[:2], partial=partial, progress=said.append)
    assert [row["id"] for row in found["rows"]] == [case["id"] for case in _cases()[:2]]
    assert not any("resuming" in line for line in said)


def test_two_worker_processes_record_the_same_goldens_as_one(tiny_modernbert: tuple[Path, Path]) -> None:
    cases = _cases()[:6]
    assert record_goldens(tiny_modernbert[0], "tiny", cases=cases, workers=2) == record_goldens(
        tiny_modernbert[0], "tiny", cases=cases)
