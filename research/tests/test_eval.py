"""Grading and calibration of the demo evaluation."""

from __future__ import annotations

import pytest

from laya_training.eval import Graded, expected_calibration_error, grade, summary


def test_choice_and_noul_are_top1_and_noul_thresholds_at_one_half():
    choice = {"type": "choice"}
    assert grade(choice, {"choice": "billing", "answer_confidence": 0.7}, "billing", "d").correct
    assert not grade(choice, {"choice": "tech", "answer_confidence": 0.7}, "billing", "d").correct
    noul = {"type": "noul"}
    assert grade(noul, {"noul": 0.5, "answer_confidence": 0.5}, True, "d").correct
    assert grade(noul, {"noul": 0.49, "answer_confidence": 0.51}, False, "d").correct
    assert not grade(noul, {"noul": 0.9, "answer_confidence": 0.9}, False, "d").correct


def test_score_counts_within_one_level_of_the_emitted_score_and_top1_separately():
    score = {"type": "score"}
    answer = {"score": 2.2, "probabilities": {"0": 0.1, "1": 0.1, "2": 0.5, "3": 0.3}, "answer_confidence": 0.5}
    graded = grade(score, answer, 3, "d")
    assert graded.correct and not graded.top1
    assert not grade(score, answer, 0, "d").correct
    assert grade(score, answer, 2, "d").top1


def test_ece_is_zero_when_confidence_matches_accuracy_and_large_when_overconfident():
    calibrated = [Graded("d", "choice", i < 8, i < 8, 0.8) for i in range(10)]
    assert expected_calibration_error(calibrated) == pytest.approx(0.0)
    overconfident = [Graded("d", "choice", i < 5, i < 5, 0.95) for i in range(10)]
    assert expected_calibration_error(overconfident) == pytest.approx(0.45)


def test_summary_reports_every_type_and_the_total():
    rows = [Graded("a", "choice", True, True, 0.9), Graded("b", "noul", False, False, 0.6)]
    report = summary(rows)
    assert report["choice"]["accuracy"] == 1.0 and report["noul"]["accuracy"] == 0.0
    assert report["all"]["n"] == 2 and report["all"]["accuracy"] == 0.5
    assert "score" not in report
