"""Request checks of the Jev protocol that run before any inference.

Pure functions over the decoded JSON body. Each refusal is a `RequestError` of the kind that fits,
carrying the exact `detail` text upstream `laya-serve` answers with; `statuses` maps kinds to
HTTP statuses. Values the library API checks too go through the same rule (`core.controls`).
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..core.abstention import Threshold, check_min_confidence
from ..core.controls import MAX_CHOICE_OPTIONS as MAX_CHOICE_OPTIONS  # the protocol's limit, defined below settings
from ..core.controls import (
    check_batch_size,
    check_budget,
    null_score_level,
)
from ..core.questions import question_location
from ..errors import InvalidRequest, MalformedRequest, QuestionError, TooLarge

MAX_BODY_BYTES = 2 * 1024 * 1024
MAX_QUESTIONS = 64
MAX_STATE_CHARS = 50_000
MAX_BATCH_STATES = 64
MAX_TOURNAMENT_CHOICE_OPTIONS = 255
MAX_SCORE_LEVELS = 32
MAX_TOTAL_OPTIONS = 512
ASSUMED_ROW_TOKENS = 512  # batch planning's row width when the request sends no max_len
HOOK_FIELDS = ("hooks", "on_predict_start", "on_predict_end", "hooks_raise", "hooks_timeout")
OUT_PARAMETERS = ("diagnostics",)
_STATE_PROBE_VALUES = 64
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _state_length_lower_bound(state: Any, cap: int) -> int:
    """Sum of string lengths met in a short walk, when it already proves the state is over `cap`; else 0.

    Raw string lengths never exceed the serialized length, so a 2 MiB string is refused after one
    `len()` instead of a full `json.dumps`; the number reported is then this (true) lower bound.
    """
    total, budget, stack = 0, _STATE_PROBE_VALUES, [state]
    while stack and budget > 0:
        budget -= 1
        item = stack.pop()
        if isinstance(item, str):
            total += len(item)
            if total > cap:
                return total
        elif type(item) is dict:
            stack.extend(item.values())
        elif type(item) is list or type(item) is tuple:
            stack.extend(item)
        else:
            return 0
    return 0


def state_length(state: Any) -> int:
    """Characters of the text that will be tokenized: the string, or its `json.dumps(ensure_ascii=False)`."""
    if isinstance(state, str):
        return len(state)
    over = _state_length_lower_bound(state, MAX_STATE_CHARS)
    if over:
        return over
    try:
        return len(json.dumps(state, ensure_ascii=False))
    except (TypeError, ValueError, RecursionError) as exc:
        raise MalformedRequest("'state' must be JSON-serializable", location=("state",)) from exc


def check_request_limits(state: Any, questions: Any, max_choice_options: int = MAX_CHOICE_OPTIONS) -> None:
    """The first body checks: presence, shape and size, before anything is tokenized."""
    if state is None:
        raise MalformedRequest("'state' is required", location=("state",), kind="missing")
    if not isinstance(questions, dict):
        raise MalformedRequest("'questions' must be an object", location=("questions",))
    if len(questions) > MAX_QUESTIONS:
        raise TooLarge("too many questions (%d > %d)" % (len(questions), MAX_QUESTIONS))
    total = 0
    for qid, question in questions.items():
        if not isinstance(question, dict):
            continue
        criteria, qtype = question.get("criteria"), question.get("type")
        if qtype == "choice" and isinstance(criteria, dict | list):
            total += len(criteria)
            if len(criteria) > max_choice_options:
                raise TooLarge("too many choice options for %r (%d > %d)"
                                   % (qid, len(criteria), max_choice_options))
        elif qtype == "score" and isinstance(criteria, list):
            total += len(criteria)
            if len(criteria) > MAX_SCORE_LEVELS:
                raise TooLarge("too many score levels for %r (%d > %d)"
                                   % (qid, len(criteria), MAX_SCORE_LEVELS))
            level = null_score_level(criteria)
            if level is not None:  # the library's check of the same rule words it differently
                raise InvalidRequest("score question %r has a null level at index %d; give every level a "
                                     "description" % (qid, level), location=question_location(qid))
    if total > MAX_TOTAL_OPTIONS:
        raise TooLarge("too many answer options across questions (%d > %d)" % (total, MAX_TOTAL_OPTIONS))
    length = state_length(state)
    if length > MAX_STATE_CHARS:
        raise TooLarge("state too large (%d > %d chars)" % (length, MAX_STATE_CHARS))


def check_batch_limits(states: Any, questions: Any, max_choice_options: int = MAX_CHOICE_OPTIONS) -> None:
    if not isinstance(states, list) or not states:
        raise MalformedRequest("'states' must be a non-empty list", location=("states",))
    if len(states) > MAX_BATCH_STATES:
        raise TooLarge("too many states in batch (%d > %d)" % (len(states), MAX_BATCH_STATES))
    for state in states:
        check_request_limits(state, questions, max_choice_options)


def refuse_hooks(body: dict[str, Any]) -> None:
    sent = sorted(key for key in HOOK_FIELDS if body.get(key) is not None)
    if sent:
        raise InvalidRequest("%s run inside the server process and cannot be sent to this endpoint; "
                             "install them where laya-serve runs, or drop them" % ", ".join(sent), location=(sent[0],))


def refuse_out_parameters(body: dict[str, Any]) -> None:
    sent = sorted(key for key in OUT_PARAMETERS if body.get(key) is not None)
    if sent:
        raise InvalidRequest("%s is filled in place for an in-process caller and cannot be returned over "
                             "HTTP; read the per-group report from the CLI or a local Router" % ", ".join(sent),
                             location=(sent[0],))


def has_lone_surrogate(value: Any) -> bool:
    """Any string anywhere in the body (keys included) holding an unpaired surrogate; no recursion."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _LONE_SURROGATE.search(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return False


def budget_param(body: dict[str, Any], key: str, cap: int) -> int | None:
    try:
        value = check_budget(key, body.get(key))
    except QuestionError as exc:
        raise InvalidRequest.from_error(exc) from None
    if value is None:
        return None
    if value > cap:
        raise InvalidRequest("%s exceeds server limit (%d > %d)" % (key, value, cap), location=(key,))
    return value


def language_param(body: dict[str, Any], key: str) -> str | None:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidRequest('%s must be a language code string such as "de", or null' % key, location=(key,))
    return value


def min_confidence_param(body: dict[str, Any]) -> Threshold | None:
    if body.get("min_confidence") is None:
        return None
    try:
        return check_min_confidence(body["min_confidence"])
    except QuestionError as exc:
        raise InvalidRequest.from_error(exc) from None


def batch_size_param(body: dict[str, Any]) -> int | None:
    try:
        value = check_batch_size(body.get("batch_size"))
    except QuestionError as exc:
        raise InvalidRequest.from_error(exc) from None
    if value is None:
        return None
    if value < 1:  # upstream's server refuses what its library reads as one pass
        raise InvalidRequest("batch_size must be a positive integer, got %r" % (value,), location=("batch_size",))
    return value


def sort_by_length_param(body: dict[str, Any]) -> bool | None:
    value = body.get("sort_by_length")
    if value is None:
        return None
    if not isinstance(value, bool):
        raise InvalidRequest("sort_by_length must be a boolean", location=("sort_by_length",))
    return value


def planned_batch_size(n_states: int, n_questions: int, max_len: Any, max_batch_tokens: int) -> int | None:
    """States per pass that keep one pass under the token budget; None when everything fits in one."""
    if n_states <= 0 or n_questions <= 0:
        return None
    width = max_len if isinstance(max_len, int) and not isinstance(max_len, bool) and max_len > 0 \
        else ASSUMED_ROW_TOKENS
    if n_states * n_questions * width <= max_batch_tokens:
        return None
    return max(1, min(n_states, max(1, max_batch_tokens // width) // n_questions))


def effective_batch_size(caller: int | None, planned: int | None) -> int | None:
    """A caller's batch_size is capped by the planned chunk whenever the request exceeds the budget."""
    if planned is None:
        return caller
    return planned if caller is None else min(caller, planned)
