"""Each rule that the library API and the HTTP layer both check is one function; these tests tie each pair.

Where upstream's server words the refusal differently from its library (null score levels, a
non-positive batch_size), both texts are checked to name the same finding."""

from __future__ import annotations

from typing import Any

import pytest

from laya_serverless import Decider, QuestionError
from laya_serverless.core.abstention import check_min_confidence
from laya_serverless.core.controls import check_batch_size, check_budget
from laya_serverless.core.questions import check_question
from laya_serverless.errors import InvalidRequest, RequestError
from laya_serverless.protocol import limits
from tests.unit.fakes import FixedSession, config, word_encoder

VALUES: list[Any] = [None, 0, -3, 64, 9000, "5", 2.0, True, [1], {"a": 1}]  # valid budgets fit the fake head


def _library(call: Any) -> str | None:
    try:
        call()
    except QuestionError as exc:
        return str(exc)
    return None


def _http(call: Any) -> str | None:
    try:
        call()
    except RequestError as exc:
        assert isinstance(exc, InvalidRequest)
        return exc.detail
    return None


@pytest.mark.parametrize("value", VALUES)
@pytest.mark.parametrize("name", ["max_len", "head_max_len"])
def test_budgets_are_refused_alike_by_the_decider_and_the_http_layer(name: str, value: Any) -> None:
    from laya_serverless import Decider

    decider = Decider(FixedSession([1.0, 0.0]), word_encoder(), config())
    library = _library(lambda: decider.predict("x", {"q": {"type": "noul", "instructions": "x"}}, **{name: value}))
    http = _http(lambda: limits.budget_param({name: value}, name, cap=10_000))
    assert library == http == _library(lambda: check_budget(name, value))


@pytest.mark.parametrize("value", VALUES)
def test_batch_size_types_are_refused_alike_and_only_http_refuses_non_positive(value: Any) -> None:
    library = _library(lambda: check_batch_size(value))
    http = _http(lambda: limits.batch_size_param({"batch_size": value}))
    if library is not None:
        assert http == library
    elif isinstance(value, int) and not isinstance(value, bool) and value < 1:
        assert http == "batch_size must be a positive integer, got %r" % (value,)
    else:
        assert http is None


@pytest.mark.parametrize("value", [0, 0.5, 1, 1.5, -0.1, "0.5", None, True, 10 ** 309, float("nan"),
                                   {"choice:2": 0.2}, {"nope": 0.1}, {}, {"default": 10 ** 309}])
def test_thresholds_are_one_rule_and_huge_integers_are_refused_not_crashing(value: Any) -> None:
    library = _library(lambda: check_min_confidence(value))
    http = _http(lambda: limits.min_confidence_param({"min_confidence": value}))
    assert http == (None if value is None else library)


@pytest.mark.parametrize("criteria", [["a", None], [None], ["a", "b", None, None], ["a", "b"]])
def test_null_score_levels_name_the_same_index_in_both_texts(criteria: list[Any]) -> None:
    library = _library(lambda: check_question("s", {"type": "score", "instructions": "x", "criteria": criteria}))
    http = _http(lambda: limits.check_request_limits("x", {"s": {"type": "score", "criteria": criteria}}))
    if None not in criteria:
        assert library is None and http is None
        return
    index = criteria.index(None)
    assert library == ("question 's': score level %d is null; give every level a description, index 0 first"
                       % index)
    assert http == "score question 's' has a null level at index %d; give every level a description" % index


@pytest.mark.parametrize("name", ["max_len", "head_max_len"])
def test_a_budget_past_the_encoder_s_positions_is_one_refusal_for_library_and_http(name: str) -> None:
    """513 on a 512-position encoder used to reach onnxruntime and come back as a 500; both layers now refuse it
    with the one rule's text, naming the limit, before any session run."""
    from fastapi.testclient import TestClient

    from laya_serverless.core.controls import check_position_limit
    from laya_serverless.http.app import create_app
    from laya_serverless.protocol.routing import Registry
    from laya_serverless.settings import Settings

    session = FixedSession([1.0, 0.0])
    decider = Decider(session, word_encoder(), config(max_positions=512))
    library = _library(lambda: decider.predict("x", {"q": {"type": "noul", "instructions": "x"}}, **{name: 513}))
    assert library == _library(lambda: check_position_limit(name, 513, 512)) == (
        "%s exceeds the model's position limit (513 > 512): its encoder embeds at most 512 tokens a row" % name)
    assert _library(lambda: decider.predict("x", {"q": {"type": "noul", "instructions": "x"}}, **{name: 512})) is None
    app = TestClient(create_app({"english": decider}, Settings.of(), registry=Registry()))
    question = {"q": {"type": "noul", "instructions": "x"}}
    runs = len(session.calls)
    for path, body in (("/v1/systemone", {"state": "x"}), ("/v1/systemone/batch", {"states": ["x", "y"]})):
        refused = app.post(path, json={**body, "questions": question, "lang": "en", name: 513})
        assert (refused.status_code, refused.json()["detail"]) == (422, library), refused.text
    assert len(session.calls) == runs
