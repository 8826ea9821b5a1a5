"""The HTTP app against upstream `laya.serve.create_app` on the same checkpoint, byte for byte where it matters.

Upstream runs the tiny ModernBERT on PyTorch; we run its FP32 export. Error rows must match in
status and body exactly; success payloads in key order, with numbers within parity + rounding.
Routing uses the runtime's own detector; upstream's Router uses its own.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from laya_serverless import Decider
from laya_serverless.http.app import create_app
from laya_serverless.protocol.detect import analyse
from laya_serverless.protocol.routing import Registry
from laya_serverless.settings import Settings

pytestmark = pytest.mark.slow

QUESTIONS = {
    "team": {"type": "choice", "instructions": "Which team?", "criteria": {"billing": "refunds", "tech": None}},
    "urgency": {"type": "score", "instructions": "How urgent?", "criteria": ["low", "medium", "high"]},
    "churn": {"type": "noul", "instructions": "Will they leave?"},
}


def multilingual_settings(**values: Any) -> Settings:
    """Settings of a deployment whose default checkpoint is `multilingual` (the one these tests deploy)."""
    return Settings.of(default_model="multilingual", **values)


@pytest.fixture(scope="module")
def clients(tiny_modernbert: tuple[Path, Path]) -> tuple[TestClient, TestClient]:
    import laya.serve
    from laya.router import Router

    checkpoint, export = tiny_modernbert
    decider = Decider.from_artifact(export, verify=False)
    # A deployment's registry names each checkpoint's source, as upstream's Router(models=...) does.
    registry = Registry({"english": str(checkpoint), "multilingual": str(checkpoint)})
    ours = create_app({"english": decider, "multilingual": decider}, multilingual_settings(), analyse, registry)
    theirs = laya.serve.create_app(Router(models={"english": str(checkpoint), "multilingual": str(checkpoint)}))
    return TestClient(ours), TestClient(theirs)


BAD_BODIES: list[Any] = [
    b"not json", b"[1, 2]", b'{"state": "x"}', b'{"questions": {}}', b'{"state": null, "questions": {}}',
    b'{"state": "x", "questions": []}', json.dumps({"state": "x", "questions": {"q%d" % i: {} for i in range(65)}}),
    json.dumps({"state": "x" * 50_001, "questions": {}}),
    json.dumps({"state": "x", "questions": {"s": {"type": "score", "criteria": ["a", None]}}}),
    json.dumps({"state": "x", "questions": {}, "hooks": [1], "on_predict_start": "f"}),
    b'{"state": "\\ud800", "questions": {}}', json.dumps({"state": "x", "questions": {}, "model": "org/repo"}),
    json.dumps({"state": "x", "questions": {}, "max_len": "5"}),
    json.dumps({"state": "x", "questions": {}, "head_max_len": 9000}),
    json.dumps({"state": "x", "questions": {}, "lang": 5}),
    json.dumps({"state": "x", "questions": {}, "min_confidence": 2}),
    json.dumps({"state": "x", "questions": {"q": {"type": "pick", "instructions": "x"}}}),
    json.dumps({"state": "x", "questions": {"q": {"type": "noul", "instructions": "x"}}, "task": "nope"}),
    json.dumps({"state": "x", "questions": {"q": {"type": "choice", "instructions": "x", "criteria": list("abcdefgh")}},
                "max_len": 12}),
    b"\xef\xbb\xbf" + json.dumps({"state": "x", "questions": {}}).encode(), b"NaN",
]


@pytest.mark.parametrize("body", BAD_BODIES)
def test_error_rows_match_upstream_byte_for_byte(clients: tuple[TestClient, TestClient], body: Any) -> None:
    ours, theirs = (c.post("/v1/systemone", content=body) for c in clients)
    assert (ours.status_code, ours.content) == (theirs.status_code, theirs.content)


@pytest.mark.parametrize("body", [
    b"{}", json.dumps({"states": [], "questions": {}}), json.dumps({"states": ["a"] * 65, "questions": {}}),
    json.dumps({"states": ["a", None], "questions": {}}),
    json.dumps({"states": ["a"], "questions": {}, "diagnostics": {}}),
    json.dumps({"states": ["a"], "questions": {}, "batch_size": 0}),
    json.dumps({"states": ["a"], "questions": {}, "sort_by_length": "yes"}),
])
def test_batch_error_rows_match_upstream(clients: tuple[TestClient, TestClient], body: Any) -> None:
    ours, theirs = (c.post("/v1/systemone/batch", content=body) for c in clients)
    assert (ours.status_code, ours.content) == (theirs.status_code, theirs.content)


def _close(ours: Any, theirs: Any, path: str = "") -> None:
    if isinstance(theirs, dict):
        assert list(ours) == list(theirs), path
        for key in theirs:
            _close(ours[key], theirs[key], path + "/" + key)
    elif isinstance(theirs, list):
        assert len(ours) == len(theirs), path
        for i, (mine, ref) in enumerate(zip(ours, theirs, strict=True)):
            _close(mine, ref, "%s/%d" % (path, i))
    elif isinstance(theirs, float) and not isinstance(theirs, bool):
        # both are rounded to 4 decimals: within three units of the last place (counted in units, not floats)
        assert round(abs(ours - theirs) * 1e4) <= 3, (path, ours, theirs)
    else:
        assert ours == theirs, path


@pytest.mark.parametrize("request_body", [
    {"state": "I was charged twice for my order", "questions": QUESTIONS},
    {"state": {"ticket": "Bonjour, je voudrais annuler ma commande"}, "questions": QUESTIONS, "min_confidence": 0.5},
    {"state": ["hi", "the app crashes"], "questions": QUESTIONS, "model": "ML", "lang": "de"},
    {"state": "x", "questions": {}},
])
def test_success_payloads_have_upstreams_shape(clients: tuple[TestClient, TestClient],
                                               request_body: dict[str, Any]) -> None:
    ours, theirs = (c.post("/v1/systemone", json=request_body) for c in clients)
    assert ours.status_code == theirs.status_code == 200
    _close(ours.json(), theirs.json())
    assert ours.headers["x-inference-time-ms"] == ours.headers["server-timing"].split("=")[1]


def test_batch_payloads_have_upstreams_shape(clients: tuple[TestClient, TestClient]) -> None:
    body = {"states": ["I was charged twice", {"t": "Hola, necesito ayuda"}, "crash on login"], "questions": QUESTIONS,
            "batch_size": 2}
    ours, theirs = (c.post("/v1/systemone/batch", json=body) for c in clients)
    assert ours.status_code == theirs.status_code == 200
    _close(ours.json(), theirs.json())


def test_health_and_auth(tiny_modernbert: tuple[Path, Path]) -> None:
    decider = Decider.from_artifact(tiny_modernbert[1], verify=False)
    client = TestClient(create_app({"multilingual": decider}, multilingual_settings(api_key="s3cret é"), analyse))
    assert client.get("/health").json() == {"status": "ok"}
    assert client.post("/v1/systemone", json={"state": "x", "questions": {}}).json() == {
        "detail": "invalid or missing bearer token"}
    assert client.get("/docs").status_code == 404 and client.get("/openapi.json").status_code == 404
    open_client = TestClient(create_app({"multilingual": decider}, multilingual_settings(api_key="s3cret"), analyse))
    full = open_client.get("/health", headers={"Authorization": "Bearer s3cret"}).json()
    assert list(full) == ["status", "loaded", "revisions", "device", "device_is_preference", "checkpoint_devices",
                          "cpu_fallbacks", "int8_kernels"]
    assert open_client.post("/v1/systemone", json={"state": "x", "questions": {}},
                            headers={"Authorization": "Bearer s3cret"}).status_code == 200


def test_strict_mode_projects_answers(tiny_modernbert: tuple[Path, Path]) -> None:
    decider = Decider.from_artifact(tiny_modernbert[1], verify=False)
    client = TestClient(create_app({"multilingual": decider}, multilingual_settings(jev_strict=True), analyse))
    payload = client.post("/v1/systemone", json={"state": "x", "questions": QUESTIONS, "min_confidence": 0.9}).json()
    assert list(payload) == ["model", "answers", "usage"]
    assert list(payload["answers"]["team"]) == ["type", "choice", "confidence", "probabilities"]
    assert list(payload["answers"]["churn"]) == ["type", "noul"]


def test_undeployed_checkpoints_are_refused_or_fall_back(tiny_modernbert: tuple[Path, Path]) -> None:
    decider = Decider.from_artifact(tiny_modernbert[1], verify=False)
    client = TestClient(create_app({"multilingual": decider}, multilingual_settings(), analyse))
    pinned = client.post("/v1/systemone", json={"state": "x", "questions": QUESTIONS, "model": "english"})
    assert pinned.status_code == 422
    assert pinned.json() == {"detail": "checkpoint 'english' is not deployed here; deployed: ['multilingual']"}
    routed = client.post("/v1/systemone", json={"state": "Hello there, I need help with my order please",
                                                "questions": QUESTIONS}).json()["routing"]
    assert routed["model"] == "multilingual" and routed["reason"].endswith(
        "'english' is not deployed, so the default 'multilingual' answers")


@pytest.fixture(scope="module")
def tournament_clients(tiny_modernbert: tuple[Path, Path]) -> Any:
    import laya.serve
    from laya.router import Router

    checkpoint, export = tiny_modernbert
    decider = Decider.from_artifact(export, verify=False)
    registry = Registry({"english": str(checkpoint), "multilingual": str(checkpoint)})
    ours = create_app({"english": decider, "multilingual": decider}, multilingual_settings(tournament_group=4), analyse,
                      registry)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LAYA_TOURNAMENT_GROUP", "4")  # upstream reads it when the app is built
        theirs = laya.serve.create_app(Router(models={"english": str(checkpoint), "multilingual": str(checkpoint)}))
    return TestClient(ours), TestClient(theirs)


TEAMS = ["team %s" % c for c in "abcdefghijk"]


@pytest.mark.filterwarnings("ignore:laya.shortlist")  # upstream warns when it drops an option_order
@pytest.mark.parametrize("questions", [
    {"queue": {"type": "choice", "instructions": "Which queue?", "criteria": TEAMS},
     "spam": {"type": "noul", "instructions": "Is it spam?"}},
    {"queue": {"type": "choice", "instructions": "Which queue?", "criteria": {t: "handles " + t for t in TEAMS}},
     "small": {"type": "choice", "instructions": "Tone", "criteria": ["calm", "angry"]}},
    {"queue": {"type": "choice", "instructions": "Which queue?", "criteria": TEAMS, "option_order": list(range(11))}},
    {"queue": {"type": "choice", "instructions": "Which queue?", "criteria": ["q%d" % i for i in range(150)],
               "option_order": list(range(150))}},
    {"queue": {"type": "choice", "instructions": "Which queue?", "criteria": list(range(150))}},
    {"queue": {"type": "choice", "instructions": "Which queue?", "criteria": ["q%d" % i for i in range(256)]}},
])
def test_tournament_mode_matches_upstream(tournament_clients: tuple[TestClient, TestClient],
                                          questions: dict[str, Any]) -> None:
    body = {"state": "My invoice was charged twice and I want a refund", "questions": questions}
    ours, theirs = (c.post("/v1/systemone", json=body) for c in tournament_clients)
    assert ours.status_code == theirs.status_code
    if theirs.status_code != 200:
        assert ours.content == theirs.content
        return
    _close(ours.json(), theirs.json())


def test_tournament_batch_answers_each_state_alone(tournament_clients: tuple[TestClient, TestClient]) -> None:
    body = {"states": ["charged twice", "the app crashes on login"], "batch_size": 1,
            "questions": {"queue": {"type": "choice", "instructions": "Which queue?", "criteria": TEAMS}}}
    ours, theirs = (c.post("/v1/systemone/batch", json=body) for c in tournament_clients)
    assert ours.status_code == theirs.status_code == 200
    _close(ours.json(), theirs.json())
    assert all("x_tournament" in r["answers"]["queue"] for r in ours.json()["results"])


def _tiny_app(tiny_modernbert: tuple[Path, Path], **settings: Any) -> Any:
    decider = Decider.from_artifact(tiny_modernbert[1], verify=False)
    return create_app({"multilingual": decider}, multilingual_settings(**settings))


def test_slow_bodies_time_out_without_holding_the_only_admission_slot(tiny_modernbert: tuple[Path, Path]) -> None:
    """Bodies are read before admission (docs/operations.md): a slow sender gets its 408 but never
    takes the slot; upstream, which reads after admission, answers the second request 503."""
    import asyncio

    import httpx

    app = _tiny_app(tiny_modernbert, max_concurrent=1, body_read_timeout=0.5)

    async def slow_body() -> Any:
        yield b'{"state": "x", '
        await asyncio.sleep(2)
        yield b'"questions": {}}'

    async def run() -> tuple[httpx.Response, httpx.Response]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://local") as client:
            stalled = asyncio.create_task(client.post("/v1/systemone", content=slow_body()))
            await asyncio.sleep(0.1)
            served = await client.post("/v1/systemone", json={"state": "x", "questions": {}})
            return served, await stalled

    served, timed_out = asyncio.run(run())
    assert served.status_code == 200
    assert (timed_out.status_code, timed_out.json()) == (408, {"detail": "request body was not received in time"})


def test_bodies_over_two_mib_are_refused(tiny_modernbert: tuple[Path, Path]) -> None:
    client = TestClient(_tiny_app(tiny_modernbert))
    declared = client.post("/v1/systemone", content=b"{}", headers={"Content-Length": str(2 * 1024 * 1024 + 1)})
    assert (declared.status_code, declared.json()) == (413, {"detail": "request body too large"})
    streamed = client.post("/v1/systemone", content=iter([b" " * (1024 * 1024)] * 3))  # chunked, no length
    assert (streamed.status_code, streamed.json()) == (413, {"detail": "request body too large"})
    exact = json.dumps({"state": "x", "questions": {}}).encode()
    exact += b" " * (2 * 1024 * 1024 - len(exact))
    assert client.post("/v1/systemone", content=exact).status_code == 200


def test_root_path_prefixes_the_docs_and_still_routes(tiny_modernbert: tuple[Path, Path]) -> None:
    client = TestClient(_tiny_app(tiny_modernbert, root_path="/laya"))
    assert client.get("/openapi.json").json()["servers"] == [{"url": "/laya"}]
    assert client.get("/health").status_code == 200 and client.get("/laya/health").status_code == 200


def test_batches_over_the_token_budget_are_split_like_upstream(tiny_modernbert: tuple[Path, Path]) -> None:
    import laya.serve
    from laya.router import Router

    checkpoint, export = tiny_modernbert
    decider = Decider.from_artifact(export, verify=False)
    registry = Registry({"english": str(checkpoint), "multilingual": str(checkpoint)})
    ours = TestClient(create_app({"english": decider, "multilingual": decider},
                                 multilingual_settings(max_batch_tokens=1500), analyse, registry))
    models = {"english": str(checkpoint), "multilingual": str(checkpoint)}
    theirs = TestClient(laya.serve.create_app(Router(models=models)))
    body = {"states": ["charged twice %d" % i for i in range(7)], "questions": QUESTIONS}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LAYA_MAX_BATCH_TOKENS", "1500")  # upstream reads it per request
        reference = theirs.post("/v1/systemone/batch", json=body)
    answer = ours.post("/v1/systemone/batch", json=body)
    assert answer.status_code == reference.status_code == 200
    _close(answer.json(), reference.json())


MALFORMED = [
    b"", b"{", b"null", b"true", b"42", b'"text"', b"\xff\xfe\x00", b"[" * 100_000 + b"]" * 100_000,
    b'{"questions": null, "state": "x"}', b'{"questions": {"q": null}, "state": "x"}',
    b'{"questions": {"q": []}, "state": "x"}',
    b'{"questions": {"": {"type": "noul", "instructions": "x"}}, "state": 1}',
    b'{"questions": {"q": {"type": "choice", "instructions": "x", "criteria": [[1]]}}, "state": "x"}',
    b'{"questions": {"q": {"type": "choice", "instructions": "x", "criteria": {}}}, "state": "x"}',
    b'{"questions": {"q": {"type": "score", "instructions": "x", "criteria": "abc"}}, "state": "x"}',
    b'{"questions": {"q": {"type": "noul", "instructions": "x", "labels": {"false": 1, "true": 2}}}, "state": "x"}',
    b'{"questions": {"q": {"type": "noul", "instructions": "x", "option_order": "01"}}, "state": "x"}',
    b'{"questions": {"q": {"type": "noul", "instructions": NaN}}, "state": "x"}',
    b'{"questions": {"q": {"type": "noul", "instructions": "x"}}, "state": Infinity}',
    b'{"questions": {"q": {"type": "noul", "instructions": "x"}}, "state": "x", "min_confidence": NaN}',
    b'{"questions": {"q": {"type": "noul", "instructions": "x"}}, "state": "x", "max_len": 1}',
    b'{"questions": {"q": {"type": "noul", "instructions": "x"}}, "state": "x", "head_max_len": 1, "max_len": 3}',
    b'{"questions": {"q": {"type": "noul", "instructions": "x"}}, "state": "x", "task": {"a": 1}}',
    b'{"questions": {"q": {"type": "noul", "instructions": "x"}}, "state": "x", "model": "../etc/passwd"}',
    b'{"questions": {"q": {"type": "noul", "instructions": "x"}}, "state": "x", "lang": []}',
    b'{"questions": {"q": {"type": "noul", "instructions": "x"}}, "state": {"a": {"b": "\\udfff"}}}',
    '{"questions": {}, "state": "x"}'.encode("utf-16"), b'{"questions": {}, "state": "x", "state": null}',
]


@pytest.mark.parametrize("body", MALFORMED)
def test_malformed_bodies_get_a_4xx_with_a_detail_never_a_5xx(tiny_modernbert: tuple[Path, Path],
                                                               body: bytes) -> None:
    client = TestClient(_tiny_app(tiny_modernbert))
    for path in ("/v1/systemone", "/v1/systemone/batch"):
        response = client.post(path, content=body)
        assert response.status_code < 500, (path, body[:80], response.text)
        if response.status_code >= 400:
            assert isinstance(response.json()["detail"], str) and response.json()["detail"]


def test_idle_unload_empties_the_server_and_the_next_request_reloads(tiny_modernbert: tuple[Path, Path]) -> None:
    import time

    decider = Decider.from_artifact(tiny_modernbert[1], verify=False)
    reloads: list[float] = []

    def reload() -> tuple[dict[str, Decider], dict[str, str | None]]:
        reloads.append(time.monotonic())
        return {"multilingual": decider}, {"multilingual": "rev-1"}

    app = create_app({"multilingual": decider}, multilingual_settings(idle_unload_seconds=0.3),
                     revisions={"multilingual": "rev-1"}, reload=reload)
    with TestClient(app) as client:  # runs the lifespan, which starts the idle reaper
        health = client.get("/health").json()
        assert health["loaded"] == ["multilingual"] and health["idle_unload_seconds"] == 0.3
        assert list(health)[-2:] == ["idle_unload_seconds", "idle_seconds"]
        time.sleep(0.8)
        idle = client.get("/health").json()
        assert idle["loaded"] == [] and idle["revisions"] == {} and idle["device_is_preference"] is True
        assert idle["idle_seconds"] >= 0.3
        assert client.post("/v1/systemone", json={"state": "x", "questions": QUESTIONS}).status_code == 200
        assert len(reloads) == 1 and client.get("/health").json()["loaded"] == ["multilingual"]
    with pytest.raises(ValueError, match="needs a way to reload"):
        create_app({"multilingual": decider}, multilingual_settings(idle_unload_seconds=1.0))
