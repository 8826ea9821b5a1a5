"""Routing decisions and `model` field resolution, differentially against upstream's Router and serve.

Detection (§7.4) is injected; ours (`laya_serverless.protocol.detect.analyse`) is used here while upstream's
Router runs its own, so the whole decision is compared: precedence, names, aliases, `reason` texts.
"""

from __future__ import annotations

from typing import Any

import pytest

from laya_serverless import QuestionError, RequestError
from laya_serverless.http.statuses import status_of
from laya_serverless.protocol.detect import analyse
from laya_serverless.protocol.routing import Registry, english_from_code, match_workflow, resolve_model_field, route

serve = pytest.importorskip("laya.serve")
router_module = pytest.importorskip("laya.router")

STATES = [
    "I was charged twice for my order, please refund me.", "", "12345 !!!", "Bonjour, je voudrais annuler ma commande.",
    "Ich möchte mein Passwort zurücksetzen, bitte.", "привет, как дела? мне нужна помощь", "你好，我需要帮助",
    {"ticket": "My parcel is late", "lines": ["hello", "Hola, necesito ayuda con mi pedido por favor"]},
    ["hi", {"role": "user", "content": "Olá, não consigo acessar minha conta"}], "ok thanks", "café naïve résumé",
    "PLEASE HELP ME NOW", "Kan inte logga in", {"a": 1, "b": [True, None]},
    "Hello\nDas ist ein Test mit vielen Wörtern",
]
QUESTION_SETS = [{"x": {}}, {k: {} for k in ("action", "category", "churn_risk", "needs_human", "urgency")}]
CONTROLS: list[dict[str, Any]] = [
    {}, {"model": "multilingual"}, {"model": "english"}, {"task": "Typed-Decisions"}, {"task": "en"},
    {"lang": "pt-BR"}, {"lang": "en_US.UTF-8"}, {"lang": "C.UTF-8"}, {"lang": "  "}, {"lang_guess": "de"},
    {"lang_guess": "EN"}, {"lang": "und", "lang_guess": "fr"}, {"auto_task": True},
]


def _theirs(default: str, state: Any, questions: Any, controls: dict[str, Any]) -> Any:
    upstream = router_module.Router(default=default, auto_task_detection=controls.get("auto_task", False))
    kwargs = {k: v for k, v in controls.items() if k != "auto_task"}
    try:
        return dict(upstream._route(state, questions, **kwargs))
    except ValueError as exc:
        return str(exc)


def _ours(default: str, state: Any, questions: Any, controls: dict[str, Any]) -> Any:
    try:
        return route(Registry(default=default), state, questions, analyse, **controls)
    except QuestionError as exc:
        return str(exc)


@pytest.mark.parametrize("default", ["multilingual", "english"])
def test_routing_decisions_match_upstream(default: str) -> None:
    compared = 0
    for state in STATES:
        for questions in QUESTION_SETS:
            for controls in CONTROLS:
                assert _ours(default, state, questions, controls) == _theirs(default, state, questions, controls), (
                    state, controls)
                compared += 1
    assert compared == len(STATES) * len(QUESTION_SETS) * len(CONTROLS)


@pytest.mark.parametrize("task", ["nope", "TYPED_DECISIONS", "typed-decisions", "ML", 5])
def test_unknown_tasks_are_refused_like_upstream(task: Any) -> None:
    assert _ours("multilingual", "x", {}, {"task": task}) == _theirs("multilingual", "x", {}, {"task": task})


@pytest.mark.parametrize("model", [
    None, "", 0, False, {}, [], "english", " ML ", "laya", "default", "convaiinnovations/laya",
    "convaiinnovations/laya-multilingual", "CONVAIINNOVATIONS/LAYA-TYPED-DECISIONS", "jev-1", "gpt-4", "auto", 5,
    True, "./ckpt", "~/ckpt", "org/repo", "a\\b", ["a/b"], "typed_decisions", ".hidden",
])
def test_model_field_resolution_matches_upstream(model: Any) -> None:
    from fastapi import HTTPException

    try:
        theirs: Any = serve._resolve_model(model)
    except HTTPException as exc:
        theirs = (exc.status_code, exc.detail)
    try:
        ours: Any = resolve_model_field(model, Registry())
    except RequestError as exc:
        ours = (status_of(exc), exc.detail)
    assert ours == theirs


@pytest.mark.parametrize("code", [None, "", "  ", "en", "EN", "en-US", "en_US.UTF-8", "eng", "English", "pt-BR",
                                  "C", "C.UTF-8", "posix", "und", "zxx", "mul", "de_DE", 5, True, "-en"])
def test_language_codes_match_upstream(code: Any) -> None:
    assert english_from_code(code) == router_module._english_from_code(code)


def test_workflows_need_the_exact_id_set() -> None:
    ids = {"action", "category", "churn_risk", "needs_human", "urgency"}
    assert match_workflow(ids) == "customer_service"
    assert match_workflow(ids | {"extra"}) is None and match_workflow(None) is None


def test_extra_checkpoints_resolve_and_unknown_defaults_are_refused() -> None:
    registry = Registry({"papers": "/models/papers"}, default="papers")
    assert route(registry, "", {}, lambda _s: {"script": "unknown"})["model"] == "papers"
    assert registry.resolve(" PAPERS ") == "papers"
    with pytest.raises(QuestionError, match="unknown model 'nope'; choose one of"):
        Registry(default="nope")
