"""The two decision routes' work, apart from HTTP: check a body, then answer it.

`*_controls` run the protocol's checks in its order after the body was decoded; `answer_*` run on
the inference worker: routing, the decider, tournament narrowing, the `routing` block.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import MalformedRequest
from ..settings import Limits, ProtocolSettings
from . import limits
from .deployment import Controls, Deployment
from .jev import strict_projection, with_jev_confidence
from .routing import Detector, Registry, resolve_model_field
from .strict import narrowing_group
from .tournament import plan, predict_with_tournament

_SURROGATE_DETAIL = "request body contains an unpaired surrogate escape; those cannot be encoded as UTF-8"


@dataclass(frozen=True)
class BatchControls:
    controls: Controls
    batch_size: int | None
    sort_by_length: bool

    def to_spec(self) -> dict[str, Any]:
        """A job's controls, typed once at submission and serialized into its spec."""
        return {**self.controls.to_spec(), "batch_size": self.batch_size, "sort_by_length": self.sort_by_length}

    @classmethod
    def from_spec(cls, data: dict[str, Any]) -> BatchControls:
        """A job's controls as each shard reads them back: typed, without resolving them again."""
        return cls(Controls.from_spec(data), data.get("batch_size"), bool(data.get("sort_by_length")))


def choice_cap(protocol: ProtocolSettings) -> int:
    narrowing = protocol.tournament_group or protocol.jev_strict
    return limits.MAX_TOURNAMENT_CHOICE_OPTIONS if narrowing else limits.MAX_CHOICE_OPTIONS


def tournament_group(deployment: Deployment, protocol: ProtocolSettings, controls: Controls) -> int:
    """The elimination group size (0: never narrow); strict mode narrows past the head window or 100."""
    if not protocol.jev_strict:
        return protocol.tournament_group
    widths = [controls.max_len] if controls.max_len else [d.config.max_len for d in deployment.deciders.values()]
    return narrowing_group(widths, protocol.tournament_group)


def _controls(body: dict[str, Any], registry: Registry, request_limits: Limits) -> Controls:
    """The controls' checks (model, budgets, language hints, min_confidence), shared by both routes
    (after their shape, limit and hook checks)."""
    if limits.has_lone_surrogate(body):
        raise MalformedRequest(_SURROGATE_DETAIL)
    return Controls(
        model=resolve_model_field(body.get("model"), registry),
        max_len=limits.budget_param(body, "max_len", request_limits.max_token_budget),
        head_max_len=limits.budget_param(body, "head_max_len", request_limits.max_token_budget),
        task=body.get("task"),
        lang=limits.language_param(body, "lang"),
        lang_guess=limits.language_param(body, "lang_guess"),
        min_confidence=limits.min_confidence_param(body),
    )


def systemone_controls(body: Any, registry: Registry, protocol: ProtocolSettings, request_limits: Limits) -> Controls:
    if not isinstance(body, dict) or "questions" not in body:
        raise MalformedRequest("request body must be an object with a 'questions' field", kind="missing")
    limits.check_request_limits(body.get("state"), body["questions"], choice_cap(protocol))
    limits.refuse_hooks(body)
    return _controls(body, registry, request_limits)


def batch_controls(body: Any, registry: Registry, protocol: ProtocolSettings, request_limits: Limits) -> BatchControls:
    if not isinstance(body, dict) or "questions" not in body or "states" not in body:
        raise MalformedRequest("request body must be an object with 'states' and 'questions' fields", kind="missing")
    limits.check_batch_limits(body["states"], body["questions"], choice_cap(protocol))
    limits.refuse_hooks(body)
    limits.refuse_out_parameters(body)
    controls = _controls(body, registry, request_limits)
    caller = limits.batch_size_param(body)
    sort_by_length = bool(limits.sort_by_length_param(body))
    size = pass_size(caller, len(body["states"]), len(body["questions"]), body.get("max_len"), request_limits)
    return BatchControls(controls, size, sort_by_length)


def pass_size(caller: int | None, n_states: int, n_questions: int, max_len: Any, request_limits: Limits) -> int | None:
    """States per session run, for `/batch` and each job shard alike: the caller's `batch_size`, capped by the
    plan that keeps one pass under `request_limits.max_batch_tokens`."""
    planned = limits.planned_batch_size(n_states, n_questions, max_len, request_limits.max_batch_tokens)
    return limits.effective_batch_size(caller, planned)


def job_controls(body: dict[str, Any], registry: Registry, protocol: ProtocolSettings,
                 request_limits: Limits) -> BatchControls:
    """The question limits and the controls `batch_controls` checks, by the same rules, for a job (whose states
    are checked by `laya_serverless.jobs.spec`, without the batch's state cap). `batch_size` is the caller's:
    each shard caps it by its own plan, as `/batch` does for its states."""
    limits.check_request_limits("", body["questions"], choice_cap(protocol))
    limits.refuse_hooks(body)
    limits.refuse_out_parameters(body)
    controls = _controls(body, registry, request_limits)
    return BatchControls(controls, limits.batch_size_param(body), bool(limits.sort_by_length_param(body)))


def _answer_state(deployment: Deployment, detect: Detector, protocol: ProtocolSettings, state: Any,
                  questions: dict[str, Any], controls: Controls) -> dict[str, Any]:
    decider, decision = deployment.decide(state, questions, detect, controls, protocol.auto_task)
    result = decider.predict(state, questions, max_len=controls.max_len, head_max_len=controls.head_max_len,
                             min_confidence=controls.min_confidence)
    return {**result, "routing": decision}


def _answer_narrowed(deployment: Deployment, detect: Detector, protocol: ProtocolSettings, state: Any,
                     questions: dict[str, Any], controls: Controls) -> dict[str, Any]:
    return predict_with_tournament(lambda qs: _answer_state(deployment, detect, protocol, state, qs, controls),
                                   questions, tournament_group(deployment, protocol, controls))


def answer_one(deployment: Deployment, detect: Detector, protocol: ProtocolSettings, body: dict[str, Any],
               controls: Controls) -> dict[str, Any]:
    answer = _answer_narrowed if tournament_group(deployment, protocol, controls) else _answer_state
    return answer(deployment, detect, protocol, body["state"], body["questions"], controls)


def answer_batch(deployment: Deployment, detect: Detector, protocol: ProtocolSettings, body: dict[str, Any],
                 batch: BatchControls) -> list[dict[str, Any]]:
    states, questions, controls = body["states"], body["questions"], batch.controls
    group = tournament_group(deployment, protocol, controls)
    if group and plan(questions, group) is not None:
        # Narrowing is per state: each state is answered on its own (batch_size has no effect).
        return [_answer_narrowed(deployment, detect, protocol, s, questions, controls) for s in states]
    groups: dict[str, list[int]] = {}
    decisions = []
    for i, one in enumerate(states):
        _, decision = deployment.decide(one, questions, detect, controls, protocol.auto_task)
        decisions.append(decision)
        groups.setdefault(decision["model"], []).append(i)
    results: list[dict[str, Any]] = [{}] * len(states)
    for key, indices in groups.items():
        answered = deployment.deciders[key].predict_batch(
            [states[i] for i in indices], questions, batch.batch_size, max_len=controls.max_len,
            head_max_len=controls.head_max_len, min_confidence=controls.min_confidence,
            sort_by_length=batch.sort_by_length)
        for i, result in zip(indices, answered, strict=True):
            results[i] = {**result, "routing": decisions[i]}
    return results


def shaped(result: dict[str, Any], strict: bool, confidence: str = "laya") -> dict[str, Any]:
    """One state's result as the wire carries it: the strict projection, or the full answer with Jev confidence."""
    return strict_projection(result, confidence) if strict else with_jev_confidence(result)


def batch_response(results: list[dict[str, Any]], strict: bool, confidence: str = "laya") -> dict[str, Any]:
    total = {"input_tokens": sum(r["usage"]["input_tokens"] for r in results),
             "output_tokens": sum(r["usage"]["output_tokens"] for r in results)}
    return {"results": [shaped(r, strict, confidence) for r in results], "total_usage": total}
