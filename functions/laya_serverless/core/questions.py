"""Question definitions: validation (with the protocol's exact messages) and rendering to option texts.

A `Question` is what the rest of the runtime works with: its type, instruction text, option
texts in option-index order, the answer keys, and an optional slot order.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..errors import Kind, Location, QuestionError
from .controls import null_score_level

QTYPES = {"choice": 0, "score": 1, "noul": 2}
NOUL_DEFAULT_TEXT = {"false": "no, the statement does not hold", "true": "yes, the statement holds"}
_NOUL_LABELS_MESSAGE = "noul labels must map exactly 'false' and 'true' to distinct non-empty strings"
_INSTRUCTIONS_HINT = "add the text the model should answer"


@dataclass(frozen=True)
class Question:
    qid: str
    qtype: str
    instructions: str
    option_texts: tuple[str, ...]
    # choice: the labels with their original JSON types; score: the levels; noul: (false, true)
    keys: tuple[Any, ...]
    option_order: tuple[int, ...] | None = None

    @property
    def type_index(self) -> int:
        return QTYPES[self.qtype]

    @property
    def n_options(self) -> int:
        return len(self.option_texts)


def question_location(qid: Any) -> Location:
    """Where question `qid` sits in a request body; the question set itself when the id is not printable text."""
    return ("questions", qid) if isinstance(qid, str) and qid.isprintable() else ("questions",)


def _refused(qid: Any, why: str, kind: Kind = "value_error") -> QuestionError:
    """The refusal of one question, worded "question 'qid': why"."""
    return QuestionError("question %r: %s" % (qid, why), location=question_location(qid), kind=kind)


def render_value(value: Any) -> str:
    """A criterion or level as the model reads it: strings as is, anything else as one-line JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)


def _instructions_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def noul_labels(labels: Any) -> tuple[str, str]:
    """The (false, true) option labels of a noul question; defaults when `labels` is None."""
    if labels is None:
        return "false", "true"
    if not isinstance(labels, dict) or set(labels) != {"false", "true"}:
        raise QuestionError(_NOUL_LABELS_MESSAGE)
    false_label, true_label = labels["false"], labels["true"]
    if not isinstance(false_label, str) or not isinstance(true_label, str):
        raise QuestionError(_NOUL_LABELS_MESSAGE)
    false_label, true_label = false_label.strip(), true_label.strip()
    if not false_label or not true_label or false_label == true_label:
        raise QuestionError(_NOUL_LABELS_MESSAGE)
    return false_label, true_label


def _option_count(definition: dict[str, Any]) -> int:
    if definition.get("type") == "noul":
        return 2
    criteria = definition.get("criteria")
    return len(criteria) if isinstance(criteria, dict | list | tuple) else 0


def _check_choice_labels(qid: Any, criteria: dict[Any, Any] | list[Any]) -> None:
    labels = criteria if isinstance(criteria, list) else list(criteria.keys())
    for i, label in enumerate(labels):
        if label is not None and not isinstance(label, str | int | float | bool):
            raise _refused(qid, "choice label %d is a %s; a label is rendered as option text "
                           "and used as the answer key, so it must be a scalar (a string, number or "
                           "bool), got %r" % (i, type(label).__name__, label))
        if label is None:
            raise _refused(qid, "choice label %d is null; a label is rendered as option text "
                           "and used as the answer key, so it must be a string, number or bool -- a "
                           "null label renders as the text \"None\" while its answer key is \"null\"" % i)
    if isinstance(criteria, list):
        # Python equality decides what collides: 1, 1.0 and True are one answer key.
        first_index: dict[Any, int] = {}
        for i, label in enumerate(criteria):
            if label in first_index:
                raise _refused(qid, "choice label %d (%r) repeats label %d; the labels are the "
                               "answer keys, so every option needs its own (1, 1.0 and True are one "
                               "key)" % (i, label, first_index[label]))
            first_index[label] = i


def check_question(qid: Any, definition: Any) -> None:
    """Refuse a question that cannot be answered, naming it and what to fix."""
    if qid is None:
        raise QuestionError("question id must not be None", location=("questions",))
    if not isinstance(qid, str | int) or (isinstance(qid, str) and not qid.strip()):
        raise QuestionError("question id must be a non-empty string, got %r" % (qid,), location=("questions",))
    if not isinstance(definition, dict):
        raise _refused(qid, "definition must be a dict, got %s" % type(definition).__name__)
    qtype = definition.get("type")
    if not isinstance(qtype, str) or qtype not in QTYPES:
        raise _refused(qid, "unknown type %r; use one of %s" % (qtype, sorted(QTYPES)))
    if "instructions" not in definition:
        raise _refused(qid, "no 'instructions'; %s" % _INSTRUCTIONS_HINT)
    instructions = definition["instructions"]
    if instructions is None:
        raise _refused(qid, "'instructions' must not be None; %s" % _INSTRUCTIONS_HINT)
    if (isinstance(instructions, str) and not instructions.strip()) or (
            isinstance(instructions, list | dict) and not instructions):
        raise _refused(qid, "'instructions' must not be empty; %s" % _INSTRUCTIONS_HINT)
    if not isinstance(instructions, str | dict | list | int | float):
        raise _refused(qid, "'instructions' must be a string, dict, or list, got %s" % type(instructions).__name__)
    criteria = definition.get("criteria")
    if qtype == "choice":
        if not isinstance(criteria, dict | list):
            raise _refused(qid, "a choice question takes 'criteria' as a dict of label -> description, "
                                "or a list of labels")
        if not criteria:
            raise _refused(qid, "a choice question needs at least one criterion", "too_short")
        _check_choice_labels(qid, criteria)
    elif qtype == "score":
        if not isinstance(criteria, list):
            raise _refused(qid, "a score question takes 'criteria' as a list of level descriptions, index 0 first")
        if not criteria:
            raise _refused(qid, "a score question needs at least one level", "too_short")
        level = null_score_level(criteria)
        if level is not None:
            raise _refused(qid, "score level %d is null; give every level a description, index 0 first" % level)
    elif criteria is not None and not isinstance(criteria, dict):
        raise _refused(qid, "a noul question takes 'criteria' as a dict with optional "
                            "'true'/'false' descriptions, or omits it")
    elif isinstance(criteria, dict):
        keys = {str(k).lower() for k in criteria}
        if not keys <= {"true", "false"}:
            raise _refused(
                qid, "a noul question takes 'criteria' keyed only 'true'/'false' (either "
                "or both, and omitted is fine), got %s. Those keys are the option texts the model "
                "reads; any other key was silently dropped and replaced with the defaults. If you "
                "want the answer worded differently, keep 'criteria' keyed 'true'/'false' and set "
                "'labels' instead." % sorted(keys))
    if "option_order" in definition:
        order = definition["option_order"]
        n = _option_count(definition)
        if (not isinstance(order, list | tuple) or len(order) != n
                or sorted(int(i) for i in order if isinstance(i, int) and not isinstance(i, bool))
                != list(range(n))):
            raise _refused(qid, "'option_order' must be a permutation of range(%d) -- one slot per "
                                "option, each option once -- got %r" % (n, order))
    if "labels" in definition:
        if qtype != "noul":
            raise _refused(qid, "'labels' is only supported for noul questions")
        try:
            noul_labels(definition["labels"])
        except QuestionError as exc:
            raise _refused(qid, str(exc)) from exc


def _render(qtype: str, criteria: Any, labels: Any) -> tuple[tuple[str, ...], tuple[Any, ...]]:
    if qtype == "choice":
        pairs = [(c, None) for c in criteria] if isinstance(criteria, list) else list(criteria.items())
        texts = tuple(str(k) if v is None or v == "" else "%s: %s" % (k, render_value(v)) for k, v in pairs)
        return texts, tuple(k for k, _ in pairs)
    if qtype == "score":
        return tuple("level %d: %s" % (i, render_value(c)) for i, c in enumerate(criteria)), tuple(criteria)
    described = {str(k).lower(): v for k, v in (criteria or {}).items()}
    false_label, true_label = noul_labels(labels)
    texts = tuple(
        "%s: %s" % (label, render_value(described[side]) if described.get(side) not in (None, "")
                    else NOUL_DEFAULT_TEXT[side])
        for side, label in (("false", false_label), ("true", true_label)))
    return texts, ("false", "true")


def parse_question(qid: Any, definition: Any) -> Question:
    """Validate one question definition and render it."""
    check_question(qid, definition)
    qtype = definition["type"]
    texts, keys = _render(qtype, definition.get("criteria"), definition.get("labels"))
    order = definition.get("option_order")
    return Question(
        qid=qid,
        qtype=qtype,
        instructions=_instructions_text(definition["instructions"]),
        option_texts=texts,
        keys=keys,
        option_order=tuple(int(i) for i in order) if order is not None else None,
    )


def parse_questions(questions: Any) -> list[Question]:
    """Validate every question, in order (all checks of one before the next), then render them."""
    if not isinstance(questions, dict):
        raise QuestionError("questions must be a dict of question id -> definition, got %s"
                            % type(questions).__name__)
    for qid, definition in questions.items():
        check_question(qid, definition)
    return [parse_question(qid, definition) for qid, definition in questions.items()]
