"""Question validation: every refusal names the question and what to fix, with upstream's exact text."""

from __future__ import annotations

from typing import Any

import pytest

from laya_serverless import QuestionError
from laya_serverless.core.questions import parse_question, parse_questions

BAD = [
    ("", {"type": "noul", "instructions": "x"}, "question id must be a non-empty string, got ''"),
    ("q", 5, "question 'q': definition must be a dict, got int"),
    ("q", None, "question 'q': definition must be a dict, got NoneType"),
    ("q", {"type": "pick", "instructions": "x"},
     "question 'q': unknown type 'pick'; use one of ['choice', 'noul', 'score']"),
    ("q", {"type": "noul"}, "question 'q': no 'instructions'; add the text the model should answer"),
    ("q", {"type": "noul", "instructions": None},
     "question 'q': 'instructions' must not be None; add the text the model should answer"),
    ("q", {"type": "noul", "instructions": "  "},
     "question 'q': 'instructions' must not be empty; add the text the model should answer"),
    ("q", {"type": "noul", "instructions": {}},
     "question 'q': 'instructions' must not be empty; add the text the model should answer"),
    ("q", {"type": "choice", "instructions": "x", "criteria": "a"},
     "question 'q': a choice question takes 'criteria' as a dict of label -> description, or a list of labels"),
    ("q", {"type": "choice", "instructions": "x", "criteria": []},
     "question 'q': a choice question needs at least one criterion"),
    ("q", {"type": "choice", "instructions": "x", "criteria": ["a", ["b"]]},
     "question 'q': choice label 1 is a list; a label is rendered as option text and used as the answer key, "
     "so it must be a scalar (a string, number or bool), got ['b']"),
    ("q", {"type": "choice", "instructions": "x", "criteria": [None]},
     "question 'q': choice label 0 is null; a label is rendered as option text and used as the answer key, so it "
     "must be a string, number or bool -- a null label renders as the text \"None\" while its answer key is \"null\""),
    ("q", {"type": "choice", "instructions": "x", "criteria": [1, "a", True]},
     "question 'q': choice label 2 (True) repeats label 0; the labels are the answer keys, so every option needs "
     "its own (1, 1.0 and True are one key)"),
    ("q", {"type": "score", "instructions": "x", "criteria": {"a": 1}},
     "question 'q': a score question takes 'criteria' as a list of level descriptions, index 0 first"),
    ("q", {"type": "score", "instructions": "x", "criteria": []},
     "question 'q': a score question needs at least one level"),
    ("q", {"type": "score", "instructions": "x", "criteria": ["a", None]},
     "question 'q': score level 1 is null; give every level a description, index 0 first"),
    ("q", {"type": "noul", "instructions": "x", "criteria": ["a"]},
     "question 'q': a noul question takes 'criteria' as a dict with optional 'true'/'false' descriptions, or omits it"),
    ("q", {"type": "noul", "instructions": "x", "criteria": {"Yes": "a", "TRUE": "b"}},
     "question 'q': a noul question takes 'criteria' keyed only 'true'/'false' (either or both, and omitted is fine), "
     "got ['true', 'yes']. Those keys are the option texts the model reads; any other key was silently dropped and "
     "replaced with the defaults. If you want the answer worded differently, keep 'criteria' keyed 'true'/'false' "
     "and set 'labels' instead."),
    ("q", {"type": "choice", "instructions": "x", "criteria": ["a", "b"], "option_order": [0, 0]},
     "question 'q': 'option_order' must be a permutation of range(2) -- one slot per option, each option once -- "
     "got [0, 0]"),
    ("q", {"type": "noul", "instructions": "x", "option_order": [True, 0]},
     "question 'q': 'option_order' must be a permutation of range(2) -- one slot per option, each option once -- "
     "got [True, 0]"),
    ("q", {"type": "choice", "instructions": "x", "criteria": ["a"], "labels": {"false": "n", "true": "y"}},
     "question 'q': 'labels' is only supported for noul questions"),
    ("q", {"type": "noul", "instructions": "x", "labels": {"false": "same", "true": " same "}},
     "question 'q': noul labels must map exactly 'false' and 'true' to distinct non-empty strings"),
]


@pytest.mark.parametrize(("qid", "definition", "message"), BAD)
def test_bad_questions_are_refused_with_an_actionable_message(qid: str, definition: Any, message: str) -> None:
    with pytest.raises(QuestionError) as error:
        parse_question(qid, definition)
    assert str(error.value) == message
    assert isinstance(error.value, ValueError)  # the protocol maps ValueError to 422


def test_all_questions_are_checked_before_any_is_rendered() -> None:
    questions = {"ok": {"type": "noul", "instructions": "x"}, "bad": {"type": "?", "instructions": "x"}}
    with pytest.raises(QuestionError, match="question 'bad': unknown type"):
        parse_questions(questions)


def test_rendering_follows_the_protocol() -> None:
    choice = parse_question("c", {"type": "choice", "instructions": {"task": "é"},
                                  "criteria": {"billing": {"a": [1, 2]}, "tech": None, "other": "", "zero": 0}})
    assert choice.instructions == '{"task": "é"}'
    assert choice.option_texts == ("billing: {\"a\": [1, 2]}", "tech", "other", "zero: 0")
    listed = parse_question("l", {"type": "choice", "instructions": "x", "criteria": [1, 2.5, False, "x"]})
    assert listed.option_texts == ("1", "2.5", "False", "x") and listed.keys == (1, 2.5, False, "x")
    score = parse_question("s", {"type": "score", "instructions": "x", "criteria": [1, True, "é"]})
    assert score.option_texts == ("level 0: 1", "level 1: true", "level 2: é")
    noul = parse_question("n", {"type": "noul", "instructions": "x", "criteria": {"TRUE": "yes it is", "false": ""},
                                "labels": {"false": " nope ", "true": "yep"}})
    assert noul.option_texts == ("nope: no, the statement does not hold", "yep: yes it is")
