"""Strict Jev mode's validation bodies: `loc` and `type` are the refusal's own `location` and `kind`, set where it
is raised; the message text (upstream's, byte for byte) is never read for them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from laya_serverless.core.questions import check_question
from laya_serverless.errors import InvalidRequest, QuestionError, RequestError
from laya_serverless.http.body import parse_json
from laya_serverless.jobs.spec import check_states
from laya_serverless.protocol import limits
from laya_serverless.protocol.decisions import batch_controls, systemone_controls
from laya_serverless.protocol.refusals import refusal_from
from laya_serverless.protocol.routing import Registry, resolve_model_field, route
from laya_serverless.protocol.strict import error_body, prepared
from laya_serverless.settings import JobSettings, Limits, ProtocolSettings

PROTOCOL, LIMITS, JOBS = ProtocolSettings(), Limits(), JobSettings()
NOUL = {"q1": {"type": "noul", "instructions": "x"}}


def _refusal(call: Callable[[], Any]) -> RequestError:
    """What `call` is refused as, the way the app turns a caller's `ValueError` into a refusal."""
    try:
        call()
    except (RequestError, ValueError) as exc:
        return refusal_from(exc, "test")
    raise AssertionError("not refused")


def _body(body: dict[str, Any]) -> Callable[[], Any]:
    return lambda: systemone_controls(body, Registry(), PROTOCOL, LIMITS)


SITES: list[tuple[str, Callable[[], Any], list[Any], str]] = [
    ("invalid JSON", lambda: parse_json(b"{"), ["body"], "json_invalid"),
    ("no questions field", _body({"state": "x"}), ["body"], "missing"),
    ("no state", _body({"questions": NOUL}), ["body", "state"], "missing"),
    ("no states field", lambda: batch_controls({"questions": NOUL}, Registry(), PROTOCOL, LIMITS), ["body"], "missing"),
    ("empty questions", lambda: prepared({"state": "x", "questions": {}}), ["body", "questions"], "too_short"),
    ("unknown question type", lambda: check_question("q1", {"type": "boolean", "instructions": "x"}),
     ["body", "questions", "q1"], "value_error"),
    ("choice without criteria", lambda: check_question("q1", {"type": "choice", "instructions": "x", "criteria": {}}),
     ["body", "questions", "q1"], "too_short"),
    ("score without levels", lambda: check_question("q1", {"type": "score", "instructions": "x", "criteria": []}),
     ["body", "questions", "q1"], "too_short"),
    ("bad noul labels", lambda: check_question("q1", {"type": "noul", "instructions": "x", "labels": {"true": "y"}}),
     ["body", "questions", "q1"], "value_error"),
    ("a null score level", _body({"state": "x", "questions": {"q1": {"type": "score", "criteria": ["a", None]}}}),
     ["body", "questions", "q1"], "value_error"),
    ("a question id that is not printable", lambda: check_question("q\n1", {"type": "boolean"}),
     ["body", "questions"], "value_error"),
    ("an empty question id", lambda: check_question(" ", {}), ["body", "questions"], "value_error"),
    ("max_len not an integer", _body({"state": "x", "questions": NOUL, "max_len": "5"}), ["body", "max_len"],
     "value_error"),
    ("max_len over the cap", _body({"state": "x", "questions": NOUL, "max_len": 10**6}), ["body", "max_len"],
     "value_error"),
    ("head_max_len not positive", _body({"state": "x", "questions": NOUL, "head_max_len": 0}),
     ["body", "head_max_len"], "value_error"),
    ("lang_guess not a string", _body({"state": "x", "questions": NOUL, "lang_guess": 5}), ["body", "lang_guess"],
     "value_error"),
    ("min_confidence map key", _body({"state": "x", "questions": NOUL, "min_confidence": {"x": 1}}),
     ["body", "min_confidence"], "value_error"),
    ("batch_size zero", lambda: limits.batch_size_param({"batch_size": 0}), ["body", "batch_size"], "value_error"),
    ("a model that names a source", lambda: resolve_model_field("org/repo", Registry()), ["body", "model"],
     "value_error"),
    ("an unknown task", lambda: route(Registry(), "x", NOUL, lambda _s: {}, task="nope"), ["body", "task"],
     "value_error"),
    ("hooks sent", _body({"state": "x", "questions": NOUL, "on_predict_end": "f"}), ["body", "on_predict_end"],
     "value_error"),
    # The old reading of the text missed these: the message starts with a field it did not list, or with a label.
    ("hooks_raise sent", _body({"state": "x", "questions": NOUL, "hooks_raise": True}), ["body", "hooks_raise"],
     "value_error"),
    ("a job's null state", lambda: check_states(["a", None], iter([("states[0]", ("states", 0)),
                                                                  ("states[1]", ("states", 1))]), JOBS),
     ["body", "states", 1], "missing"),
]


@pytest.mark.parametrize(("site", "call", "loc", "kind"), SITES, ids=[s[0] for s in SITES])
def test_each_refusal_points_where_it_was_raised(site: str, call: Callable[[], Any], loc: list[Any],
                                                 kind: str) -> None:
    refusal = _refusal(call)
    [item] = error_body(refusal)["detail"]
    assert (item["loc"], item["type"], item["msg"]) == (loc, kind, refusal.detail)


def test_the_message_text_is_never_read() -> None:
    # Worded like a missing state, but nothing says so: the whole body, a value error.
    [plain] = error_body(InvalidRequest("'state' is required"))["detail"]
    assert (plain["loc"], plain["type"]) == (["body"], "value_error")
    # Worded without its field, yet it points there.
    [placed] = error_body(InvalidRequest("must be at most 8192", location=("max_len",), kind="too_short"))["detail"]
    assert (placed["loc"], placed["type"], placed["msg"]) == (["body", "max_len"], "too_short", "must be at most 8192")


def test_a_callers_value_error_keeps_its_location_and_kind_as_a_refusal() -> None:
    refusal = refusal_from(QuestionError("no", location=("questions", "q1"), kind="too_short"), "m")
    assert isinstance(refusal, InvalidRequest)
    assert (refusal.detail, refusal.location, refusal.kind) == ("no", ("questions", "q1"), "too_short")
    foreign = refusal_from(ValueError("question 'q1': not ours"), "m")
    assert (foreign.detail, foreign.location, foreign.kind) == ("question 'q1': not ours", (), "value_error")


def test_a_relabelled_job_refusal_keeps_its_text() -> None:
    refusal = _refusal(lambda: check_states([None], iter([("input line 7", ("input",))]), JOBS))
    assert (refusal.detail, refusal.location, refusal.kind) == ("input line 7: 'state' is required", ("input",),
                                                                "missing")
