"""The gate corpus replayed in steps: a replay longer than one Lambda invocation, carried over as many as it takes.

At the published English shape one replay of the 630-row corpus takes longer on one thread than Lambda's 15 minutes,
so the deploy gate (`gate.regate`) runs it in steps. A step replays the next cases, in corpus order, until its time
is nearly spent, and saves where it stopped, with the figures so far, as `gates/progress/<artifact id>/<int8
kernels>.json`. The next step (the custom resource's next isComplete poll) goes on from there. When the last case is
in, the merged figures are exactly one pass's: the same rows, the same cases run twice, the same checks.

- Saved progress always covers a prefix of the corpus. It is written by compare-and-swap on the version that was
  read, so two steps that race never skip or double a case: the loser's cases run again.
- Kernels never mix in one verdict: a step on another CPU class works on that class's own progress.
- Progress is kept for one runtime (onnxruntime's and numpy's versions). A new runtime starts over, because int8
  answers can move with it. A finished verdict is kept too: a failure is answered again, not re-run, until the
  progress object is deleted or the runtime changes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..core.decider import Decider
from .replay import (
    REPEAT_EVERY,
    GateReport,
    SplitReport,
    close_split,
    corpus_info,
    gate_rows,
    gate_tolerance,
    row_split,
)
from .splits import SPLITS

PROGRESS_FORMAT = 1
CHUNK_CASES = REPEAT_EVERY  # cases between two looks at the clock
SAFETY = 1.5  # a step starts another chunk only when 1.5x the slowest chunk so far still fits before its deadline
_COUNTS = ("rows", "cases", "refusals_checked", "repeats_checked")
_LISTS = ("errors", "hard_mismatches", "near_tie_flips", "failures")


def progress_key(artifact_id: str, kernels: str) -> str:
    """Beside the records (`gates/`, the gate role's prefix), not among them: `gates/<id>/` holds only records."""
    return "gates/progress/%s/%s.json" % (artifact_id, kernels)


def runtime_versions() -> dict[str, str]:
    import numpy
    import onnxruntime

    return {"numpy": numpy.__version__, "onnxruntime": onnxruntime.__version__}


@dataclass
class Progress:
    """How far one replay of one artifact's corpus on one kernel class has come."""

    artifact: str
    kernels: str
    corpus: str
    runtime: dict[str, str]
    cases: int
    done: int = 0
    steps: int = 0
    replay_seconds: float = 0.0
    splits: dict[str, dict[str, Any]] = field(default_factory=dict)
    verdict: dict[str, Any] | None = None

    @property
    def finished(self) -> bool:
        return self.done >= self.cases

    def to_bytes(self) -> bytes:
        return json.dumps({"format": PROGRESS_FORMAT, **self.__dict__}, sort_keys=True).encode()

    @classmethod
    def parse(cls, raw: bytes) -> Progress | None:
        """The saved progress, or None when it cannot be read as this format (then the replay starts over)."""
        try:
            found = json.loads(raw)
            if found.pop("format") != PROGRESS_FORMAT:
                return None
            return cls(**found)
        except (ValueError, TypeError, KeyError, AttributeError):
            return None


def ordered_cases(goldens: dict[str, Any]) -> list[tuple[str, int, dict[str, Any]]]:
    """(split, index within the split, row) in the order one pass gates them: each split in turn, rows in file order."""
    ordered = []
    for split in SPLITS:
        rows = [row for row in goldens["rows"] if row_split(row) == split]
        ordered += [(split, index, row) for index, row in enumerate(rows)]
    return ordered


def split_state(report: SplitReport) -> dict[str, Any]:
    state: dict[str, Any] = {name: getattr(report, name) for name in (*_COUNTS, *_LISTS)}
    state["max_action_error"] = report.max_action_error
    return state


def add_part(state: dict[str, Any] | None, part: SplitReport) -> dict[str, Any]:
    """`state` (a split's figures so far, or None) with `part`, the next cases of the same split, added."""
    added = split_state(part)
    if state is None:
        return added
    merged = {name: state[name] + added[name] for name in (*_COUNTS, *_LISTS)}
    merged["max_action_error"] = max(state["max_action_error"], added["max_action_error"])
    return merged


def split_report(split: str, tolerance: float, state: dict[str, Any] | None, had_rows: bool) -> SplitReport:
    report = SplitReport(split=split, tolerance=tolerance)
    for name, value in (state or {}).items():
        setattr(report, name, value)
    close_split(report, had_rows)
    return report


def replay_step(decider: Decider, goldens: dict[str, Any], target: str, progress: Progress, *,
                deadline: float | None, derivation: dict[str, Any] | None = None,
                clock: Callable[[], float] = time.monotonic) -> Progress:
    """Replay the cases after `progress.done` until the corpus ends or `deadline` (a `clock` time; None: no limit)
    would be passed; at least one chunk runs, so every step moves. Returns the new progress (not saved)."""
    tolerance = gate_tolerance(target, derivation)
    ordered = ordered_cases(goldens)
    splits = dict(progress.splits)
    done, slowest, replayed, chunks = progress.done, 0.0, 0.0, 0
    while done < len(ordered):
        if deadline is not None and chunks and clock() + SAFETY * slowest > deadline:
            break
        split, first, _ = ordered[done]
        chunk = [row for s, _, row in ordered[done:done + CHUNK_CASES] if s == split]
        started = clock()
        part = gate_rows(decider, chunk, target, split, tolerance=tolerance, first_index=first, partial=True)
        elapsed = clock() - started
        slowest, replayed = max(slowest, elapsed), replayed + elapsed
        splits[split] = add_part(splits.get(split), part)
        done, chunks = done + len(chunk), chunks + 1
    return Progress(artifact=progress.artifact, kernels=progress.kernels, corpus=progress.corpus,
                    runtime=progress.runtime, cases=len(ordered), done=done, steps=progress.steps + 1,
                    replay_seconds=progress.replay_seconds + replayed, splits=splits)


def final_report(progress: Progress, goldens: dict[str, Any], target: str,
                 derivation: dict[str, Any] | None = None) -> GateReport:
    """The gate's report over a finished replay: what one pass over the whole corpus reports."""
    tolerance = gate_tolerance(target, derivation)
    present = {row_split(row) for row in goldens["rows"]}
    report = GateReport(target=target, tolerance=tolerance, corpus=corpus_info(goldens),
                        tolerance_derivation=derivation)
    for split in SPLITS:
        report.splits[split] = split_report(split, tolerance, progress.splits.get(split), split in present)
    return report


__all__ = ["CHUNK_CASES", "Progress", "final_report", "ordered_cases", "progress_key", "replay_step",
           "runtime_versions"]
