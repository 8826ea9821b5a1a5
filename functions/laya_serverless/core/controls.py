"""Rules for per-request values that both the library API (`Decider`) and the HTTP layer check.

One function per rule, so the two layers can never disagree on what is accepted. Where upstream's
server words a refusal differently from its library, the HTTP layer phrases the same finding in
its own text (`protocol/limits.py`); the tests tie each pair. The defaults of the budgets these rules
govern live here too, below `settings`, which defaults to them.
"""

from __future__ import annotations

from typing import Any

from ..errors import QuestionError

MAX_CHOICE_OPTIONS = 100  # options of one choice question (upstream's cap; the tournament mode lifts it)
DEFAULT_MAX_TOKEN_BUDGET = 8192  # the largest max_len / head_max_len a request may ask for
DEFAULT_MAX_BATCH_TOKENS = 131_072  # tokens in one session run: batches split into passes under it


def check_budget(name: str, value: Any) -> int | None:
    """A token budget (`max_len`, `head_max_len`): None (use the checkpoint's) or a positive integer."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise QuestionError("%s must be an integer" % name, location=(name,))
    if value <= 0:
        raise QuestionError("%s must be a positive integer" % name, location=(name,))
    return value


def check_position_limit(name: str, value: int | None, positions: int | None) -> None:
    """A budget past the encoder's positions would fail inside onnxruntime: a caller's 422, never a 500."""
    if value is not None and positions is not None and value > positions:
        raise QuestionError("%s exceeds the model's position limit (%d > %d): its encoder embeds at most %d "
                            "tokens a row" % (name, value, positions, positions), location=(name,))


def check_batch_size(value: Any) -> int | None:
    """States per pass: None or an integer. The library reads zero or less as "all in one pass", as upstream's does."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise QuestionError("batch_size must be an integer", location=("batch_size",))
    return value


def null_score_level(criteria: Any) -> int | None:
    """The index of the first null level of a score question's level list, or None when every level is described."""
    if isinstance(criteria, list) and None in criteria:
        return criteria.index(None)
    return None
