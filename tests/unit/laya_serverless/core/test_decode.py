"""Decoding from fixed logits: temperatures, rounding that sums to 1, score, noul, slot order."""

from __future__ import annotations

import math

import numpy as np
import pytest

from laya_serverless import Decider
from laya_serverless.artifact.layout import DecodeConfig, clamp_temperature
from laya_serverless.core.decode import (
    build_answer,
    entropy_confidence,
    option_probabilities,
    rounded_distribution,
    temperature_bucket,
    temperature_for,
)
from laya_serverless.core.questions import parse_question
from tests.unit.fakes import SPECIAL, FixedSession, config, word_encoder


@pytest.mark.parametrize(("type_index", "k", "bucket"), [
    (0, 1, "choice:2"), (0, 2, "choice:2"), (0, 3, "choice:3-5"), (0, 5, "choice:3-5"), (1, 6, "score:6-10"),
    (1, 10, "score:6-10"), (0, 11, "choice:11+"), (2, 2, "noul:2"),
])
def test_temperature_buckets(type_index: int, k: int, bucket: str) -> None:
    assert temperature_bucket(type_index, k) == bucket


@pytest.mark.parametrize(("raw", "applied"), [
    (0.1, 0.5), (9.0, 5.0), (2.0, 2.0), (True, 1.0), ("2", 1.0), (float("nan"), 1.0), (float("inf"), 1.0), (3, 3.0),
])
def test_temperatures_are_clamped_and_non_numbers_neutral(raw: object, applied: float) -> None:
    assert clamp_temperature(raw) == applied


def test_bucket_temperature_wins_over_type_temperature() -> None:
    cfg = DecodeConfig.from_dict({"special_tokens": SPECIAL.__dict__, "temperature": [2.0, 3.0, 4.0],
                                  "temperature_by_options": {"choice:3-5": 0.1}})
    assert temperature_for(cfg, 0, 4) == 0.5  # bucket value, clamped
    assert temperature_for(cfg, 0, 2) == 2.0  # no bucket: the type's temperature
    assert temperature_for(cfg, 2, 2) == 4.0


def test_probabilities_follow_temperature_and_slot_order() -> None:
    logits = np.array([2.0, 0.0, 1.0], dtype=np.float32)
    p = option_probabilities(logits, 2.0, None)
    expected = np.exp(logits / 2) / np.exp(logits / 2).sum()
    assert np.allclose(p, expected, atol=1e-7) and p.dtype == np.float32
    # slot s shows option order[s]: the slot-0 logit belongs to option 2
    reordered = option_probabilities(logits, 2.0, (2, 0, 1))
    assert reordered[2] == p[0] and reordered[0] == p[1] and reordered[1] == p[2]


@pytest.mark.parametrize("p", [
    [1 / 3, 1 / 3, 1 / 3], [0.33335, 0.33335, 0.3333], [0.5, 0.5], [0.99996, 0.00004], [1.0],
    list(np.random.default_rng(0).dirichlet(np.ones(37))),
])
def test_rounded_distribution_always_sums_to_one(p: list[float]) -> None:
    units = rounded_distribution(np.asarray(p, dtype=np.float32))
    assert sum(units) == 10_000
    assert all(abs(u / 10_000 - v) <= 1e-4 + 1e-7 for u, v in zip(units, p, strict=True))


def test_choice_is_the_argmax_of_the_emitted_values_and_they_sum_to_one() -> None:
    question = parse_question("team", {"type": "choice", "instructions": "x", "criteria": ["a", "b", "c"]})
    answer = build_answer(question, np.array([1 / 3, 1 / 3, 1 / 3], dtype=np.float32), 0.25)
    assert list(answer) == ["type", "choice", "probabilities", "confidence", "answer_confidence", "action"]
    assert sum(answer["probabilities"].values()) == pytest.approx(1.0, abs=1e-12)
    emitted = answer["probabilities"]
    assert emitted[answer["choice"]] == max(emitted.values())
    assert answer["confidence"] == 0.0 and answer["answer_confidence"] == 0.3333
    assert answer["action"] == {"act_probability": 0.25}


def test_choice_keeps_label_types_and_score_builds_legend_and_expectation() -> None:
    choice = parse_question("n", {"type": "choice", "instructions": "x", "criteria": [1, 2.5, False, "x"]})
    answer = build_answer(choice, np.array([0.1, 0.2, 0.6, 0.1], dtype=np.float32), 0.5)
    assert answer["choice"] is False and list(answer["probabilities"]) == [1, 2.5, False, "x"]
    score = parse_question("s", {"type": "score", "instructions": "x", "criteria": ["low", 3, {"a": [1, 2]}]})
    p = np.array([0.2, 0.3, 0.5], dtype=np.float32)
    answer = build_answer(score, p, 0.5)
    assert list(answer) == ["type", "score", "legend", "probabilities", "confidence", "answer_confidence", "action"]
    assert answer["score"] == round(float((np.arange(3) * p).sum()), 4)
    assert answer["legend"] == {"0": "low", "1": "3", "2": '{"a": [1, 2]}'}
    assert answer["confidence"] == round(1 - float(-(p * np.log(p)).sum()) / math.log(3), 4)


def test_noul_reads_the_true_option() -> None:
    noul = parse_question("spam", {"type": "noul", "instructions": "x"})
    answer = build_answer(noul, np.array([0.3, 0.7], dtype=np.float32), 0.5)
    assert answer == {"type": "noul", "noul": 0.7, "confidence": 0.7, "answer_confidence": 0.7,
                      "action": {"act_probability": 0.5}}


def test_entropy_confidence_edges() -> None:
    assert entropy_confidence(np.array([1.0], dtype=np.float32)) == 1.0
    assert entropy_confidence(np.array([0.5, 0.5], dtype=np.float32)) == pytest.approx(0.0, abs=1e-6)
    assert entropy_confidence(np.array([1.0, 0.0], dtype=np.float32)) == pytest.approx(1.0, abs=1e-6)


def test_decider_decodes_every_question_of_a_pass_and_reports_usage() -> None:
    session = FixedSession([3.0, 1.0, 0.0], act_logits=[2.0, 0.0, 0.0])
    decider = Decider(session, word_encoder(), config(temperature=(1.0, 1.0, 1.0)))
    questions = {
        "team": {"type": "choice", "instructions": "which team ?", "criteria": ["billing", "tech", "other"]},
        "spam": {"type": "noul", "instructions": "a b"},
    }
    result = decider.predict("i was charged twice", questions)
    assert result["model"] == "laya-rl-agent" and list(result["answers"]) == ["team", "spam"]
    team, spam = result["answers"]["team"], result["answers"]["spam"]
    assert team["choice"] == "billing"
    assert spam["noul"] == round(float(np.exp(1.0) / (np.exp(3.0) + np.exp(1.0))), 4)
    act = float(np.exp(2.0) / (np.exp(2.0) + 2))
    assert team["action"]["act_probability"] == round(act, 4)
    feeds = session.calls[0]
    assert feeds["input_ids"].shape[0] == 2 and list(feeds["qtype"]) == [0, 2]
    assert feeds["marker_mask"].sum(axis=1).tolist() == [3, 2]
    usage = result["usage"]
    assert usage["input_tokens"] == int(feeds["attention_mask"].sum())
    assert usage["state_tokens"] == 4 and usage["truncated"] is False and "options" not in usage


def test_one_option_questions_still_get_two_columns() -> None:
    session = FixedSession([5.0])
    decider = Decider(session, word_encoder(), config())
    result = decider.predict("a", {"only": {"type": "choice", "instructions": "b", "criteria": ["c"]}})
    assert session.calls[0]["marker_mask"].shape == (1, 2)
    assert result["answers"]["only"]["probabilities"] == {"c": 1.0}
    assert result["answers"]["only"]["confidence"] == 1.0


def test_empty_questions_answer_nothing_without_running_the_model() -> None:
    session = FixedSession([0.0])
    result = Decider(session, word_encoder(), config()).predict("a", {})
    assert result == {"model": "laya-rl-agent", "answers": {}, "usage": {"input_tokens": 0, "output_tokens": 0}}
    assert session.calls == []
