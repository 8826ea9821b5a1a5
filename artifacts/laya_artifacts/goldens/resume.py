"""Resumable goldens: rows kept as they are recorded, so a restart continues where it stopped; rate and ETA.

The partial file is JSON lines: a header naming what the rows depend on (weights, corpus, torch threads),
then one `{"index", "row"}` line per recorded case, flushed and synced as it is written. A restart reads the
rows back when the header matches exactly (another checkpoint or corpus starts afresh), drops a line torn by a
kill mid-write, and records only the cases still missing. Upstream's answers are a function of the weights
and the rows, so resumed and uninterrupted recordings are the same goldens.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

PARTIAL_SUFFIX = ".partial.jsonl"
PARTIAL_FORMAT = 1
REPORT_EVERY_CASES, REPORT_EVERY_S = 25, 15.0


def read_partial(path: Path, header: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """The rows kept in `path` for exactly `header` ({case index: row}); a torn last line is dropped from the file,
    and a file for anything else is removed."""
    if not path.is_file():
        return {}
    lines = path.read_bytes().split(b"\n")
    intact = lines[:-1]  # whatever follows the last newline was torn by a kill mid-write
    try:
        found = json.loads(intact[0]) if intact else None
    except ValueError:
        found = None
    if found != dict(header, partial_goldens=PARTIAL_FORMAT):
        path.unlink()
        return {}
    rows: dict[int, dict[str, Any]] = {}
    for line in intact[1:]:
        kept = json.loads(line)
        rows[int(kept["index"])] = kept["row"]
    if lines[-1]:
        path.write_bytes(b"\n".join(intact) + b"\n")
    return rows


class PartialWriter:
    """Appends each recorded case to the partial file (none when `path` is None), durable before the next one."""

    def __init__(self, path: Path | None, header: dict[str, Any]) -> None:
        self.path = path
        self._file: TextIO | None = None
        if path is not None:
            fresh = not path.is_file()
            path.parent.mkdir(parents=True, exist_ok=True)
            self._file = path.open("a", encoding="utf-8")
            if fresh:
                self._write(dict(header, partial_goldens=PARTIAL_FORMAT))

    def _write(self, value: dict[str, Any]) -> None:
        assert self._file is not None
        self._file.write(json.dumps(value, ensure_ascii=False) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())

    def append(self, index: int, row: dict[str, Any]) -> None:
        if self._file is not None:
            self._write({"index": index, "row": row})

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def finish(self) -> None:
        """The recording is complete: the caller holds every row, the partial file is no longer needed."""
        self.close()
        if self.path is not None:
            self.path.unlink(missing_ok=True)


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    return "%dh%02dm" % (seconds // 3600, seconds % 3600 // 60) if seconds >= 3600 else "%dm%02ds" % divmod(seconds, 60)


class Meter:
    """Rows done of the total, the rate of this run (resumed rows excluded) and the ETA, said every
    `REPORT_EVERY_CASES` cases or `REPORT_EVERY_S` seconds, and at the end."""

    def __init__(self, cases: int, rows: int, done_cases: int, done_rows: int,
                 progress: Callable[[str], None], clock: Callable[[], float] = time.monotonic) -> None:
        self.cases, self.rows, self.done_cases, self.done_rows = cases, rows, done_cases, done_rows
        self.progress, self.clock = progress, clock
        self.started, self.resumed_rows, self.said_at, self.said_cases = clock(), done_rows, clock(), done_cases

    def line(self) -> str:
        elapsed = max(self.clock() - self.started, 1e-9)
        rate = (self.done_rows - self.resumed_rows) / elapsed
        eta = _duration((self.rows - self.done_rows) / rate) if rate > 0 else "?"
        return "    %d/%d rows (%d/%d cases) recorded, %.2f rows/s, %s elapsed, ETA %s" % (
            self.done_rows, self.rows, self.done_cases, self.cases, rate, _duration(elapsed), eta)

    def update(self, rows: int) -> None:
        self.done_cases += 1
        self.done_rows += rows
        now = self.clock()
        if self.done_cases == self.cases or self.done_cases - self.said_cases >= REPORT_EVERY_CASES or \
                now - self.said_at >= REPORT_EVERY_S:
            self.progress(self.line())
            self.said_at, self.said_cases = now, self.done_cases
