"""The precision search's mixes: int8 on part of the encoder, chosen by measured sensitivity.

A unit (an encoder layer, or one MatMul: a node) is quantized alone and gated; then units are added
least sensitive first, each step gated on the whole selection split, while it still passes. The
layer mix gates each layer alone on the whole selection split. The node mix has several times as
many units, so each node alone is gated on a fixed slice of selection (`probe_rows`): the slice only
orders the nodes and drops the ones that fail alone; every accumulated mix is gated on the whole
split, so the slice can never let a mix through.

The order is (hard mismatches, whether any row failed, max |dp|): a unit that flips a decision is worse
than any that only moves probabilities.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from laya_artifacts.search.quantize import Candidate
from laya_serverless.gate.replay import SplitReport

PROBE_ROWS = 48  # the node probes' slice of selection rows (each row holds several questions)


def brief(report: SplitReport) -> dict[str, Any]:
    return {"max_probability_error": report.max_probability_error,
            "p99_probability_error": report.p99_probability_error,
            "hard_mismatches": len(report.hard_mismatches), "failures": len(report.failures)}


def sensitivity_order(probes: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(probes, key=lambda p: (p["hard_mismatches"], p["failures"] > 0, p["max_probability_error"]))


def probe_rows(rows: Sequence[dict[str, Any]], n: int = PROBE_ROWS) -> list[dict[str, Any]]:
    """A fixed slice of `rows`, spread over them in id order."""
    ordered = sorted(rows, key=lambda r: r["id"])
    step = max(1, len(ordered) // n)
    return ordered[::step][:n]


class Searcher(Protocol):
    """What a mix needs of the search (`search._Search`): build a candidate's trial, gate it, say how it went."""

    progress: Callable[[str], None]

    def build(self, candidate: Candidate) -> Any: ...

    def gate(self, trial: Any, rows: Sequence[dict[str, Any]] | None = None) -> SplitReport: ...

    def figures(self, report: SplitReport) -> str: ...


@dataclass
class Mix:
    """One mix's search: what each unit alone measured, each greedy step, and the best passing mix."""

    kind: str  # "layer" | "node"
    probes: list[dict[str, Any]] = field(default_factory=list)
    greedy: list[dict[str, Any]] = field(default_factory=list)
    best: Any = None  # the best passing mix's `search.Trial`
    units: list[Any] = field(default_factory=list)

    def record(self) -> dict[str, Any]:
        return {"sensitivity": self.probes, "greedy": self.greedy}


def greedy_mix(search: Searcher, kind: str, units: Sequence[Any], candidate_for: Callable[[list[Any]], Candidate],
               describe: Callable[[Any], dict[str, Any]], probe_on: Sequence[dict[str, Any]] | None = None) -> Mix:
    """Sensitivity of each unit alone (on `probe_on`, else the whole selection split), then greedy accumulation."""
    mix = Mix(kind)
    for unit in units:
        alone = search.build(candidate_for([unit]))
        report = search.gate(alone, probe_on)
        mix.probes.append({**describe(unit), "passed": report.passed, **brief(report)})
        search.progress("    %s %s alone: %s" % (kind, unit, search.figures(report)))
        shutil.rmtree(alone.directory, ignore_errors=True)
    chosen: list[Any] = []
    for probe in sensitivity_order(mix.probes):
        if not probe["passed"]:
            break
        unit = probe[kind]
        trial = search.build(candidate_for(chosen + [unit]))
        report = search.gate(trial)
        step = sorted(chosen + [unit])
        mix.greedy.append({"%ss" % kind: step, "passed": report.passed, **brief(report)})
        search.progress("    %ss %s: %s" % (kind, step if kind == "layer" else len(step), search.figures(report)))
        if not report.passed:
            break
        chosen.append(unit)
        mix.best = trial
    mix.units = sorted(chosen)
    return mix
