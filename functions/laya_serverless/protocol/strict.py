"""Strict Jev mode (`LAYA_JEV_STRICT`): the TypeSafe Jev contract where it differs from upstream's rows.

Default mode answers exactly what upstream `laya-serve` answers. Strict mode follows the Jev
spec that the official client and `jevcompat` check:

- a validation failure is a 422 whose `detail` is a list of `{"loc": ["body", ...], "msg", "type"}`, `loc`
  and `type` being the refusal's own `location` and `kind` (the message text is never parsed);
  every other refusal is `{"detail": {"error_type": ..., "message": ...}}` (the refusal class declares both);
- a question without `instructions` (the Jev schema makes them optional) is asked with a neutral
  default; an empty question set is refused;
- a choice takes 2-255 options: past the head window (the options whose markers surely fit in
  `max_len`) or 100, it is narrowed by elimination (`tournament`);
- `confidence` is Laya's (normalized entropy, the default) or, with `LAYA_JEV_CONFIDENCE=jev`,
  Jev's formula over the probabilities.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..errors import InvalidRequest, MalformedEvent, MalformedRequest, RequestError
from .limits import MAX_CHOICE_OPTIONS

DEFAULT_INSTRUCTIONS = {
    "noul": "Does the statement hold for this state?",
    "choice": "Which option fits this state best?",
    "score": "Which level fits this state best?",
}
EMPTY_QUESTIONS = "'questions' must hold at least one question"
# Option markers per choice that fit `max_len` at the per-option floor of 4 tokens:
# the last marker sits at most at 2 + 8 + 4·(n-1), and must sit below max_len.
_MARKER_FLOOR, _HEAD_BEFORE_SLOTS = 4, 10


def is_validation(error: RequestError) -> bool:
    return isinstance(error, MalformedRequest | InvalidRequest) and not isinstance(error, MalformedEvent)


def error_body(error: RequestError) -> dict[str, Any]:
    """The strict body of a refusal: a validation list (FastAPI's `loc`, `msg`, `type`), or the error-type object."""
    if is_validation(error):
        return {"detail": [{"loc": ["body", *error.location], "msg": error.detail, "type": error.kind}]}
    return {"detail": {"error_type": error.error_type, "message": error.detail}}


def prepared(body: Any) -> Any:
    """The body with default instructions where a question has none; an empty question set refused."""
    if not isinstance(body, dict) or not isinstance(body.get("questions"), dict):
        return body
    if not body["questions"]:
        raise InvalidRequest(EMPTY_QUESTIONS, location=("questions",), kind="too_short")
    questions = {}
    for qid, question in body["questions"].items():
        if isinstance(question, dict) and question.get("instructions") is None \
                and question.get("type") in DEFAULT_INSTRUCTIONS:
            question = {**question, "instructions": DEFAULT_INSTRUCTIONS[question["type"]]}
        questions[qid] = question
    return {**body, "questions": questions}


def head_window(max_len: int) -> int:
    """Options of one choice whose markers surely fit a row of `max_len` tokens, however long their text."""
    return max(2, (max_len - _HEAD_BEFORE_SLOTS + _MARKER_FLOOR - 1) // _MARKER_FLOOR)


def narrowing_group(max_lens: Iterable[int], configured: int) -> int:
    """The tournament group in strict mode: the configured one, else 100 or the smallest head window."""
    if configured:
        return configured
    return min([MAX_CHOICE_OPTIONS, *(head_window(n) for n in max_lens)])
