"""The precision search: the fastest reduced-precision encoder that passes the gate's selection split.

1. Every fixed candidate (`quantize.FIXED_CANDIDATES`), the public recipes first (`quantize.PUBLIC_RECIPES`),
   is written, optimized offline and timed interleaved with the FP32 graph, one at a time (two sessions
   open, whatever the model's size): the median of `SPEED_RUNS` warm passes (fewer where one takes minutes:
   `plan.speed_runs`) over a fixed batch of selection cases (`speed_batch`), one thread, scaled to FP32's first.
2. Candidates are gated on the **selection** split only. `exhaustive=False` (the default) gates them
   fastest first, stops at the first that passes (nothing slower can be chosen then), gates none that
   cannot be chosen (below `MIN_SPEEDUP` by more than the noise), and stops gating one once a row misses by
   `records.PORTABLE_MARGIN` x the tolerance.
3. The mixes (`search/mixes.py`): per layer, then per node (single MatMuls, each alone on a fixed slice of
   selection, every accumulated mix on all of it), each unit alone then added least sensitive first while
   selection passes. A mix is no faster than `encoder`, so it is skipped when it cannot win: `encoder`
   passed, a passing candidate is already faster than it, or it is below `MIN_SPEEDUP` itself.
4. The chosen candidate is the fastest that passed selection and is at least `MIN_SPEEDUP` times as fast
   as FP32 by more than FP32's own run-to-run spread in the same search (`timing_noise`): a slower int8
   graph buys nothing, and a speedup inside the noise is not one; FP32 serves then, and the refusal says which.

The confirmation split is never read here; `build.py` checks it once, on the chosen candidate.
"""

from __future__ import annotations

import shutil
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from laya_artifacts.errors import SearchError, SmoothingNotExact
from laya_artifacts.search.calibration import calibration_feeds, prepared_rows
from laya_artifacts.search.mixes import probe_rows, run_mixes
from laya_artifacts.search.plan import SearchPlan, measured_baseline, speed_runs
from laya_artifacts.search.quantize import (
    FIXED_CANDIDATES,
    LAYER_MIX,
    NODE_MIX,
    Candidate,
    encoder_matmuls,
    prepare_artifact,
    quantize_candidate,
    search_order,
)
from laya_artifacts.search.records import PORTABLE_MARGIN
from laya_artifacts.search.smoothing import ALPHA, smooth_graph
from laya_artifacts.search.verdict import verdict
from laya_serverless import Decider
from laya_serverless.artifact.targets import CPU_FP32
from laya_serverless.gate.replay import TOLERANCES, SplitReport, gate_rows, row_split, ticker

SELECTION = "selection"
SPEED_CASES, SPEED_RUNS, SEARCH_THREADS = 16, 5, 1
# A candidate must be at least this much faster than FP32: smaller gains sit inside the timing noise of a
# shared machine and do not pay for int8's error. 0 (or None) lifts the rule, e.g. for size alone.
MIN_SPEEDUP = 1.05
CANDIDATE_NAMES = tuple(c.name for c in FIXED_CANDIDATES) + (LAYER_MIX, NODE_MIX)


def check_candidate_names(candidates: Sequence[str] | None) -> list[str]:
    """The candidates to search (all when none are named); `ValueError` naming any unknown one."""
    names = list(candidates) if candidates else list(CANDIDATE_NAMES)
    unknown = sorted(set(names) - set(CANDIDATE_NAMES))
    if unknown:
        raise ValueError("unknown candidate(s) %s; choose from %s" % (", ".join(unknown), ", ".join(CANDIDATE_NAMES)))
    return names


@dataclass
class Trial:
    """One candidate's graph, opened, timed and (once gated) measured on selection."""

    candidate: Candidate
    directory: Path
    recipe: dict[str, Any]
    decider: Decider | None = None
    speed_ms: float | None = None
    runs_ms: list[float] = field(default_factory=list)
    selection: SplitReport | None = None

    @property
    def passed(self) -> bool:
        return self.selection is not None and self.selection.passed

    @property
    def ms(self) -> float:
        """The measured speed; only asked of timed trials."""
        if self.speed_ms is None:
            raise SearchError("%s was not timed" % self.candidate.name)
        return self.speed_ms


@dataclass
class SearchResult:
    chosen: Trial | None
    record: dict[str, Any]


def selection_rows(goldens: dict[str, Any]) -> list[dict[str, Any]]:
    return [row for row in goldens["rows"] if row_split(row) == SELECTION]


def speed_batch(rows: Sequence[dict[str, Any]], n: int | None = None) -> list[dict[str, Any]]:
    """A fixed batch of selection cases (SPEED_CASES, read when called), spread over the split in id order."""
    n = SPEED_CASES if n is None else n
    answerable = sorted((r for r in rows if r.get("markers")), key=lambda r: r["id"])
    step = max(1, len(answerable) // n)
    return answerable[::step][:n]


def measure_speeds(deciders: Sequence[Decider], batch: Sequence[dict[str, Any]],
                   runs: int | None = None, tick: Callable[[int, int], None] = lambda _run, _runs: None
                   ) -> list[list[float]]:
    """Milliseconds per pass over `batch` (one session run per case) for each decider, after one warm-up
    pass each. The passes are interleaved (run 1 of every graph, then run 2, ...) so that a neighbour
    slowing the machine for a while slows every graph alike instead of the one being timed then."""
    runs = SPEED_RUNS if runs is None else runs
    prepared = [prepared_rows(decider, batch) for decider in deciders]
    timings: list[list[float]] = [[] for _ in deciders]
    for run in range(runs + 1):
        for decider, work, times in zip(deciders, prepared, timings, strict=True):
            started = time.perf_counter()
            for built, questions in work:
                decider.run_rows(built, questions)
            if run:  # the first pass warms each session up
                times.append((time.perf_counter() - started) * 1000)
        tick(run, runs)
    return timings


# How a search times its graphs: (trial names, their deciders, the speed batch) -> ms per pass, per run, per
# decider. Tests inject fixed figures: which candidate wins a race on a loaded machine is not a behaviour.
SpeedTimer = Callable[[Sequence[str], Sequence[Decider], Sequence[dict[str, Any]]], list[list[float]]]


def wall_clock(_names: Sequence[str], deciders: Sequence[Decider],
               batch: Sequence[dict[str, Any]]) -> list[list[float]]:
    """The search's default timer: `measure_speeds` on this machine, now."""
    return measure_speeds(deciders, batch)


def ticking_clock(progress: Callable[[str], None], runs: int | None = None, every_s: float = 20.0) -> SpeedTimer:
    """`wall_clock` over `runs` passes that says how far it is at most every `every_s` seconds: at real size one pass
    takes minutes."""
    def timer(_names: Sequence[str], deciders: Sequence[Decider], batch: Sequence[dict[str, Any]]) -> list[list[float]]:
        last = [time.perf_counter()]

        def tick(run: int, runs: int) -> None:
            if time.perf_counter() - last[0] >= every_s:
                last[0] = time.perf_counter()
                progress("      timing: pass %d of %d done" % (run + 1, runs + 1))
        return measure_speeds(deciders, batch, runs, tick=tick)
    return timer


def _figures(report: SplitReport) -> str:
    return "max|dp| %.4f p99 %.4f median %.2g, max|d act| %.4f, hard %d, near-tie %d, failures %d" % (
        report.max_probability_error, report.p99_probability_error, report.median_probability_error,
        report.max_action_error, len(report.hard_mismatches), len(report.near_tie_flips), len(report.failures))


class _Search:
    def __init__(self, fp32_graph: Path, raw: Path, scratch: Path, goldens: dict[str, Any], target: str,
                 threads: int, progress: Callable[[str], None], timer: SpeedTimer, exhaustive: bool = True) -> None:
        self.fp32_graph, self.raw, self.scratch, self.target = fp32_graph, raw, scratch, target
        self.threads, self.progress, self.timer, self.exhaustive = threads, progress, timer, exhaustive
        self.rows = selection_rows(goldens)
        self.batch = speed_batch(self.rows)
        self._feeds: list[Any] | None = None
        self._smoothed: dict[tuple[Any, ...], tuple[Path, dict[str, Any]]] = {}
        self.baseline: Trial | None = None
        self.runs = SPEED_RUNS  # timed passes per graph (`plan.speed_runs`: fewer where a pass takes minutes)
        self.fp32_ms = 0.0  # the first FP32 figure: every candidate's speed is scaled to it

    def calibration(self) -> list[Any]:
        """The calibration cases: the probe slice of selection (`mixes.probe_rows`) as graph inputs, built once."""
        if self._feeds is None:
            reader = Decider.from_artifact(self.raw, verify=False, threads=self.threads)
            self._feeds = calibration_feeds(reader, probe_rows(self.rows))
        return self._feeds

    def smoothed(self, candidate: Candidate) -> tuple[Path, dict[str, Any]]:
        """The FP32 graph smoothed for `candidate`'s MatMuls, once per (alpha, MatMuls), and its fold check: the
        smoothed FP32 graph must still pass the FP32 tolerance on the probe slice, or the rewrite was not exact."""
        chosen = encoder_matmuls(self.fp32_graph).select(candidate)
        key = (candidate.smoothing, tuple(chosen))
        if key not in self._smoothed:
            folder = self.scratch / ("smoothed-%d" % len(self._smoothed))
            graph = self.scratch / ("%s.onnx" % folder.name)
            done = smooth_graph(self.fp32_graph, graph, chosen, self.calibration(), alpha=candidate.smoothing or ALPHA)
            check = gate_rows(Decider.from_artifact(prepare_artifact(graph, self.raw, folder), verify=False,
                                                    threads=self.threads),
                              probe_rows(self.rows), CPU_FP32, SELECTION, repeat=False)
            self.progress("    smoothing (alpha %g, %d groups: %d folded into LayerNorm, %d by Mul) in FP32: %s"
                          % (done["alpha"], done["groups"], done["folded_into_layernorm"], done["scaled_by_mul"],
                             _figures(check)))
            if not check.passed:
                raise SmoothingNotExact("the smoothed FP32 graph misses the FP32 tolerance %g on the probe slice: %s"
                                        % (check.tolerance, _figures(check)))
            shutil.rmtree(folder, ignore_errors=True)
            self._smoothed[key] = graph, dict(done, fp32_check=check.summary())
        return self._smoothed[key]

    def build(self, candidate: Candidate) -> Trial:
        folder = self.scratch / ("candidate-" + candidate.name.replace(",", "_"))
        graph = self.scratch / ("%s.onnx" % folder.name)
        source, smoothing = self.smoothed(candidate) if candidate.smoothing is not None else (self.fp32_graph, None)
        started = time.perf_counter()
        recipe = quantize_candidate(source, graph, candidate,
                                    self.calibration() if candidate.method == "static-int8" else None)
        if smoothing is not None:
            recipe["smoothing"] = smoothing
        quantized = time.perf_counter()
        self.progress("      quantized in %.0f s; optimizing offline" % (quantized - started))
        trial = Trial(candidate, prepare_artifact(graph, self.raw, folder), recipe)
        self.progress("      optimized in %.0f s; timing against fp32 (%d interleaved passes over %d cases, one "
                      "warm-up)" % (time.perf_counter() - quantized, self.runs, len(self.batch)))
        return trial

    def open(self, trial: Trial) -> Decider:
        if trial.decider is None:
            trial.decider = Decider.from_artifact(trial.directory, verify=False, threads=self.threads)
        return trial.decider

    def time(self, trials: Sequence[Trial]) -> None:
        """Time `trials` together (the default timer interleaves them: `measure_speeds`)."""
        deciders = [self.open(t) for t in trials]
        names = [t.candidate.name for t in trials]
        for trial, runs in zip(trials, self.timer(names, deciders, self.batch), strict=True):
            trial.runs_ms, trial.speed_ms = runs, statistics.median(runs)

    def time_against_fp32(self, trial: Trial) -> None:
        """Time `trial` interleaved with the FP32 graph; its speed is scaled to the first FP32 figure, so that every
        candidate compares with one baseline while only two sessions are open at a time."""
        assert self.baseline is not None
        again = Trial(self.baseline.candidate, self.baseline.directory, {}, self.baseline.decider)
        self.time([again, trial])
        self.baseline.decider = again.decider
        if not self.fp32_ms:
            self.fp32_ms, self.baseline.speed_ms, self.baseline.runs_ms = again.ms, again.speed_ms, again.runs_ms
        else:
            trial.speed_ms = self.fp32_ms * trial.ms / again.ms

    def gate(self, trial: Trial, rows: Sequence[dict[str, Any]] | None = None) -> SplitReport:
        """`trial` on the selection split (or on `rows`, a slice of it: `mixes.probe_rows`). Unless the search is
        exhaustive, gating stops once a figure exceeds `PORTABLE_MARGIN` x the tolerance: the refusal is then
        certain, and clear enough for a kept record to decide every x86 class (`records.usable`)."""
        gated = self.rows if rows is None else list(rows)
        stop = None if self.exhaustive else PORTABLE_MARGIN * TOLERANCES[self.target]
        trial.selection = gate_rows(self.open(trial), gated, self.target, SELECTION, repeat=False, stop_above=stop,
                                    tick=ticker(self.progress, "%s on selection" % trial.candidate.name))
        if trial.selection.stopped_early:
            self.progress("      stopped after %d of %d cases: the refusal is certain"
                          % (trial.selection.stopped_early["cases"], len(gated)))
        return trial.selection

    @staticmethod
    def figures(report: SplitReport) -> str:
        return _figures(report)


def _record(trial: Trial, fp32_ms: float, skipped: str | None = None) -> dict[str, Any]:
    return {"name": trial.candidate.name, "recipe": trial.recipe, "speed_ms": trial.speed_ms,
            "runs_ms": trial.runs_ms, "speedup": fp32_ms / trial.speed_ms if trial.speed_ms else None,
            "selection": trial.selection.summary() if trial.selection else None,
            **({"skipped": skipped} if skipped else {})}


def timing_noise(runs_ms: Sequence[float]) -> float:
    """The FP32 graph's run-to-run spread in this search: half the range of its timings over their median."""
    return (max(runs_ms) - min(runs_ms)) / 2 / statistics.median(runs_ms) if len(runs_ms) > 1 else 0.0


def _build_fixed(search: _Search, names: Sequence[str]) -> tuple[list[Trial], list[dict[str, Any]]]:
    """The requested fixed candidates built and timed against FP32 one at a time (public recipes first), each
    session closed after timing; and a record for each that could not be built (its smoothing not exact)."""
    trials: list[Trial] = []
    unbuilt: list[dict[str, Any]] = []
    order = search_order(names)
    for n, candidate in enumerate(order, 1):
        search.progress("    [%d/%d] %s (%s): building" % (n, len(order), candidate.name, candidate.description))
        started = time.perf_counter()
        try:
            trial = search.build(candidate)
        except SmoothingNotExact as exc:
            search.progress("    %s not built: %s" % (candidate.name, exc))
            unbuilt.append({"name": candidate.name, "recipe": candidate.as_dict(), "skipped": str(exc)})
            continue
        search.time_against_fp32(trial)
        trial.decider = None  # one candidate session open at a time: at real size each holds gigabytes
        trials.append(trial)
        search.progress("    [%d/%d] %s: %.1f ms, x%.3f vs fp32 (built and timed in %.0f s)"
                        % (n, len(order), candidate.name, trial.ms, search.fp32_ms / trial.ms,
                           time.perf_counter() - started))
    return trials, unbuilt


def _gate_fixed(search: _Search, trials: list[Trial], exhaustive: bool, min_speedup: float | None,
                noise: float = 0.0) -> tuple[Trial | None, dict[str, str]]:
    """Gate the timed candidates on selection, fastest first, skipping what cannot win (unless `exhaustive`):
    anything slower than one that passed, and anything below `min_speedup` once the noise is taken off (the
    choice's own rule). Returns the fastest that passed."""
    skipped: dict[str, str] = {}
    passed_fastest: Trial | None = None
    ordered = trials if exhaustive else sorted(trials, key=lambda t: t.ms)
    for n, trial in enumerate(ordered, 1):
        name, speedup = trial.candidate.name, search.fp32_ms / trial.ms
        if not exhaustive and passed_fastest is not None:
            skipped[name] = "not gated: %s passed and is faster" % passed_fastest.candidate.name
        elif not exhaustive and min_speedup and speedup - noise < min_speedup:
            skipped[name] = ("not gated: x%.3f vs fp32, less this run's noise (+-%.3f), is below the x%g a choice "
                             "needs" % (speedup, noise, min_speedup))
        if name in skipped:
            search.progress("    [%d/%d] %s %s" % (n, len(ordered), name, skipped[name]))
            continue
        search.progress("    [%d/%d] gating %s on %d selection cases" % (n, len(ordered), name, len(search.rows)))
        report = search.gate(trial)
        search.progress("    %s on selection: %s: %s" % (name, _figures(report),
                                                         "passed" if report.passed else "failed"))
        if report.passed and (passed_fastest is None or trial.ms < passed_fastest.ms):
            passed_fastest = trial
        if not report.passed:
            trial.decider = None
            shutil.rmtree(trial.directory, ignore_errors=True)  # a refused graph is never shipped
    return passed_fastest, skipped


def precision_search(fp32_graph: Path, raw: Path, scratch: Path, goldens: dict[str, Any], target: str, *,
                     candidates: Sequence[str] | None = None, exhaustive: bool = False,
                     min_speedup: float | None = MIN_SPEEDUP, threads: int = SEARCH_THREADS,
                     progress: Callable[[str], None] = lambda _m: None,
                     timer: SpeedTimer = wall_clock) -> SearchResult:
    """Choose the fastest candidate that passes `goldens`' selection split; the record says how."""
    names = check_candidate_names(candidates)
    search = _Search(fp32_graph, raw, scratch, goldens, target, threads, progress, timer, exhaustive)
    if not search.rows:
        raise SearchError("the goldens hold no selection rows: nothing to choose a configuration on")
    measured = measured_baseline(fp32_graph, raw, scratch / "candidate-fp32", search.batch, threads)
    search.runs = speed_runs(measured.pass_s, SPEED_RUNS)
    search.timer = ticking_clock(progress, search.runs) if timer is wall_clock else timer
    plan = SearchPlan.of(names, len(search.batch), search.runs, len(search.rows), exhaustive)
    for line in [plan.line(), *plan.estimate(measured.optimize_s, measured.pass_s)]:
        progress(line)
    # the FP32 session the estimate timed is the one every candidate is timed against
    baseline = Trial(Candidate("fp32", "none"), measured.directory, {}, measured.decider)
    search.baseline = baseline
    trials, unbuilt = _build_fixed(search, names)
    if not trials:
        search.time_against_fp32(Trial(baseline.candidate, baseline.directory, {}))  # the baseline on its own
    fp32_ms, noise = search.fp32_ms, timing_noise(baseline.runs_ms)
    progress("    fp32 baseline: %.1f ms per pass over %d selection cases (median of %d, interleaved; noise +-%.3f)"
             % (fp32_ms, len(search.batch), search.runs, noise))
    passed_fastest, skipped = _gate_fixed(search, trials, exhaustive, min_speedup, noise)
    mix_records = run_mixes(search, names, trials, passed_fastest, exhaustive, min_speedup)
    eligible = [t for t in trials if t.passed and t.speed_ms and (not min_speedup or  # clear of the noise band
                                                                  fp32_ms / t.ms - noise >= min_speedup)]
    chosen = min(eligible, key=lambda t: t.ms) if eligible else None
    too_slow = [name for name, why in skipped.items() if "below the" in why]
    timed = [(t.candidate.name, t.ms) for t in trials if t.speed_ms]
    why = verdict((chosen.candidate.name, chosen.ms) if chosen else None,
                  [(t.candidate.name, t.ms) for t in trials if t.passed and t.speed_ms], fp32_ms, min_speedup, noise,
                  too_slow, timed)
    progress("    chosen: %s (%s)" % (chosen.candidate.name if chosen else "nothing", why))
    record = {
        "policy": "fastest candidate passing selection and at least x%g as fast as fp32 by more than the fp32 "
                  "timing noise of the same run; confirmation checked once on it" % (min_speedup or 0),
        "mode": "exhaustive" if exhaustive else "fastest-first",
        "split": SELECTION, "selection_rows": sum(len(r.get("markers", [])) for r in search.rows),
        "speed": {"cases": len(search.batch), "case_ids": [r["id"] for r in search.batch], "runs": search.runs,
                  "warmup_runs": 1, "statistic": "median ms per pass, one session run per case, each candidate "
                  "interleaved with fp32 and scaled to the first fp32 figure", "threads": threads},
        "fp32_speed_ms": fp32_ms, "fp32_runs_ms": baseline.runs_ms, "fp32_noise": noise,
        "candidates": [_record(t, fp32_ms, skipped.get(t.candidate.name)) for t in trials] + unbuilt,
        **mix_records,
        "chosen": chosen.candidate.name if chosen else None, "why": why,
    }
    for trial in trials:  # the build gates the chosen graph again from its files: no session outlives the search
        trial.decider = None
    return SearchResult(chosen, record)


def reuse_decision(fp32_graph: Path, raw: Path, scratch: Path, goldens: dict[str, Any], target: str,
                   candidate: Candidate, record_path: Path, threads: int = SEARCH_THREADS,
                   progress: Callable[[str], None] = lambda _m: None) -> SearchResult:
    """An earlier search's choice (`search_records`), built and gated on selection without searching again."""
    search = _Search(fp32_graph, raw, scratch, goldens, target, threads, progress, wall_clock)
    trial = search.build(candidate)
    report = search.gate(trial)
    progress("    %s (the recorded choice) on selection: %s: %s"
             % (candidate.name, _figures(report), "passed" if report.passed else "failed"))
    why = "the search record %s chose it; not searched again (--research searches)" % record_path.name
    record = {"policy": "reused: %s" % why, "mode": "reused", "reused_record": record_path.name,
              "split": SELECTION, "candidates": [{"name": candidate.name, "recipe": trial.recipe,
                                                  "selection": report.summary()}],
              "chosen": candidate.name if report.passed else None,
              "why": why if report.passed else "the recorded choice %s failed selection here" % candidate.name}
    trial.decider = None
    return SearchResult(trial if report.passed else None, record)
