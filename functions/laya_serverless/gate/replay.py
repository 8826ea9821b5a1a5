"""The parity gate: an artifact against the golden reference, with definitions fixed before measurement.

- probability error: max |dp| over options (temperature-scaled, option order) vs the goldens;
- action-probability error: likewise for `act_probability`;
- hard mismatch: top-1 differs while the reference's top-1/top-2 margin is >= 2x tolerance;
- near-tie flip: top-1 differs inside that band; listed row by row, never hidden;
- token ids and markers identical; all outputs finite; two runs bit-identical (every `REPEAT_EVERY`-th
  case, the first included); a question upstream refuses on this checkpoint's budget is refused by
  the runtime with the same message.

The golden rows are split once (`splits.split_for`) into `selection` and `confirmation`; each
split is measured on its own (max, p99 and median |dp|, max |d act|, every hard mismatch, near-tie
flip and failing row) and the verdict is that both pass. A build chooses its configuration on
`selection` alone and checks `confirmation` once, on the chosen one.

This module imports no torch: `laya-artifacts parity` replays a golden file on the serving machine.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..artifact.targets import GATE_TOLERANCES
from ..artifact.tolerance import derivation_refusal
from ..core.decider import Decider
from ..core.decode import option_probabilities, temperature_for
from ..core.providers import device_of_target
from ..core.questions import parse_questions
from ..errors import InferenceError, QuestionError
from .splits import SPLITS, split_for, token_digest

TOLERANCES = GATE_TOLERANCES
# One session thread: the gate is no benchmark, and ORT's spinning pool on a shared core slowed it 2x here.
GATE_THREADS = 1
# Which cases run twice for the bit-identity check: a nondeterministic kernel shows on any case, and running
# every one twice made the check half of every gate's time (the demo's FP32 gate: 117 s, 66 s with this).
REPEAT_EVERY = 4
PROGRESS_EVERY = 10.0  # seconds between a long gate's progress lines


@dataclass
class SplitReport:
    """One split's figures; `errors` holds every row's max |dp| (for the percentiles, not serialized)."""

    split: str
    tolerance: float
    rows: int = 0
    cases: int = 0
    refusals_checked: int = 0
    repeats_checked: int = 0
    errors: list[float] = field(default_factory=list, repr=False)
    max_action_error: float = 0.0
    hard_mismatches: list[dict[str, Any]] = field(default_factory=list)
    near_tie_flips: list[dict[str, Any]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    # Set when gating stopped once the refusal was certain (`gate_rows(stop_above=...)`): the figures are lower
    # bounds, over the first `cases` of `stopped_early["of"]` cases.
    stopped_early: dict[str, Any] | None = None

    @property
    def max_probability_error(self) -> float:
        return max(self.errors, default=0.0)

    @property
    def p99_probability_error(self) -> float:
        return float(np.percentile(self.errors, 99)) if self.errors else 0.0

    @property
    def median_probability_error(self) -> float:
        return float(np.median(self.errors)) if self.errors else 0.0

    @property
    def passed(self) -> bool:
        return self.rows > 0 and not self.failures and not self.hard_mismatches \
            and self.max_probability_error <= self.tolerance and self.max_action_error <= self.tolerance

    def as_dict(self) -> dict[str, Any]:
        return {"split": self.split, "passed": self.passed, "cases": self.cases, "rows": self.rows,
                "refusals_checked": self.refusals_checked, "repeats_checked": self.repeats_checked,
                "max_probability_error": self.max_probability_error,
                "p99_probability_error": self.p99_probability_error,
                "median_probability_error": self.median_probability_error,
                "max_action_error": self.max_action_error, "hard_mismatches": self.hard_mismatches,
                "near_tie_flips": self.near_tie_flips, "failures": self.failures,
                **({"stopped_early": self.stopped_early} if self.stopped_early else {})}

    def summary(self) -> dict[str, Any]:
        """The figures without the row lists (what a search records per candidate)."""
        full = self.as_dict()
        for key in ("hard_mismatches", "near_tie_flips", "failures"):
            full[key] = len(full[key])
        return full


@dataclass
class GateReport:
    """The gate's verdict over the splits it measured, with the corpus and (for int8) the search."""

    target: str
    tolerance: float
    splits: dict[str, SplitReport] = field(default_factory=dict)
    corpus: dict[str, Any] = field(default_factory=dict)
    search: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    # Set when `tolerance` was derived for this checkpoint (`artifact/tolerance.py`), with how; None: the target's own.
    tolerance_derivation: dict[str, Any] | None = None

    @property
    def passed(self) -> bool:
        return bool(self.splits) and all(s.passed for s in self.splits.values())

    # Totals over the splits, for callers that only want one number.
    @property
    def rows(self) -> int:
        return sum(s.rows for s in self.splits.values())

    @property
    def max_probability_error(self) -> float:
        return max((s.max_probability_error for s in self.splits.values()), default=0.0)

    @property
    def max_action_error(self) -> float:
        return max((s.max_action_error for s in self.splits.values()), default=0.0)

    @property
    def hard_mismatches(self) -> list[dict[str, Any]]:
        return [m for s in self.splits.values() for m in s.hard_mismatches]

    @property
    def near_tie_flips(self) -> list[dict[str, Any]]:
        return [f for s in self.splits.values() for f in s.near_tie_flips]

    @property
    def failures(self) -> list[str]:
        return ["[%s] %s" % (s.split, f) for s in self.splits.values() for f in s.failures]

    def as_dict(self) -> dict[str, Any]:
        return {"target": self.target, "tolerance": self.tolerance, "passed": self.passed,
                "reference": "upstream laya on PyTorch CPU FP32", "rows": self.rows,
                "max_probability_error": self.max_probability_error, "max_action_error": self.max_action_error,
                "splits": {name: s.as_dict() for name, s in self.splits.items()},
                "corpus": self.corpus, "search": self.search, "notes": self.notes,
                **({"tolerance_derivation": self.tolerance_derivation} if self.tolerance_derivation else {})}

    def table(self) -> str:
        lines = ["parity gate (%s, tolerance %g): %s" % (self.target, self.tolerance,
                                                        "PASSED" if self.passed else "FAILED")]
        if self.tolerance_derivation:
            found = self.tolerance_derivation
            lines.append("  tolerance %g derived for this checkpoint, not the target's %g: %s; spread %.3g over %d "
                         "row(s) (PyTorch FP32 vs float64), factor %g" % (
                             found["tolerance"], found["base"], found["rule"], found["spread"], len(found["rows"]),
                             found["factor"]))
        if self.corpus.get("sha256"):
            lines.append("  corpus sha256 %s" % self.corpus["sha256"])
        if self.splits:
            lines.append("  %-13s %5s %9s %9s %9s %10s %5s %8s %8s"
                         % ("split", "rows", "max|dp|", "p99|dp|", "med|dp|", "max|dact|", "hard", "near-tie",
                            "failures"))
            for s in self.splits.values():
                lines.append("  %-13s %5d %9.3g %9.3g %9.3g %10.3g %5d %8d %8d  %s" % (
                    s.split, s.rows, s.max_probability_error, s.p99_probability_error, s.median_probability_error,
                    s.max_action_error, len(s.hard_mismatches), len(s.near_tie_flips), len(s.failures),
                    "passed" if s.passed else "FAILED"))
        else:
            lines.append("  no split was measured on a chosen configuration")
        for s in self.splits.values():
            lines += ["  near tie: [%s] %s/%s ours %s vs reference %s margin %.4f"
                      % (s.split, f["case"], f["question"], f["ours"], f["reference"], f["margin"])
                      for f in s.near_tie_flips]
            lines += ["  HARD: [%s] %s/%s ours %s vs reference %s margin %.4f"
                      % (s.split, m["case"], m["question"], m["ours"], m["reference"], m["margin"])
                      for m in s.hard_mismatches]
            lines += ["  FAIL: [%s] %s" % (s.split, f) for f in s.failures]
        if self.search:
            lines.append(search_table(self.search))
        lines += ["  note: %s" % n for n in self.notes]
        return "\n".join(lines)


def search_table(search: dict[str, Any]) -> str:
    lines = ["  precision search (%s): chose %s" % (search.get("policy", ""), search.get("chosen") or "nothing")]
    baseline = search.get("fp32_speed_ms")
    if baseline:
        lines.append("    fp32 baseline: %.1f ms per batch" % baseline)
    for c in search.get("candidates", []):
        sel = c.get("selection") or {}
        lines.append("    %-24s %-6s max|dp| %-8.3g p99 %-8.3g hard %-3s %s" % (
            c["name"], "pass" if sel.get("passed") else "fail", sel.get("max_probability_error", float("nan")),
            sel.get("p99_probability_error", float("nan")), sel.get("hard_mismatches", "-"),
            "%.1f ms (x%.3f)" % (c["speed_ms"], c["speedup"]) if c.get("speed_ms") else c.get("skipped", "")))
    for layer in search.get("layer_sensitivity", []):
        lines.append("    layer %-2d alone: max|dp| %.3g, hard %d" % (
            layer["layer"], layer["max_probability_error"], layer["hard_mismatches"]))
    for node in (search.get("node_mix") or {}).get("sensitivity", []):
        lines.append("    node %s alone (probe slice): max|dp| %.3g, hard %d" % (
            node["node"], node["max_probability_error"], node["hard_mismatches"]))
    if search.get("why"):
        lines.append("    why: %s" % search["why"])
    return "\n".join(lines)


def _top_two_margin(p: np.ndarray) -> float:
    ordered = np.sort(p)[::-1]
    return float(ordered[0] - ordered[1]) if len(ordered) > 1 else 1.0


def row_split(row: dict[str, Any]) -> str:
    return row.get("split") or split_for(row["id"])


def _tokens_match(built: list[Any], row: dict[str, Any]) -> bool:
    if [list(r.markers) for r in built] != [list(m) for m in row["markers"]]:
        return False
    if "token_ids" in row:  # format 1: the ids themselves
        return bool([list(r.ids) for r in built] == row["token_ids"])
    return bool([len(r.ids) for r in built] == row["n_tokens"]) and \
        bool([token_digest(r.ids) for r in built] == row["token_ids_sha256"])


def _check_refusals(decider: Decider, row: dict[str, Any], report: SplitReport, max_len: int,
                    head_max_len: int) -> None:
    for qid, message in row.get("refused", {}).items():
        report.refusals_checked += 1
        question = parse_questions({qid: row["questions"][qid]})
        try:
            decider.rows_for(row["state"], question, max_len, head_max_len)
        except QuestionError as exc:
            if str(exc) != message:
                report.failures.append("%s/%s: refused with %r, upstream said %r" % (row["id"], qid, str(exc), message))
            continue
        report.failures.append("%s/%s: upstream refuses this question (%s) but the runtime answered it"
                               % (row["id"], qid, message))


def ticker(progress: Callable[[str], None] | None, split: str,
           every: float = PROGRESS_EVERY) -> Callable[[int, int], None]:
    """A per-case callback that says `gate SPLIT: DONE/TOTAL cases` at most every `every` seconds, and at the end."""
    last = [time.monotonic()]

    def tick(done: int, total: int) -> None:
        if progress is not None and (time.monotonic() - last[0] >= every or done == total):
            last[0] = time.monotonic()
            progress("    gate %s: %d/%d cases" % (split, done, total))
    return tick


def gate_rows(decider: Decider, rows: list[dict[str, Any]], target: str, split: str, *,
              repeat: bool = True, tick: Callable[[int, int], None] | None = None,
              stop_above: float | None = None, tolerance: float | None = None,
              first_index: int = 0, partial: bool = False) -> SplitReport:
    """Measure `decider` on golden `rows` (all of one split); `repeat` also checks that two runs of every
    `REPEAT_EVERY`-th case are bit-identical; `tick(done, total)` follows the cases. `rows` may be a part of the
    split (the deploy gate's steps, `gate.stepwise`): `first_index` is the first one's index in the split, so that
    the same cases run twice as in one pass, and `partial` leaves the whole-split checks to whoever merges the
    parts. With `stop_above` (above the tolerance) gating stops after the first case in which some |dp| or |d act|
    exceeds it: the split has failed, and its max figures (lower bounds then) already exceed `stop_above` (a
    search needs nothing more)."""
    report = SplitReport(split=split, tolerance=TOLERANCES[target] if tolerance is None else tolerance)
    if stop_above is not None and stop_above < report.tolerance:
        raise ValueError("stop_above %g is below the tolerance %g: a stopped split could still pass"
                         % (stop_above, report.tolerance))
    config = decider.config
    for index, row in enumerate(rows):
        if tick is not None:
            tick(index, len(rows))
        if stop_above is not None and max(report.max_probability_error, report.max_action_error) > stop_above:
            report.stopped_early = {"cases": index, "of": len(rows), "above": stop_above,
                                    "rule": "refusal certain: a figure exceeded %g; the figures are lower bounds"
                                            % stop_above}
            break
        case = row["id"]
        report.cases += 1
        twice = repeat and (first_index + index) % REPEAT_EVERY == 0
        max_len = row["controls"].get("max_len", config.max_len)
        head_max_len = row["controls"].get("head_max_len", config.head_max_len)
        _check_refusals(decider, row, report, max_len, head_max_len)
        refused = row.get("refused", {})
        accepted = {qid: d for qid, d in row["questions"].items() if qid not in refused}
        if not accepted:
            continue
        questions = parse_questions(accepted)
        try:
            built = decider.rows_for(row["state"], questions, max_len, head_max_len)
        except QuestionError as exc:
            report.failures.append("%s: the runtime refuses what upstream answered: %s" % (case, exc))
            continue
        if not _tokens_match(built, row):
            report.failures.append("%s: token ids or markers differ from the reference" % case)
            continue
        try:
            logits, act = decider.run_rows(built, questions)
            if twice:
                again_logits, again_act = decider.run_rows(built, questions)
                report.repeats_checked += 1
        except InferenceError as exc:  # non-finite outputs among them
            report.failures.append("%s: %s" % (case, exc))
            continue
        if twice and not (np.array_equal(logits, again_logits) and np.array_equal(act, again_act)):
            report.failures.append("%s: two runs of the same input are not bit-identical" % case)
        for j, question in enumerate(questions):
            report.rows += 1
            k = len(row["markers"][j])
            t = temperature_for(config, question.type_index, k)
            ours = option_probabilities(logits[j, :k], t, question.option_order)
            reference = option_probabilities(np.asarray(row["logits"][j], dtype=np.float32), t, question.option_order)
            p_error = float(np.abs(ours - reference).max())
            a_error = abs(float(act[j, 0]) - row["act_probabilities"][j][0])
            report.errors.append(p_error)
            report.max_action_error = max(report.max_action_error, a_error)
            if p_error > report.tolerance or a_error > report.tolerance:
                report.failures.append("%s/%s: |dp| %.3g, |d act| %.3g over %g"
                                       % (case, question.qid, p_error, a_error, report.tolerance))
            if int(ours.argmax()) != int(reference.argmax()):
                margin = _top_two_margin(reference)
                flip = {"split": split, "case": case, "question": question.qid, "ours": int(ours.argmax()),
                        "reference": int(reference.argmax()), "margin": margin, "abs_dp": p_error}
                (report.near_tie_flips if margin < 2 * report.tolerance else report.hard_mismatches).append(flip)
    if tick is not None and not report.stopped_early:
        tick(len(rows), len(rows))
    if not partial:
        close_split(report, bool(rows))
    return report


def close_split(report: SplitReport, had_rows: bool) -> None:
    """The checks that need the whole split: it had rows, and some row could be compared."""
    if report.cases and not report.rows:
        report.failures.append("no %s row could be compared" % report.split)
    if not had_rows:
        report.failures.append("the goldens hold no %s rows" % report.split)


def corpus_info(goldens: dict[str, Any]) -> dict[str, Any]:
    """What the report says about the corpus: its hash, counts, and the golden file's format."""
    corpus = dict(goldens.get("corpus", {}))
    corpus.setdefault("summary", {})
    corpus["goldens_format"] = goldens.get("format", 1)
    return corpus


def gate_decider(decider: Decider, goldens: dict[str, Any], target: str, *, splits: tuple[str, ...] = SPLITS,
                 repeat: bool = True, progress: Callable[[str], None] | None = None,
                 derivation: dict[str, Any] | None = None) -> GateReport:
    """Gate an open decider on the golden rows of `splits`; a split without rows fails. `progress` hears how far
    each split is (a line every `PROGRESS_EVERY` seconds: a 600-case gate takes minutes on a busy CPU). With
    `derivation` (`artifact.tolerance.derivation`) the rows are judged at its derived tolerance, and the report
    records it."""
    tolerance = gate_tolerance(target, derivation)
    report = GateReport(target=target, tolerance=tolerance, corpus=corpus_info(goldens),
                        tolerance_derivation=derivation)
    for split in splits:
        rows = [row for row in goldens["rows"] if row_split(row) == split]
        report.splits[split] = gate_rows(decider, rows, target, split, repeat=repeat, tolerance=tolerance,
                                         tick=ticker(progress, split))
    return report


def gate_tolerance(target: str, derivation: dict[str, Any] | None) -> float:
    """The tolerance rows are judged at: the target's, or a derived one whose derivation holds (else ValueError)."""
    if derivation is not None and derivation_refusal(derivation, target, derivation.get("tolerance")):
        raise ValueError(derivation_refusal(derivation, target, derivation.get("tolerance")))
    return TOLERANCES[target] if derivation is None else float(derivation["tolerance"])


def run_gate(artifact_dir: Path, goldens: dict[str, Any], target: str, *, splits: tuple[str, ...] = SPLITS,
             repeat: bool = True, threads: int | None = GATE_THREADS, device: str | None = None,
             progress: Callable[[str], None] | None = None, derivation: dict[str, Any] | None = None) -> GateReport:
    """Gate the artifact in `artifact_dir` (not yet published, so not verified by manifest) against `goldens`,
    on the device its target runs on (a cuda target on the GPU, never moved), or on `device` when given."""
    decider = Decider.from_artifact(artifact_dir, verify=False, threads=threads,
                                    device=device or device_of_target(target))
    return gate_decider(decider, goldens, target, splits=splits, repeat=repeat, progress=progress,
                        derivation=derivation)
