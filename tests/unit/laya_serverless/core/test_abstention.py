"""The abstention gate: accepted thresholds, refused ones (with the protocol's messages), the report."""

from __future__ import annotations

from typing import Any

import pytest

from laya_serverless import QuestionError
from laya_serverless.core.abstention import apply_abstention, check_min_confidence


@pytest.mark.parametrize(("value", "message"), [
    (1.5, "min_confidence must be a float in [0.0, 1.0], got 1.5"),
    (-0.1, "min_confidence must be a float in [0.0, 1.0], got -0.1"),
    (True, "min_confidence must be a float in [0.0, 1.0], got True"),
    ("0.5", "min_confidence must be a float in [0.0, 1.0], got '0.5'"),
    (float("nan"), "min_confidence must be a float in [0.0, 1.0], got nan"),
    ({}, "a min_confidence map must be a non-empty dict of bucket -> float, got {}"),
    ({"choice:4": 0.5}, "min_confidence map keys must be a bucket like 'choice:3-5' or 'default', got 'choice:4'"),
    ({"default": 2}, "min_confidence must be a float in [0.0, 1.0], got 2"),
])
def test_bad_thresholds_are_refused(value: Any, message: str) -> None:
    with pytest.raises(QuestionError) as error:
        check_min_confidence(value)
    assert str(error.value) == message


def _results() -> list[dict[str, Any]]:
    return [{"answers": {
        "team": {"type": "choice", "probabilities": {"a": 0.3357, "b": 0.3, "c": 0.3643}, "answer_confidence": 0.3357},
        "urgent": {"type": "noul", "noul": 0.5083, "answer_confidence": 0.5083},
        "level": {"type": "score", "probabilities": {"0": 0.5, "1": 0.5}, "answer_confidence": 0.5},
    }}]


def test_no_threshold_writes_nothing() -> None:
    results = _results()
    apply_abstention(results, None)
    assert results == _results()


def test_scalar_threshold_reports_every_answer() -> None:
    results = _results()
    apply_abstention(results, check_min_confidence(0.5))
    team, urgent, level = results[0]["answers"].values()
    assert team["low_confidence"] is True and team["abstention"] == "abstained"
    assert list(team)[-3:] == ["low_confidence", "abstention", "abstention_threshold"]
    assert urgent["abstention"] == "passed" and "low_confidence" not in urgent
    assert level["abstention"] == "passed"  # equality passes
    assert all(a["abstention_threshold"] == 0.5 for a in (team, urgent, level))


def test_zero_is_a_real_threshold_and_ints_become_floats() -> None:
    results = _results()
    apply_abstention(results, check_min_confidence(0))
    for answer in results[0]["answers"].values():
        assert answer["abstention"] == "passed"
        assert answer["abstention_threshold"] == 0.0 and isinstance(answer["abstention_threshold"], float)


def test_bucket_map_falls_back_to_default_then_zero() -> None:
    results = _results()
    apply_abstention(results, check_min_confidence({"choice:3-5": 0.9, "default": 0.1}))
    team, urgent, level = results[0]["answers"].values()
    assert team["abstention_threshold"] == 0.9 and team["abstention"] == "abstained"
    assert urgent["abstention_threshold"] == 0.1 and level["abstention_threshold"] == 0.1
    results = _results()
    apply_abstention(results, check_min_confidence({"noul:2": 0.6}))
    team, urgent, _ = results[0]["answers"].values()
    assert team["abstention_threshold"] == 0.0 and urgent["abstention"] == "abstained"


def test_an_answer_without_a_usable_number_is_unevaluated() -> None:
    results = [{"answers": {"x": {"type": "noul", "answer_confidence": float("nan")}}}]
    apply_abstention(results, 0.5)
    assert results[0]["answers"]["x"]["abstention"] == "unevaluated"
    assert "low_confidence" not in results[0]["answers"]["x"]
