"""Scoring a model on the hand-written demo cases: accuracy per question type and domain, and ECE.

Correct means: choice, the expected label is the answer; noul, `noul >= 0.5` equals the expected
truth; score, the emitted `score` (the expected level) is within one level of the expected one.
Calibration (ECE) compares `answer_confidence` with exact top-1 correctness (for score, the most
probable level), the event that confidence is a probability of.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

Predict = Callable[[Any, dict[str, Any]], dict[str, Any]]   # (state, questions) -> {"answers": {...}}
TYPES = ("choice", "noul", "score")


@dataclass(frozen=True)
class Graded:
    domain: str
    qtype: str
    correct: bool          # the headline criterion above
    top1: bool             # exact top-1 (what answer_confidence is calibrated against)
    confidence: float      # answer_confidence


def grade(question: dict[str, Any], answer: dict[str, Any], expected: Any, domain: str) -> Graded:
    qtype = question["type"]
    if qtype == "choice":
        correct = answer["choice"] == expected
        top1 = correct
    elif qtype == "noul":
        correct = (answer["noul"] >= 0.5) == bool(expected)
        top1 = correct
    elif qtype == "score":
        levels = answer["probabilities"]
        best = max(levels, key=lambda k: levels[k])
        correct = abs(float(answer["score"]) - int(expected)) <= 1.0
        top1 = int(best) == int(expected)
    else:
        raise ValueError("unknown question type %r" % qtype)
    return Graded(domain, qtype, correct, top1, float(answer["answer_confidence"]))


def grade_cases(predict: Predict, cases: Sequence[dict[str, Any]]) -> list[Graded]:
    graded = []
    for case in cases:
        answers = predict(case["state"], case["questions"])["answers"]
        for name, question in case["questions"].items():
            graded.append(grade(question, answers[name], case["expected"][name], case["domain"]))
    return graded


def expected_calibration_error(graded: Sequence[Graded], bins: int = 10) -> float:
    """Equal-width bins over [0, 1]: sum over bins of |accuracy - mean confidence| weighted by bin size."""
    if not graded:
        return 0.0
    total = 0.0
    for b in range(bins):
        lo, hi = b / bins, (b + 1) / bins
        members = [g for g in graded if lo < g.confidence <= hi or (b == 0 and g.confidence == 0.0)]
        if members:
            accuracy = sum(g.top1 for g in members) / len(members)
            confidence = sum(g.confidence for g in members) / len(members)
            total += len(members) / len(graded) * abs(accuracy - confidence)
    return total


def summary(graded: Sequence[Graded]) -> dict[str, dict[str, float]]:
    """Per question type: n, accuracy (headline criterion), top-1, mean confidence, ECE."""
    out = {}
    for qtype in TYPES:
        rows = [g for g in graded if g.qtype == qtype]
        if rows:
            out[qtype] = {"n": len(rows), "accuracy": sum(g.correct for g in rows) / len(rows),
                          "top1": sum(g.top1 for g in rows) / len(rows),
                          "confidence": sum(g.confidence for g in rows) / len(rows),
                          "ece": expected_calibration_error(rows)}
    out["all"] = {"n": len(graded), "accuracy": sum(g.correct for g in graded) / max(1, len(graded)),
                  "top1": sum(g.top1 for g in graded) / max(1, len(graded)),
                  "confidence": sum(g.confidence for g in graded) / max(1, len(graded)),
                  "ece": expected_calibration_error(graded)}
    return out


def table(graded: Sequence[Graded]) -> str:
    """A Markdown table: one row per type, then accuracy per domain."""
    lines = ["| type | n | accuracy | top-1 | mean answer_confidence | ECE |", "|---|---:|---:|---:|---:|---:|"]
    for name, row in summary(graded).items():
        lines.append("| %s | %d | %.1f%% | %.1f%% | %.3f | %.3f |" % (
            name, row["n"], 100 * row["accuracy"], 100 * row["top1"], row["confidence"], row["ece"]))
    lines += ["", "| domain | n | accuracy |", "|---|---:|---:|"]
    for domain in sorted({g.domain for g in graded}):
        rows = [g for g in graded if g.domain == domain]
        lines.append("| %s | %d | %.1f%% |" % (domain, len(rows), 100 * sum(g.correct for g in rows) / len(rows)))
    return "\n".join(lines)
