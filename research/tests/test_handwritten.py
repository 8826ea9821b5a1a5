"""Hand-written cases as training rows (stage 14) and the training script's checks on them."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

from laya_training.examples import Example
from laya_training.handwritten import hand_written_examples

ROOT = Path(__file__).resolve().parents[2]

ROUTE = Example("The invoice is wrong.", {"t": "choice", "ins": "Route it.",
                                          "crit": {"billing": "money", "tech": "bugs", "sales": None, "other": None}},
                [1.0, 0.0, 0.0, 0.0], "support")
PRIORITY = Example("Site down.", {"t": "score", "ins": "Priority?", "crit": ["low", "normal", "high", "urgent"]},
                   [0.0, 0.0, 0.0, 1.0], "urgency")
ASKS = Example("Is it open?", {"t": "noul", "ins": "A question?", "crit": None}, [0.0, 1.0], "facts")


def test_each_repeat_reshuffles_the_options_and_the_target_follows_its_label():
    rows = hand_written_examples([ROUTE, PRIORITY, ASKS], repeats=6, seed=3)
    assert len(rows) == 18
    routes = [r for r in rows if r.question["t"] == "choice"]
    orders = {tuple(r.question["crit"]) for r in routes}
    assert len(orders) > 1
    for r in routes:
        assert dict(zip(r.question["crit"], r.target, strict=True))["billing"] == 1.0
        assert r.question["crit"] == ROUTE.question["crit"]   # the same labels and descriptions
    assert rows == hand_written_examples([ROUTE, PRIORITY, ASKS], repeats=6, seed=3)   # seeded


def test_a_score_keeps_its_level_and_spreads_a_little_to_the_neighbours_and_noul_is_unchanged():
    [score, noul] = [r for r in hand_written_examples([PRIORITY, ASKS], repeats=1, seed=0)]
    assert max(range(4), key=lambda i: score.target[i]) == 3
    assert score.target[3] > 0.6 and 0 < score.target[2] < score.target[3] and abs(sum(score.target) - 1) < 1e-9
    assert noul == ASKS


def test_no_repeats_is_refused():
    with pytest.raises(ValueError, match="at least 1"):
        hand_written_examples([ROUTE], repeats=0, seed=0)


@pytest.mark.parametrize("args, message", [
    (["--hand-written", "research/cases/no_such_set.jsonl"], "not a file relative to the repository root"),
    (["--hand-written", "research/cases/train-1.jsonl", "--check-cases", "research/cases/train-1.jsonl"],
     "must not be trained on"),
    (["--hand-written", "research/cases/train-1.jsonl", "--check-cases", "./research/../research/cases/train-1.jsonl"],
     "must not be trained on"),
    (["--hand-written", "research/cases/train-1.jsonl", "--hand-written-repeats", "0"], "must be at least 1"),
    (["--wide-label-questions", "10", "--wide-label-source", "hand-written"], "give at least one"),
])
def test_the_script_refuses_missing_sets_and_checking_on_what_it_trains_on(args, message, capsys):
    script = runpy.run_path(str(ROOT / "research" / "scripts" / "train_demo.py"))
    with pytest.raises(SystemExit) as exit_:
        script["main"](args + ["--out", "/nonexistent/never-written"])
    assert exit_.value.code == 2 and message in capsys.readouterr().err


def test_case_labels_lists_every_choice_label_once_with_its_first_description():
    from laya_training.handwritten import case_labels

    team = {"type": "choice", "instructions": "Team?", "criteria": {"billing": "money", "tech": None}}
    again = {"type": "choice", "instructions": "Team?", "criteria": {"tech": "bugs", "sales": "deals"}}
    cases = [{"questions": {"t": team, "n": {"type": "noul", "instructions": "Late?"}}},
             {"questions": {"t": again, "s": {"type": "score", "instructions": "How bad?", "criteria": ["a", "b"]}}}]
    assert case_labels(cases) == [("billing", "money"), ("tech", None), ("sales", "deals")]
