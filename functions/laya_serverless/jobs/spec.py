"""A job request, checked before anything is written: the questions and controls by the very rules of
`/v1/systemone/batch` (`protocol.decisions`, `protocol.limits`), each state by the single-state rules, with
where it came from (`states[3]`, `input line 7`) in the refusal. The batch's 64-state cap gives way
to the deployment's per-job cap (`LAYA_JOBS_MAX_STATES`)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..artifact.store import ObjectStore
from ..core.questions import parse_questions
from ..errors import InvalidRequest, Location, MalformedRequest, QuestionError, RequestError, TooLarge
from ..protocol import limits
from ..protocol.decisions import BatchControls, job_controls
from ..protocol.routing import Registry, route
from ..settings import JobSettings, Limits, ProtocolSettings
from .store_keys import INPUT_PREFIX, OUTPUT_PREFIX, key_in

_SHAPE = "request body must be an object with 'questions' and either 'states' (a list) or 'input' (a store URI)"
_INPUT: Location = ("input",)


@dataclass(frozen=True)
class JobRequest:
    states: list[Any]
    questions: dict[str, Any]
    batch: BatchControls  # the controls, checked and typed once; the spec keeps `batch.to_spec()`
    output: str | None  # a store key under jobs/output/, or None for the default


def _relabel(error: RequestError, where: str, location: Location) -> RequestError:
    return type(error)("%s: %s" % (where, error.detail), location=location, kind=error.kind)


def check_states(states: Sequence[Any], places: Iterator[tuple[str, Location]], jobs: JobSettings) -> None:
    """Each state by the single-state rules; a refusal says which (`states[3]`) and points there."""
    if len(states) > jobs.jobs_max_states:
        raise TooLarge("too many states in job (%d > %d)" % (len(states), jobs.jobs_max_states))
    for state, (where, location) in zip(states, places, strict=False):
        try:
            limits.check_request_limits(state, {})  # no questions: only the state's own presence and size
            if limits.has_lone_surrogate(state):
                raise MalformedRequest("state contains an unpaired surrogate escape; those cannot be encoded as "
                                       "UTF-8")
        except RequestError as exc:
            raise _relabel(exc, where, location) from None


def parse_input(data: bytes, jobs: JobSettings) -> tuple[list[Any], list[int]]:
    """States of a JSONL file (one JSON value a line; blank lines skipped) and the line number of each."""
    states: list[Any] = []
    lines: list[int] = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        if len(states) >= jobs.jobs_max_states:
            raise TooLarge("too many states in job input (over %d)" % jobs.jobs_max_states)
        try:
            states.append(json.loads(raw))
        except UnicodeDecodeError:
            raise MalformedRequest("input line %d is not UTF-8" % number, location=_INPUT) from None
        except (ValueError, RecursionError) as exc:
            reason = exc.msg if isinstance(exc, json.JSONDecodeError) else "invalid JSON"
            raise MalformedRequest("input line %d is not valid JSON (%s)" % (number, reason), location=_INPUT) from None
        lines.append(number)
    if not states:
        raise MalformedRequest("input holds no states: one JSON value (the state) per line", location=_INPUT)
    return states, lines


def read_input(store: ObjectStore, name: Any, jobs: JobSettings) -> list[Any]:
    if not isinstance(name, str) or not name:
        raise MalformedRequest("'input' must be a store URI (or key) of a JSONL file, one state per line",
                               location=_INPUT)
    key = key_in(store, name, INPUT_PREFIX, "input")
    size = store.size(key)  # from the metadata, before a byte is read: a huge object is never in memory
    if size is not None and size > jobs.jobs_max_input_bytes:
        raise TooLarge("input too large (%d > %d bytes)" % (size, jobs.jobs_max_input_bytes))
    found = store.read(key)
    if size is None or found is None:
        raise InvalidRequest("input %r does not exist" % name, location=_INPUT)
    if len(found[0]) > jobs.jobs_max_input_bytes:  # replaced between the two calls
        raise TooLarge("input too large (%d > %d bytes)" % (len(found[0]), jobs.jobs_max_input_bytes))
    states, lines = parse_input(found[0], jobs)
    check_states(states, (("input line %d" % n, _INPUT) for n in lines), jobs)
    return states


def _check_model(states: list[Any], questions: dict[str, Any], batch: BatchControls, registry: Registry,
                 deployed: Sequence[str]) -> None:
    """A pinned `model` or `task` that is not deployed is refused now, not once per shard."""
    controls = batch.controls
    if controls.model is None and controls.task is None:
        return
    try:
        key = route(registry, states[0], questions, lambda _state: {}, model=controls.model,
                    task=controls.task)["model"]
    except QuestionError as exc:
        raise InvalidRequest.from_error(exc) from None
    if key not in deployed:
        raise InvalidRequest("checkpoint %r is not deployed here; deployed: %s" % (key, sorted(deployed)),
                             location=("model",))


def _check_budgets(questions: dict[str, Any], batch: BatchControls, deciders: Mapping[str, Any]) -> None:
    """`max_len`/`head_max_len` that /batch would refuse are refused now, not in every shard: checked by the pinned
    checkpoint's decider, or by every deployed one when the job routes per state."""
    controls = batch.controls
    pinned = deciders.get(controls.model) if controls.model is not None else None
    chosen = [pinned] if pinned is not None else list(deciders.values())
    try:
        for decider in chosen:
            decider.check_budgets(questions, controls.max_len, controls.head_max_len)
    except QuestionError as exc:
        raise InvalidRequest.from_error(exc) from None


def job_request(body: Any, store: ObjectStore, registry: Registry, deployed: Sequence[str], jobs: JobSettings,
                protocol: ProtocolSettings, request_limits: Limits,
                deciders: Mapping[str, Any] | None = None) -> JobRequest:
    """Every check a job request gets, in the protocol's order: shape, questions, controls, states; with the
    deployment's `deciders`, the budgets as the decision routes check them."""
    if not isinstance(body, dict) or "questions" not in body or ("states" in body) == ("input" in body):
        raise MalformedRequest(_SHAPE, kind="missing")
    questions = body["questions"]
    # States are checked on their own below, each named in its refusal.
    batch = job_controls({k: v for k, v in body.items() if k != "states"}, registry, protocol, request_limits)
    try:
        parse_questions(questions)
    except QuestionError as exc:
        raise InvalidRequest.from_error(exc) from None
    if "states" in body:
        states = body["states"]
        if not isinstance(states, list) or not states:
            raise MalformedRequest("'states' must be a non-empty list", location=("states",))
        check_states(states, (("states[%d]" % i, ("states", i)) for i in range(len(states))), jobs)
    else:
        states = read_input(store, body["input"], jobs)
    output = body.get("output")
    if output is not None:
        if not isinstance(output, str):
            raise MalformedRequest("'output' must be a store URI (or key) under the job output prefix",
                                   location=("output",))
        output = key_in(store, output, OUTPUT_PREFIX, "output")
    _check_model(states, questions, batch, registry, deployed)
    if deciders:
        _check_budgets(questions, batch, deciders)
    return JobRequest(states, questions, batch, output)
