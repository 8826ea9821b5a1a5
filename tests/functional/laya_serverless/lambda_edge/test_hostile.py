"""Hostile-input tier: generated requests and Lambda events against the app (default and strict) and the
real Lambda handler. The property: never a 5xx, never a raise, and every 4xx carries a JSON `detail`.

Bounded and repeatable: a fixed number of examples per property (`EXAMPLES`), derandomized, no
example database, no deadline (the suite shares two cores). docs/operations.md has the counts.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from laya_serverless.http.app import create_app
from laya_serverless.lambda_edge.api_handler import lambda_handler
from laya_serverless.local_edge.start_api import lambda_context
from laya_serverless.protocol.routing import Registry
from laya_serverless.settings import Settings
from tests.functional.laya_serverless.http.test_app_fast import fake_decider
from tests.functional.laya_serverless.lambda_edge import hostile_events

pytestmark = pytest.mark.usefixtures("ieee_floats")
EXAMPLES = 120
BOUNDED = settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

_text = st.one_of(st.text(max_size=20), st.sampled_from(["", " ", "\ud800", "[MASK]", "é" * 3, "\x00", "jev-latest"]))
_scalar = st.one_of(st.none(), st.booleans(), st.integers(min_value=-10**400, max_value=10**400),
                    st.floats(allow_nan=True, allow_infinity=True), _text)
_json = st.recursive(_scalar, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                      st.dictionaries(_text, inner, max_size=4)), max_leaves=12)
_question = st.fixed_dictionaries({"type": st.sampled_from(["choice", "score", "noul", "box", 3, None])}, optional={
    "instructions": _json, "criteria": _json, "labels": _json, "option_order": _json})
_field = st.sampled_from(["state", "states", "questions", "model", "task", "lang", "lang_guess", "max_len",
                          "head_max_len", "min_confidence", "batch_size", "sort_by_length", "diagnostics", "hooks"])
_request = st.builds(lambda state, questions, extra: {"state": state, "questions": questions, **extra},
                     _json, st.dictionaries(_text, st.one_of(_question, _json), max_size=3),
                     st.dictionaries(_field, _json, max_size=4))
_body = st.one_of(_request.map(lambda r: json.dumps(r, ensure_ascii=False).encode("utf-8", "surrogatepass")),
                  st.binary(max_size=64), _json.map(lambda v: json.dumps(v).encode()))
_encoding = st.sampled_from([None, "zstd", "gzip", "identity", "zstd, gzip", "\x7f"])


HANDLERS: dict[str, Any] = {}


@pytest.fixture(scope="module", autouse=True)
def event_loop_for_mangum() -> Iterator[None]:
    """Mangum drives the app on this thread's loop (created here, so it is closed, not garbage-collected)."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    HANDLERS["lambda"] = lambda_handler(_app(False), Settings.of(api_key="k3y"))
    yield
    HANDLERS.clear()
    asyncio.set_event_loop(None)
    loop.close()


def _app(strict: bool) -> Any:
    chosen = Settings.of(jev_strict=strict, api_key="k3y")
    return create_app({"english": fake_decider([1.5, 0.5, 0.25, 2.0])}, chosen, registry=Registry())


CLIENTS = {strict: TestClient(_app(strict), raise_server_exceptions=False) for strict in (False, True)}
AUTH = {"Authorization": "Bearer k3y"}


def _check(status: int, raw: bytes, strict: bool = False) -> None:
    assert status < 500, (status, raw[:300])
    if status >= 400:
        detail = json.loads(raw)["detail"]
        assert isinstance(detail, (list, dict) if strict else str) and detail


@pytest.mark.parametrize("strict", [False, True], ids=["default", "strict"])
@pytest.mark.parametrize("path", ["/v1/systemone", "/v1/systemone/batch"])
@BOUNDED
@given(body=_body, encoding=_encoding)
def test_generated_requests_never_get_a_5xx(strict: bool, path: str, body: bytes, encoding: str | None) -> None:
    headers = dict(AUTH, **({"Content-Encoding": encoding} if encoding else {}))
    response = CLIENTS[strict].post(path, content=body, headers=headers)
    _check(response.status_code, response.content, strict)


def _mutated(event: dict[str, Any], path: list[str], value: Any, delete: bool) -> dict[str, Any]:
    mutated = copy.deepcopy(event)
    target = mutated
    for key in path[:-1]:
        if not isinstance(target.get(key), dict):
            return mutated
        target = target[key]
    if delete:
        target.pop(path[-1], None)
    else:
        target[path[-1]] = value
    return mutated


_PATHS = st.sampled_from([["body"], ["headers"], ["headers", "host"], ["headers", "authorization"],
                          ["headers", "content-encoding"], ["isBase64Encoded"], ["requestContext"],
                          ["requestContext", "http"], ["requestContext", "http", "method"],
                          ["requestContext", "http", "path"], ["rawQueryString"], ["cookies"], ["version"],
                          ["httpMethod"], ["path"], ["multiValueHeaders"], ["queryStringParameters"]])
_EVENTS = st.sampled_from([hostile_events.V2, hostile_events.V2_HEALTH, hostile_events.V1, hostile_events.ALB_HEALTH])


@BOUNDED
@given(event=_EVENTS, path=_PATHS, value=st.one_of(_json, _body.map(lambda b: base64.b64encode(b).decode())),
       delete=st.booleans())
def test_mutated_lambda_events_are_always_answered(event: dict[str, Any], path: list[str], value: Any,
                                                   delete: bool) -> None:
    answer = HANDLERS["lambda"](_mutated(event, path, value, delete), lambda_context())
    assert isinstance(answer, dict)
    if "statusCode" in answer:
        raw = base64.b64decode(answer["body"]) if answer.get("isBase64Encoded") else answer["body"].encode()
        _check(answer["statusCode"], raw)


@BOUNDED
@given(event=_json)
def test_arbitrary_json_events_are_always_answered(event: Any) -> None:
    answer = HANDLERS["lambda"](event, lambda_context())
    assert isinstance(answer, dict)
    assert answer.get("statusCode", 400) < 500


# The jobs routes and the jobs function's events, over a local store seeded with an input, a finished job's
# neighbours and a damaged document: generated submissions, ids and events.
_job_field = st.sampled_from(["states", "input", "output", "questions", "model", "task", "lang", "max_len",
                              "head_max_len", "min_confidence", "batch_size", "sort_by_length", "id"])
_store_name = st.one_of(_text, st.sampled_from([
    "jobs/input/good.jsonl", "jobs/input/../../pointers/x.json", "jobs/input/" + "a" * 300, "jobs/output/x.jsonl",
    "jobs/output/", "jobs/output/good.jsonl/x", "/etc/passwd", "s3://elsewhere/jobs/input/good.jsonl",
    "jobs/output/damaged.jsonl", "jobs/input/good.jsonl\n"]))
_job = st.builds(lambda questions, extra: {"questions": questions, **extra},
                 st.dictionaries(_text, st.one_of(_question, _json), max_size=2),
                 st.dictionaries(_job_field, st.one_of(_json, _store_name), max_size=4))
_job_body = st.one_of(_job.map(lambda r: json.dumps(r, ensure_ascii=False).encode("utf-8", "surrogatepass")),
                      st.binary(max_size=48))
_job_id = st.one_of(_text, st.sampled_from(["damaged", "input", "claims", "a" * 81, "..", "%2e%2e", "x\n"]))


class _IdleEngine:
    def start(self, job_id: str) -> None: ...

    def open(self) -> None: ...

    def close(self) -> None: ...


@pytest.fixture(scope="module")
def jobs_world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from laya_serverless.artifact.store import LocalStore
    from tests.functional.laya_serverless.jobs.jobs_support import SETTINGS, job_service, make_worker

    root = tmp_path_factory.mktemp("hostile-jobs")
    store = LocalStore(root)
    store.create("jobs/input/good.jsonl", b'"a"\n{"b": 1}\n')
    store.create("jobs/damaged/job.json", b'{"id": "damaged"}')
    chosen = Settings.of(api_key="k3y", jobs_max_states=50)
    service = job_service(store, _IdleEngine(), chosen)
    app = create_app({"english": fake_decider([1.5, 0.5, 0.25, 2.0])}, chosen, registry=Registry(), jobs=service)
    return {"client": TestClient(app, raise_server_exceptions=False), "service": service,
            "worker": make_worker(root, settings=SETTINGS)}


@BOUNDED
@given(body=_job_body, job_id=_job_id, key=st.one_of(st.none(), _text))
def test_generated_job_requests_never_get_a_5xx(jobs_world: dict[str, Any], body: bytes, job_id: str,
                                                key: str | None) -> None:
    client = jobs_world["client"]
    sendable = key is not None and key.isascii() and key.isprintable()
    headers = dict(AUTH, **({"Idempotency-Key": key} if sendable else {}))
    submitted = client.post("/v1/jobs", content=body, headers=headers)
    _check(submitted.status_code, submitted.content)
    for path in ("/v1/jobs/%s", "/v1/jobs/%s/results"):
        read = client.get(path % quote(job_id.encode("utf-8", "surrogatepass"), safe=""), headers=AUTH)
        _check(read.status_code, read.content)


_action = st.sampled_from(["answer", "give_up", "finish", "explode", None, 3])
_event = st.one_of(_json, st.builds(
    lambda action, job, extra: {"action": action, "job": job, **extra}, _action, _job_id,
    st.dictionaries(st.sampled_from(["Items", "error", "attempts", "job"]), st.one_of(
        _json, st.lists(st.fixed_dictionaries({"shard": st.integers(-3, 10**12)}), max_size=3)), max_size=3)),
    _job.map(lambda submission: {k: v for k, v in submission.items() if k != "action"}))


@BOUNDED
@given(event=_event)
def test_no_jobs_event_raises_anything_but_a_documented_kind(jobs_world: dict[str, Any], event: Any) -> None:
    """The jobs function answers or raises a `LayaError` (JobError for what its retry policy retries, a
    RequestError for a refused submission, dead-lettered with its reason): never a bare Python exception."""
    from laya_serverless.errors import LayaError
    from laya_serverless.lambda_edge.job_events import dispatch
    from laya_serverless.local_edge.start_api import lambda_context as context

    try:
        answer = dispatch(jobs_world["worker"], jobs_world["service"], event, context())
    except LayaError:
        return
    assert isinstance(answer, dict)
