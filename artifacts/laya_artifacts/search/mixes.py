"""The precision search's mixes: int8 on part of the encoder, chosen by measured sensitivity.

`run_mixes` runs both for the search (`precision.py`), each unless it cannot win. A unit (an encoder layer,
or one MatMul: a node) is quantized alone and gated; then units are added
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

from laya_artifacts.search.quantize import (
    LAYER_MIX,
    NODE_MIX,
    Candidate,
    encoder_matmuls,
    layer_candidate,
    node_candidate,
)
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


def _mix_skipped(name: str, names: Sequence[str], trials: Sequence[Any], passed_fastest: Any, exhaustive: bool,
                 fp32_ms: float, min_speedup: float | None) -> str | None:
    """Why a mix is not searched (it cannot win, or was not asked for), or None. A mix quantizes part of what
    `encoder` quantizes, so it is no faster than `encoder`: that bounds what it can win."""
    whole = next((t for t in trials if t.candidate.name == "encoder"), None)
    if name not in names:
        return "not requested"
    if whole is not None and whole.passed:
        return "encoder (every layer) passed: no mix can be faster"
    if exhaustive or whole is None or whole.speed_ms is None:
        return None
    if passed_fastest is not None and passed_fastest.ms <= whole.ms:
        return "%s passed and is already faster than encoder, the fastest any mix can be" % (
            passed_fastest.candidate.name)
    if min_speedup and fp32_ms / whole.ms < min_speedup:
        return "encoder (every layer) runs x%.2f vs fp32: no mix can reach the x%g a choice needs" % (
            fp32_ms / whole.ms, min_speedup)
    return None


def run_mixes(search: Any, names: Sequence[str], trials: list[Any], passed_fastest: Any, exhaustive: bool,
              min_speedup: float | None) -> dict[str, Any]:
    """The layer mix, then the node mix, each searched unless it cannot win (`_mix_skipped`); a passing mix is timed
    against FP32 again (`search.time_against_fp32`) and joins `trials`. Returns their records."""
    matmuls = encoder_matmuls(search.fp32_graph)
    found: dict[str, Mix] = {}
    records: dict[str, Any] = {}
    for name, kind in ((LAYER_MIX, "layer"), (NODE_MIX, "node")):
        skipped = _mix_skipped(name, names, trials, passed_fastest, exhaustive, search.fp32_ms, min_speedup)
        layer_mix = found.get("layer")
        if skipped is None and kind == "node" and layer_mix is not None and layer_mix.units == matmuls.layers:
            skipped = "the layer mix took every layer: no node mix can be faster"
        if skipped is not None:
            if name in names:
                search.progress("    %s skipped: %s" % (name, skipped))
            records[name.replace("-", "_")] = {"skipped": skipped}
            continue
        if kind == "layer":
            search.progress("    per-layer sensitivity on selection (%d layers)" % len(matmuls.layers))
            mix = greedy_mix(search, "layer", matmuls.layers, lambda units: layer_candidate(units),
                             lambda layer: {"layer": layer})
        else:
            probes = probe_rows(search.rows)
            search.progress("    per-node sensitivity on %d selection rows (%d MatMuls)" % (len(probes),
                                                                                        len(matmuls.nodes)))
            mix = greedy_mix(search, "node", list(matmuls.nodes), lambda units: node_candidate(units),
                             lambda node: {"node": node, "layer": matmuls.nodes[node][0],
                                           "part": matmuls.nodes[node][1]}, probes)
        found[kind], records[name.replace("-", "_")] = mix, mix.record()
        if mix.best is None:
            search.progress("    %s: no %s passes selection on its own; no mix" % (name, kind))
            continue
        best = mix.best
        best.candidate = layer_candidate(mix.units, LAYER_MIX) if kind == "layer" else node_candidate(mix.units,
                                                                                                     NODE_MIX)
        best.recipe = dict(best.recipe, name=name)
        search.time_against_fp32(best)
        trials.append(best)
        search.progress("    %s (%d %ss): %.1f ms, x%.2f vs fp32" % (name, len(mix.units), kind, best.ms,
                                                                   search.fp32_ms / best.ms))
    records["layer_sensitivity"] = records.get("layer_mix", {}).get("sensitivity", [])
    return records
