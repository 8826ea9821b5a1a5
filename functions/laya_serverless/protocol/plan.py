"""How much work states are, before any tokenizer runs: the splitter's shard sizes and the sync budget check.

Work is counted in row tokens (one row per state and question, as the decider builds them), estimated
from characters: the question side from its instructions and options, the state from its serialized
length, each row capped at `max_len` (or the `/batch` planner's assumed width). A shard holds as many
states as one worker processes in `jobs_time_budget` seconds at `jobs_token_rate` row tokens a second,
in whole passes of the `LAYA_MAX_BATCH_TOKENS` plan, never more than `MAX_SHARD_STATES`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ..errors import TooLarge
from ..settings import JobSettings, Limits
from . import limits

CHARS_PER_TOKEN = 4  # English subword tokenizers average about four characters a token
ROW_OVERHEAD_TOKENS = 4  # [CLS], the type word and "question:", [SEP]s
MAX_SHARD_STATES = 500  # bounds a shard's document and result file, and the work one failure costs
MAX_SHARDS = 100_000


def _tokens(chars: int) -> int:
    return math.ceil(chars / CHARS_PER_TOKEN)


def head_tokens(questions: dict[str, Any], head_max_len: int | None) -> list[int]:
    """Estimated question-side tokens per question: instructions, one marker and the text of each option."""
    sizes = []
    for question in questions.values():
        if not isinstance(question, dict):
            sizes.append(ROW_OVERHEAD_TOKENS)
            continue
        criteria = question.get("criteria")
        options = list(criteria.items()) if isinstance(criteria, dict) else list(criteria or [])
        text = sum(len(str(option)) for option in options)
        tokens = ROW_OVERHEAD_TOKENS + _tokens(len(str(question.get("instructions") or ""))) + _tokens(text)
        tokens += len(options) if options else 3  # a noul question has three fixed options
        sizes.append(min(tokens, head_max_len) if head_max_len else tokens)
    return sizes


def row_width(max_len: int | None) -> int:
    return max_len if max_len else limits.ASSUMED_ROW_TOKENS


def state_tokens(state: Any, heads: Sequence[int], width: int) -> int:
    """Estimated row tokens of one state across every question."""
    body = _tokens(limits.state_length(state)) + 1
    return sum(min(width, head + body) for head in heads)


def estimated_tokens(states: Sequence[Any], questions: dict[str, Any], max_len: int | None,
                     head_max_len: int | None) -> list[int]:
    heads, width = head_tokens(questions, head_max_len), row_width(max_len)
    return [state_tokens(state, heads, width) for state in states]


def shard_bounds(tokens: Sequence[int], n_questions: int, max_len: int | None, jobs: JobSettings,
                 request_limits: Limits) -> list[int]:
    """Start offsets of each shard plus the end, e.g. [0, 120, 240, 250]: deterministic for the same input."""
    budget = jobs.jobs_time_budget * jobs.jobs_token_rate
    pass_states = limits.planned_batch_size(len(tokens), n_questions, max_len, request_limits.max_batch_tokens)
    bounds, start, used = [0], 0, 0
    for i, cost in enumerate(tokens):
        count = i - start
        if count and (used + cost > budget or count >= MAX_SHARD_STATES):
            if pass_states and count > pass_states:  # whole passes; a pass never straddles two shards
                count -= count % pass_states
            start += count
            bounds.append(start)
            used = sum(tokens[start:i])
        used += cost
    if bounds[-1] != len(tokens):
        bounds.append(len(tokens))
    if len(bounds) - 1 > MAX_SHARDS:
        raise TooLarge("this job would need %d shards (> %d); send fewer or shorter states"
                       % (len(bounds) - 1, MAX_SHARDS))
    return bounds


def check_sync_budget(states: Sequence[Any], questions: dict[str, Any], max_len: int | None,
                      head_max_len: int | None, request_limits: Limits) -> None:
    """Refuse a `/batch` whose estimated inference cannot finish in this deployment's time budget (off by default)."""
    if not request_limits.batch_time_budget:
        return
    seconds = sum(estimated_tokens(states, questions, max_len, head_max_len)) / request_limits.batch_token_rate
    if seconds > request_limits.batch_time_budget:
        raise TooLarge("this batch needs an estimated %.1f s of inference, over this deployment's %.0f s budget "
                       "for one request; send the same body to POST /v1/jobs and read GET /v1/jobs/{id}/results"
                       % (seconds, request_limits.batch_time_budget))
