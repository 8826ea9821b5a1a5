"""What a precision search will do and about how long it takes, said before it starts.

The candidates in their order, how they are gated, the time on this machine and the faster ways to a build. The
time is estimated from this run's own FP32 graph: how long optimizing it offline took (every candidate is
quantized, then optimized the same way) and one pass of its session over the speed batch (every candidate is
timed over that batch, interleaved with FP32, then gated case by case on selection). An int8 graph runs at its
own speed and a refused candidate's gating stops early, so the figures say "about".
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from laya_artifacts.search.calibration import prepared_rows
from laya_artifacts.search.quantize import LAYER_MIX, NODE_MIX, prepare_artifact, search_order
from laya_serverless import Decider

# Writing a candidate is a quantization pass and an offline optimization: counted as two optimizations.
BUILD_PER_OPTIMIZATION = 2
ONE_CANDIDATE = "nbits-sym-b32"  # the first public recipe (`quantize.PUBLIC_RECIPES`): a search of one
# About how long timing one candidate may take (its warm-up and timed passes, each interleaved with FP32's): at the
# published sizes one pass over the speed batch takes minutes on one thread, and five of them took 20 min a candidate.
TIMING_BUDGET_S = 300.0


def speed_runs(fp32_pass_s: float, most: int) -> int:
    """Timed passes per graph: `most`, or fewer where a pass is long, never under 2 (a median and a spread)."""
    return max(2, min(most, int(TIMING_BUDGET_S / (2 * max(fp32_pass_s, 1e-9))) - 1))


def fp32_pass_seconds(decider: Decider, batch: Sequence[dict[str, Any]]) -> float:
    """One pass of `decider` over `batch`, one session run per case, as the search times a graph."""
    work = prepared_rows(decider, batch)
    started = time.perf_counter()
    for built, questions in work:
        decider.run_rows(built, questions)
    return time.perf_counter() - started


@dataclass(frozen=True)
class Baseline:
    """The FP32 graph as the search times it, and what preparing and timing it took."""

    directory: Path
    decider: Decider
    optimize_s: float
    pass_s: float


def measured_baseline(
    fp32_graph: Path, raw: Path, out_dir: Path, batch: Sequence[dict[str, Any]], threads: int
) -> Baseline:
    """The FP32 graph optimized offline into `out_dir` and opened, with how long that optimization and one pass
    over `batch` took: the figures of the estimate."""
    started = time.perf_counter()
    directory = prepare_artifact(fp32_graph, raw, out_dir)
    optimize_s = time.perf_counter() - started
    decider = Decider.from_artifact(directory, verify=False, threads=threads)
    return Baseline(directory, decider, optimize_s, fp32_pass_seconds(decider, batch))


def duration(seconds: float) -> str:
    if seconds < 90:
        return "%.0f s" % seconds
    return "%.1f min" % (seconds / 60) if seconds < 5400 else "%.1f h" % (seconds / 3600)


@dataclass(frozen=True)
class SearchPlan:
    fixed: Sequence[str]  # the fixed candidates, in the order they are built and timed
    mixes: Sequence[str]  # layer-mix, node-mix: built only while they can still win
    speed_cases: int  # the speed batch every graph is timed over
    runs: int  # timed passes per graph, after one warm-up
    selection_cases: int
    exhaustive: bool

    @classmethod
    def of(
        cls, names: Sequence[str], speed_cases: int, runs: int, selection_cases: int, exhaustive: bool
    ) -> SearchPlan:
        """The plan of a search of `names`: the fixed candidates in search order, then the mixes asked for."""
        fixed = [c.name for c in search_order(names)]
        return cls(
            fixed, [n for n in (LAYER_MIX, NODE_MIX) if n in names], speed_cases, runs, selection_cases, exhaustive
        )

    def line(self) -> str:
        """The candidates to try, their order and how they are gated."""
        return (
            "    %d candidate(s) to try: %s%s; each is built and timed against fp32 (%d cases x %d runs), then "
            "gated on %d selection cases (%s)"
            % (
                len(self.fixed) + len(self.mixes),
                ", ".join(self.fixed),
                " then the mixes " + ", ".join(self.mixes) if self.mixes else "",
                self.speed_cases,
                self.runs,
                self.selection_cases,
                "every candidate, in full"
                if self.exhaustive
                else "fastest first, stopping at the first that passes; no candidate is gated once it cannot win",
            )
        )

    def estimate(self, optimize_s: float, fp32_pass_s: float) -> list[str]:
        """The time it may take, from this run's FP32 figures, and the faster ways: `--target cpu-fp32` (no search)
        and, when more than one candidate is searched, `--candidates nbits-sym-b32`."""
        n = len(self.fixed)
        case_s = fp32_pass_s / max(1, self.speed_cases)
        # each timed pass runs the candidate and the FP32 graph, warm-up included
        build_s = BUILD_PER_OPTIMIZATION * optimize_s + 2 * (self.runs + 1) * fp32_pass_s
        gate_s = self.selection_cases * case_s
        said = "    estimate from this run's fp32 (%.2f s per case, %s to optimize the graph): " % (
            case_s,
            duration(optimize_s),
        )
        if not n:
            said += (
                "the mixes build and gate a graph per encoder layer or MatMul, each gate on %d selection cases "
                "about %s" % (self.selection_cases, duration(gate_s))
            )
        elif self.exhaustive:
            said += (
                "building and timing the %d fixed candidate(s) about %s, then gating every one in full on %d "
                "selection cases, about %s each (%s in all)"
                % (n, duration(n * build_s), self.selection_cases, duration(gate_s), duration(n * (build_s + gate_s)))
            )
        else:
            said += (
                "building and timing the %d fixed candidate(s) about %s, then gating them fastest first on %d "
                "selection cases, about %s each, until the first that passes and is fast enough (%s if every "
                "one is gated)"
                % (n, duration(n * build_s), self.selection_cases, duration(gate_s), duration(n * (build_s + gate_s)))
            )
        if n and self.mixes:
            said += "; the mixes add a build and a gate per encoder layer or MatMul when they can still win"
        faster = "    faster: --target cpu-fp32 (no search: an FP32 artifact)"
        if n + len(self.mixes) > 1:
            faster += " or --candidates %s (one candidate)" % ONE_CANDIDATE
        return [said, faster]
