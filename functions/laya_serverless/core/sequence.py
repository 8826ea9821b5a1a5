"""Token rows, one per (state, question), laid out exactly as upstream Laya builds them.

    [CLS] <type> question: <instructions> [SEP] [MASK] opt_0 ... [MASK] opt_n-1 [SEP] <state> [SEP]

The state is serialized and tokenized once per request and sliced per question; the question
side (head and options) comes from the encoder's cache.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..artifact.layout import SpecialTokens
from ..errors import QuestionError, StateError
from .questions import Question, question_location
from .tokenize import TextEncoder

OPTION_TOKEN_CAP = 48
MIN_INSTRUCTION_TOKENS = 8
MIN_OPTION_TOKENS = 4
COLLAPSE_BELOW = 16


@dataclass(frozen=True)
class StateTokens:
    ids: tuple[int, ...]
    keep_end: bool  # a JSON array is a conversation: its newest turn is last, so keep the end


@dataclass(frozen=True)
class Row:
    ids: list[int]
    markers: list[int]
    options_distinct: int
    tokens_per_option: int | None
    state_tokens: int
    state_tokens_used: int

    @property
    def state_truncated(self) -> bool:
        return self.state_tokens_used < self.state_tokens


def serialize_state(state: Any) -> str:
    """A string as is; any other JSON value as Python's `json.dumps` renders it (default separators)."""
    if state is None:
        raise StateError("state must not be None; pass a string, dict, or list")
    if isinstance(state, str):
        return state
    try:
        return json.dumps(state, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise StateError("'state' must be JSON-serializable", location=("state",)) from exc


def encode_state(encoder: TextEncoder, special: SpecialTokens, state: Any) -> StateTokens:
    text = serialize_state(state).replace(special.mask_text, " ")
    return StateTokens(ids=tuple(encoder.encode(text)), keep_end=isinstance(state, list))


def _head(encoder: TextEncoder, special: SpecialTokens, question: Question,
          head_max_len: int) -> tuple[list[int], list[int], int, int | None]:
    mask = special.mask_text
    head_text = "%s question: %s" % (question.qtype, question.instructions.replace(mask, " "))
    head_ids = encoder.encode_cached(head_text)
    order = question.option_order if question.option_order is not None else range(question.n_options)
    slots = [
        [special.mask_id] + list(encoder.encode_cached(" " + question.option_texts[i].replace(mask, " "))
                                 [:OPTION_TOKEN_CAP])
        for i in order
    ]
    budget = head_max_len - sum(len(s) for s in slots)
    per_option = None
    if budget < COLLAPSE_BELOW:
        per_option = max(MIN_OPTION_TOKENS, (head_max_len - COLLAPSE_BELOW) // max(1, len(slots)))
        slots = [s[:per_option] for s in slots]
        budget = head_max_len - sum(len(s) for s in slots)
    ids = [special.cls_id, *head_ids[: max(MIN_INSTRUCTION_TOKENS, budget)], special.sep_id]
    markers = []
    for slot in slots:
        markers.append(len(ids))
        ids.extend(slot)
    ids.append(special.sep_id)
    return ids, markers, len({tuple(s) for s in slots}), per_option


def build_row(encoder: TextEncoder, special: SpecialTokens, question: Question, state: StateTokens,
              max_len: int, head_max_len: int) -> Row:
    """One question's row; a question whose option markers do not fit in `max_len` is refused."""
    ids, markers, distinct, per_option = _head(encoder, special, question, head_max_len)
    room = max(0, max_len - len(ids) - 1)
    n_state = len(state.ids)
    piece = state.ids[max(0, n_state - room):] if state.keep_end else state.ids[:room]
    ids = (ids + list(piece) + [special.sep_id])[:max_len]
    kept = [m for m in markers if m < max_len]
    if len(kept) != len(markers):
        raise QuestionError(
            "question %r: only %d of its %d option markers fit in max_len=%d with "
            "head_max_len=%d spent on the question; lower head_max_len, raise max_len, "
            "or use fewer options" % (question.qid, len(kept), len(markers), max_len, head_max_len),
            location=question_location(question.qid))
    return Row(ids=ids, markers=markers, options_distinct=distinct, tokens_per_option=per_option,
               state_tokens=n_state, state_tokens_used=len(piece))
