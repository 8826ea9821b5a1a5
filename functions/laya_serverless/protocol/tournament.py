"""Tournament mode (`LAYA_TOURNAMENT_GROUP`): a choice with more options than the group
size is narrowed by elimination before the final answer.

Each round splits every large choice's labels, in criteria order, into near-equal groups of at
most `group` labels, asks every group of every large question as its own question in one call,
and keeps each group's winner; once every choice fits a group, one final call answers all the
questions with the narrowed choices. The answer keeps every original label (eliminated ones at
0.0) and reports `x_tournament`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..core.questions import question_location
from ..errors import QuestionError
from .limits import MAX_CHOICE_OPTIONS

Predict = Callable[[dict[str, Any]], dict[str, Any]]


def _labels(criteria: dict[Any, Any] | list[Any]) -> list[Any]:
    return list(criteria) if isinstance(criteria, dict | list) else []


def plan(questions: Any, group: int) -> dict[str, list[Any]] | None:
    """The choices to narrow (id -> labels), or None when the request takes the one-pass path."""
    if not isinstance(questions, dict):
        return None
    large = {qid: _labels(q["criteria"]) for qid, q in questions.items()
             if isinstance(q, dict) and q.get("type") == "choice" and isinstance(q.get("criteria"), dict | list)
             and len(q["criteria"]) > group}
    if not large:
        return None
    not_strings = [qid for qid, labels in large.items() if not all(isinstance(label, str) for label in labels)]
    if any(len(labels) > MAX_CHOICE_OPTIONS for labels in large.values()):
        if not_strings:
            raise QuestionError("question %r: a choice is narrowed by elimination once a request has one over %d "
                                "options, and that needs every label to be a string"
                                % (not_strings[0], MAX_CHOICE_OPTIONS), location=question_location(not_strings[0]))
        return large
    ordered = [qid for qid in large if questions[qid].get("option_order") is not None]
    return None if not_strings or ordered else large


def _narrowed(question: dict[str, Any], labels: list[Any]) -> dict[str, Any]:
    criteria = question["criteria"]
    subset = {label: criteria[label] for label in labels} if isinstance(criteria, dict) else list(labels)
    narrowed = dict(question, criteria=subset)
    narrowed.pop("option_order", None)  # it no longer fits the kept options
    return narrowed


def predict_with_tournament(predict: Predict, questions: dict[str, Any], group: int) -> dict[str, Any]:
    """Answer `questions` through `predict(questions) -> result`, narrowing large choices first."""
    large = plan(questions, group)
    if large is None:
        return predict(questions)
    remaining: dict[str, list[Any]] = {}
    for qid, question in questions.items():
        if isinstance(question, dict) and question.get("type") == "choice":
            if "criteria" not in question:
                raise QuestionError("question %r is a choice but has no criteria" % (qid,),
                                    location=question_location(qid))
            remaining[qid] = _labels(question["criteria"])
    rounds = dict.fromkeys(remaining, 0)
    input_tokens = 0
    while True:
        groups = []
        for qid, labels in remaining.items():
            parts = -(-len(labels) // group)
            if parts > 1:
                groups += [(qid, labels[i * len(labels) // parts:(i + 1) * len(labels) // parts]) for i in range(parts)]
        if not groups:
            break
        result = predict({str(i): _narrowed(questions[qid], labels) for i, (qid, labels) in enumerate(groups)})
        input_tokens += result["usage"]["input_tokens"]
        winners: dict[str, list[Any]] = {}
        for i, (qid, _) in enumerate(groups):
            winners.setdefault(qid, []).append(result["answers"][str(i)]["choice"])
        for qid, labels in winners.items():
            remaining[qid] = labels
            rounds[qid] += 1
    final = {qid: _narrowed(q, remaining[qid]) if rounds.get(qid) else q for qid, q in questions.items()}
    result = predict(final)
    answers = dict(result["answers"])
    for qid, labels in large.items():
        answer = answers.get(qid)
        if not isinstance(answer, dict) or not rounds.get(qid):
            continue
        report: dict[str, Any] = {"finalists": list(remaining[qid]), "rounds": rounds[qid]}
        if questions[qid].get("option_order") is not None:
            report["option_order_dropped"] = True
        emitted = answer.get("probabilities") or {}
        answers[qid] = {**answer, "probabilities": {label: emitted.get(label, 0.0) for label in labels},
                        "x_tournament": report}
    usage = dict(result["usage"], input_tokens=input_tokens + result["usage"]["input_tokens"])
    return {**result, "answers": answers, "usage": usage}
