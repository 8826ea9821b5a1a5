"""Which checkpoint answers a request, and why.

Precedence: explicit `model` > explicit `task` > typed-decisions workflow (opt-in) > `lang` >
`lang_guess` > detection on the state > the default. Detection is injected (`detect(state)`
returns its analysis), so the decision and its `reason` text are one tested function.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..errors import InvalidRequest, QuestionError

BUNDLE_REPO = "convaiinnovations/laya"
BUILTIN_SOURCES = {
    "english": BUNDLE_REPO,
    "multilingual": BUNDLE_REPO + "/multilingual",
    "typed-decisions": BUNDLE_REPO + "/typed-decisions",
}
ALIASES = {
    "en": "english", "laya": "english", "default": "english",
    "multi": "multilingual", "ml": "multilingual", "laya-multilingual": "multilingual",
    "typed": "typed-decisions", "typed_decisions": "typed-decisions",
    "laya-typed-decisions": "typed-decisions", "decisions": "typed-decisions",
}
# Standalone Hub ids a client may send to pin a checkpoint; the bundle id itself means "auto".
PUBLISHED_IDS = {"convaiinnovations/laya-multilingual": "multilingual",
                 "convaiinnovations/laya-typed-decisions": "typed-decisions"}
WORKFLOWS = {
    "agent_trace_observability": frozenset({"action", "needs_review", "outcome", "risk", "urgency"}),
    "customer_service": frozenset({"action", "category", "churn_risk", "needs_human", "urgency"}),
    "invoice_processing": frozenset({"discrepancy_severity", "disposition", "duplicate", "matches_order", "urgency"}),
    "security_incidents": frozenset({"credential_compromise", "disposition", "severity", "true_positive", "urgency"}),
}
_ENGLISH = ("en", "eng", "english")
_NO_LANGUAGE = ("c", "posix", "und", "zxx", "mul")

Detector = Callable[[Any], Mapping[str, Any]]


def canonical_name(name: Any) -> str:
    key = str(name).strip().lower()
    return ALIASES.get(key, key)


class Registry:
    """The checkpoint names a deployment knows (built-ins plus extras), each with its source string."""

    def __init__(self, sources: Mapping[str, str] | None = None, default: str = "multilingual") -> None:
        self.sources = dict(BUILTIN_SOURCES, **(sources or {}))
        self.default = self.resolve(default)

    def resolve(self, name: Any, field: str = "model") -> str:
        """The canonical name of `name`, which the request's `field` sent, or a refusal pointing at that field."""
        key = canonical_name(name)
        if key in self.sources:
            return key
        raise QuestionError("unknown model %r; choose one of %s (or an alias: %s)"
                            % (name, sorted(self.sources), sorted(ALIASES)), location=(field,))


def _names_a_source(text: str) -> bool:
    """A path or a repo id (not a checkpoint name): a leading `.`/`~`, or a slash of either kind."""
    return bool(text) and (text[0] in ".~" or "/" in text or "\\" in text)


def resolve_model_field(model: Any, registry: Registry) -> str | None:
    """The body's `model`: a canonical checkpoint name to pin, None to auto-route, or a 422."""
    if not model:
        return None
    text = str(model).strip()
    if text.lower() in PUBLISHED_IDS:
        return PUBLISHED_IDS[text.lower()]
    if text.lower() == BUNDLE_REPO:
        return None
    try:
        return registry.resolve(model)
    except QuestionError as exc:
        if _names_a_source(text):
            raise InvalidRequest("%s, or omit model to let the router choose" % exc, location=("model",)) from None
        return None  # a Jev id such as "jev-1", or anything else that names nothing: auto


def english_from_code(value: Any) -> bool | None:
    """True/False for a language code (`en`, `en_US.UTF-8`, `pt-BR`), None when it names no language."""
    if value is None:
        return None
    code = str(value).strip().lower()
    if not code:
        return None
    primary = code.split(".", 1)[0].replace("_", "-").split("-", 1)[0]
    if not primary or primary in _NO_LANGUAGE:
        return None
    return primary in _ENGLISH


def match_workflow(question_ids: Any) -> str | None:
    ids = set(question_ids or ())
    return next((name for name, signature in WORKFLOWS.items() if ids == signature), None)


def _decision(registry: Registry, key: str, reason: str, detection: Any, workflow: str | None) -> dict[str, Any]:
    return {"model": key, "repo": registry.sources[key], "reason": reason, "detection": detection,
            "workflow": workflow}


def _detected(registry: Registry, found: Mapping[str, Any]) -> tuple[str, str]:
    if found["script"] == "unknown":
        return registry.default, "no letters detected in state; using default (%s)" % registry.default
    if found["script"] != "latin":
        return "multilingual", ("non-Latin script (%s, %.0f%% of letters); the English checkpoint cannot read it"
                                % (found["script"], 100 * float(found["non_latin_fraction"])))
    if not found["is_english"]:
        if found.get("mixed_segment"):
            return "multilingual", ("Latin script, mostly English, but a line or field reads as %r (%r); the "
                                    "English checkpoint cannot read it" % (found["language"],
                                                                           found["mixed_segment"][:60]))
        if found["language"]:
            return "multilingual", "Latin script but language looks like %r, not English" % found["language"]
        return "multilingual", ("Latin script, language not identified but %.0f%% non-English letters; not safe "
                                "for the English checkpoint" % (100 * float(found["diacritic_rate"])))
    if found["language_undecided"]:
        return registry.default, ("Latin script, language not identified and no non-English letters; "
                                  "using default (%s)" % registry.default)
    return "english", "English Latin text"


def route(registry: Registry, state: Any, questions: Any, detect: Detector, *, model: str | None = None,
          task: Any = None, lang: str | None = None, lang_guess: str | None = None,
          auto_task: bool = False) -> dict[str, Any]:
    """The `routing` block: model, repo, reason, detection (None unless the state was read), workflow."""
    if model is not None:
        key = registry.resolve(model)
        return _decision(registry, key, "explicit model=%r" % model, None, None)
    if task is not None:
        wanted = "typed-decisions" if str(task).lower().replace("-", "_") == "typed_decisions" else task
        return _decision(registry, registry.resolve(wanted, "task"), "explicit task=%r" % task, None, None)
    workflow = match_workflow(questions)
    if workflow and auto_task:
        return _decision(registry, "typed-decisions", "question ids match the %r typed-decisions workflow" % workflow,
                         None, workflow)
    english = english_from_code(lang)
    if english is not None:
        return _decision(registry, "english" if english else "multilingual", "explicit lang=%r" % lang, None, workflow)
    english = english_from_code(lang_guess)
    if english is not None:
        said = "English" if english else "non-English"
        return _decision(registry, "english" if english else "multilingual",
                         "lang_guess: the caller identified this as %s text" % said, None, workflow)
    found = dict(detect(state))
    key, reason = _detected(registry, found)
    return _decision(registry, key, reason, found, workflow)
