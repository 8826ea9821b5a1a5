"""Pre-inference request checks and Jev shaping, differentially against upstream laya-serve's functions.

Every row of the table is run through ours and through upstream's (`laya.serve`, the oracle):
same status and same `detail`, or both accept.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from laya_serverless import RequestError
from laya_serverless.core.controls import DEFAULT_MAX_BATCH_TOKENS
from laya_serverless.http.statuses import status_of
from laya_serverless.protocol import limits as ours
from laya_serverless.protocol.jev import jev_confidence, strict_projection, with_jev_confidence

serve = pytest.importorskip("laya.serve")


def _outcome(call: Any) -> tuple[int, str] | str:
    from fastapi import HTTPException

    try:
        return "ok:%r" % (call(),)
    except RequestError as exc:
        return status_of(exc), exc.detail
    except HTTPException as exc:
        return exc.status_code, exc.detail


Q = {"type": "noul", "instructions": "x"}
LIMIT_CASES: list[tuple[Any, Any]] = [
    (None, {}), ("s", []), ("s", {"q%d" % i: Q for i in range(65)}), ("s", {"q%d" % i: Q for i in range(64)}),
    ("s", {"c": {"type": "choice", "criteria": list(range(101))}}),
    ("s", {"c": {"type": "choice", "criteria": {str(i): None for i in range(100)}}}),
    ("s", {"s": {"type": "score", "criteria": ["a"] * 33}}), ("s", {"s": {"type": "score", "criteria": ["a", None]}}),
    ("s", {"c%d" % i: {"type": "choice", "criteria": list(range(90))} for i in range(6)}),
    ("x" * 50_001, {}), ("x" * 50_000, {}), ({"a": "x" * 50_001}, {}), ({"a": '"' * 25_000}, {}),
    ({"a": "\u200b" * 40_000}, {}), ([["y" * 30_000], {"z": "w" * 30_000}], {}), (12, {"c": "not a dict"}),
    ({"a": [1] * 100, "b": "x" * 49_990}, {}), ("s", {"c": {"type": "choice", "criteria": "abc"}}),
]


@pytest.mark.parametrize(("state", "questions"), LIMIT_CASES)
def test_request_limits_match_upstream(state: Any, questions: Any) -> None:
    assert _outcome(lambda: ours.check_request_limits(state, questions)) == \
        _outcome(lambda: serve._check_request_limits(state, questions))


@pytest.mark.parametrize("states", [None, [], "abc", ["a"] * 65, ["a", None], ["a", "x" * 50_001], ["a"] * 64])
def test_batch_limits_match_upstream(states: Any) -> None:
    assert _outcome(lambda: ours.check_batch_limits(states, {})) == \
        _outcome(lambda: serve._check_batch_limits(states, {}))


BODIES = [
    {}, {"hooks": None}, {"hooks": [1], "on_predict_end": "x"}, {"hooks_timeout": 0, "hooks_raise": False},
    {"max_len": 5}, {"max_len": "5"}, {"max_len": 5.0}, {"max_len": True}, {"max_len": 0}, {"max_len": 9000},
    {"max_len": None, "head_max_len": -3}, {"lang": "de"}, {"lang": True}, {"lang_guess": 5}, {"lang": None},
    {"min_confidence": 0.5}, {"min_confidence": 2}, {"min_confidence": {}}, {"min_confidence": {"noul:9": 1}},
    {"min_confidence": {"default": 0.2, "choice:3-5": 0.9}}, {"min_confidence": "0.5"},
    {"batch_size": 3}, {"batch_size": 0}, {"batch_size": 2.0}, {"batch_size": False}, {"batch_size": None},
    {"sort_by_length": True}, {"sort_by_length": "yes"}, {"sort_by_length": 1}, {"diagnostics": {}},
    {"diagnostics": None},
]


@pytest.mark.parametrize("body", BODIES)
def test_body_controls_match_upstream(body: dict[str, Any]) -> None:
    pairs = [
        (lambda: ours.refuse_hooks(body), lambda: serve._refuse_body_refusals(body)),
        (lambda: ours.refuse_out_parameters(body), lambda: serve._refuse_out_parameters(body)),
        (lambda: ours.budget_param(body, "max_len", 8192), lambda: serve._validate_budget_param(body, "max_len", 8192)),
        (lambda: ours.budget_param(body, "head_max_len", 8192),
         lambda: serve._validate_budget_param(body, "head_max_len", 8192)),
        (lambda: ours.language_param(body, "lang"), lambda: serve._validate_language_param(body, "lang")),
        (lambda: ours.language_param(body, "lang_guess"), lambda: serve._validate_language_param(body, "lang_guess")),
        (lambda: ours.min_confidence_param(body), lambda: serve._validate_min_confidence(body)),
        (lambda: ours.batch_size_param(body), lambda: serve._validate_batch_size_param(body)),
        (lambda: ours.sort_by_length_param(body), lambda: serve._validate_sort_by_length_param(body)),
    ]
    for mine, theirs in pairs:
        assert _outcome(mine) == _outcome(theirs)


@pytest.mark.parametrize("value", ["ok", "\ud800", {"k\udfff": 1}, [[["deep", "\udc00"]]], "\ud83d\ude00", 5, None])
def test_lone_surrogates_are_found_anywhere(value: Any) -> None:
    assert ours.has_lone_surrogate(value) == serve._has_lone_surrogate(value)


def test_deep_nesting_does_not_recurse() -> None:
    deep: Any = "\udc00"
    for _ in range(100_000):
        deep = [deep]
    assert ours.has_lone_surrogate(deep)


@pytest.mark.parametrize(("states", "questions", "max_len", "caller", "expected"), [
    (64, 3, 1024, None, 42), (64, 3, 1024, 100, 42), (64, 4, None, None, None), (64, 4, None, 7, 7),
    (64, 32, None, None, 8), (1, 64, 8192, None, 1), (0, 3, None, None, None), (5, 0, None, 2, 2),
])
def test_batch_planning_follows_the_token_budget(monkeypatch: pytest.MonkeyPatch, states: int, questions: int,
                                                 max_len: int | None, caller: int | None,
                                                 expected: int | None) -> None:
    monkeypatch.delenv("LAYA_MAX_BATCH_TOKENS", raising=False)
    planned = ours.planned_batch_size(states, questions, max_len, DEFAULT_MAX_BATCH_TOKENS)
    assert planned == serve._batch_chunk_size(states, questions, max_len)
    assert ours.effective_batch_size(caller, planned) == expected


def _random_answer(rng: random.Random) -> dict[str, Any]:
    kind = rng.choice(["choice", "score", "noul", "other"])
    n = rng.randint(1, 7)
    weights = [rng.choice([0.0, rng.random()]) for _ in range(n)]
    total = sum(weights) or 1.0
    probabilities = {("k%d" % i if kind == "choice" else str(i)): round(w / total, 4) for i, w in enumerate(weights)}
    answer: dict[str, Any] = {"type": kind, "choice": "k0", "score": 1.5, "noul": 0.3, "confidence": 0.5,
                              "answer_confidence": 0.6, "action": {"act_probability": 0.2}, "legend": {"0": "a"}}
    if kind != "noul":
        answer["probabilities"] = probabilities
    if rng.random() < 0.1:
        answer["probabilities"] = {"0": -0.1, "1": 1.1} if rng.random() < 0.5 else {"0": True, "1": "0.5"}
    return answer


def test_jev_confidence_and_strict_projection_match_upstream() -> None:
    from laya.confidence import jev_confidence as upstream_jev

    rng = random.Random(7)
    for _ in range(500):
        answer = _random_answer(rng)
        assert jev_confidence(answer) == upstream_jev(answer)
        result = {"model": "laya-rl-agent", "answers": {"a": answer, "b": _random_answer(rng)},
                  "usage": {"input_tokens": 9, "state_tokens": 3}, "routing": {}}
        if answer["type"] != "other":
            mine, theirs = strict_projection(result), serve._project_jev_strict(result)
            assert mine == theirs and list(mine["answers"]["a"]) == list(theirs["answers"]["a"])
        assert with_jev_confidence(result) == serve._add_jev_confidence(result)
