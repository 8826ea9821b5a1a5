"""Bad job requests get one clear status and a JSON detail; the sync budget refuses /batch toward /v1/jobs."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from laya_serverless.artifact.store import LocalStore
from laya_serverless.errors import Conflict
from laya_serverless.http.app import create_app
from laya_serverless.jobs.store_keys import key_in
from laya_serverless.local_edge.jobs_engine import LocalEngine
from laya_serverless.protocol.routing import Registry
from laya_serverless.settings import Settings
from tests.functional.laya_serverless.jobs.jobs_support import (
    QUESTIONS,
    SETTINGS,
    decider,
    job_service,
    make_worker,
    states,
)

GOOD = b'"i was charged twice"\n{"ticket": "billing"}\n'


class Idle:
    """An engine that never runs: jobs stay queued."""

    def start(self, job_id: str) -> None: ...

    def open(self) -> None: ...

    def close(self) -> None: ...


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("requests") / "store"
    store = LocalStore(root)
    for name, data in (("good.jsonl", GOOD), ("bad-json.jsonl", b'"a"\n"b"\n{"ticket": \n'),
                       ("null.jsonl", b'"a"\n\nnull\n'), ("empty.jsonl", b"\n\n"),
                       ("latin1.jsonl", b'"caf\xe9"\n'), ("surrogate.jsonl", b'"ok"\n"\\ud800"\n'),
                       ("big.jsonl", b'"x"\n' * 20)):
        store.create("jobs/input/" + name, data)
    store.create("pointers/secret.json", b"{}")
    return root


@pytest.fixture(scope="module")
def client(root: Path) -> TestClient:
    settings = Settings.of(jobs_max_states=12, api_key="k3y")
    jobs = job_service(LocalStore(root), Idle(), settings)
    return TestClient(create_app({"english": decider()}, settings, registry=Registry(), jobs=jobs),
                      headers={"Authorization": "Bearer k3y"})


def body(**fields: Any) -> dict[str, Any]:
    return {"questions": QUESTIONS, **fields}


@pytest.mark.parametrize(("request_body", "status", "detail"), [
    (body(), 400, "request body must be an object with 'questions' and either 'states' (a list) or 'input'"),
    (body(states=["a"], input="jobs/input/good.jsonl"), 400, "either 'states' (a list) or 'input'"),
    ({"states": ["a"]}, 400, "request body must be an object with 'questions'"),
    (body(states=[]), 400, "'states' must be a non-empty list"),
    (body(states=["a", None]), 400, "states[1]: 'state' is required"),
    (body(states=["a", "b" * 50_001]), 413, "states[1]: state too large (50001 > 50000 chars)"),
    (body(states=["a"] * 13), 413, "too many states in job (13 > 12)"),
    (body(input="jobs/input/big.jsonl"), 413, "too many states in job input (over 12)"),
    (body(input="jobs/input/bad-json.jsonl"), 400, "input line 3 is not valid JSON (Expecting value)"),
    (body(input="jobs/input/null.jsonl"), 400, "input line 3: 'state' is required"),
    (body(input="jobs/input/empty.jsonl"), 400, "input holds no states"),
    (body(input="jobs/input/latin1.jsonl"), 400, "input line 1 is not UTF-8"),
    (body(input="jobs/input/surrogate.jsonl"), 400, "input line 2: state contains an unpaired surrogate"),
    (body(input="jobs/input/missing.jsonl"), 422, "input 'jobs/input/missing.jsonl' does not exist"),
    (body(input="pointers/secret.json"), 422, "is outside this deployment's job input prefix"),
    (body(input="jobs/input/../../pointers/secret.json"), 422, "is outside this deployment's job input prefix"),
    (body(input="/etc/passwd"), 422, "is outside this deployment's job input prefix"),
    (body(input="s3://elsewhere/jobs/input/good.jsonl"), 422, "is outside this deployment's job input prefix"),
    # a segment longer than any store's file name (was an OSError: 500)
    (body(input="jobs/input/" + "a" * 256 + ".jsonl"), 422, "is outside this deployment's job input prefix"),
    (body(states=["a"], output="jobs/output/" + "o" * 1100), 422, "is outside this deployment's job output prefix"),
    (body(input=7), 400, "'input' must be a store URI"),
    (body(states=["a"], output="jobs/other.jsonl"), 422, "is outside this deployment's job output prefix"),
    (body(states=["a"], max_len=0), 422, "max_len must be a positive integer"),
    # what /batch refuses for every state is refused at submission, not in every shard (issue 56)
    (body(states=["a"], max_len=600), 422, "max_len exceeds the model's position limit (600 > 512)"),
    (body(states=["a"], head_max_len=8192), 422, "head_max_len exceeds the model's position limit (8192 > 512)"),
    (body(states=["a"], max_len=2), 422, "option markers fit in max_len=2"),
    (body(states=["a"], hooks=["x"]), 422, "hooks run inside the server process"),
    (body(states=["a"], model="./my/checkpoint"), 422, "unknown model './my/checkpoint'"),
    (body(states=["a"], model="multilingual"), 422, "checkpoint 'multilingual' is not deployed here"),
    ({"questions": {"q": {"type": "choice"}}, "states": ["a"]}, 422, "q"),
    ({"questions": {f"q{i}": {"type": "noul", "instructions": "x"} for i in range(65)}, "states": ["a"]}, 413,
     "too many questions (65 > 64)"),
])
def test_bad_job_requests_are_refused_with_a_detail(client: TestClient, request_body: Any, status: int,
                                                    detail: str) -> None:
    response = client.post("/v1/jobs", json=request_body)
    assert response.status_code == status, response.text
    assert set(response.json()) == {"detail"} and detail in response.json()["detail"]


def test_nan_and_infinities_in_a_job_are_accepted_as_the_decision_routes_accept_them(root: Path) -> None:
    """A state holding NaN, Infinity or 1e400 answers 200 on /v1/systemone (as upstream's server); a job with the
    same states is accepted and stored (it was a 500 text/plain, with orphan shards left in the store)."""
    settings = Settings.of(api_key="k3y")
    jobs = job_service(LocalStore(root), Idle(), settings)
    app = TestClient(create_app({"english": decider()}, settings, registry=Registry(), jobs=jobs),
                     headers={"Authorization": "Bearer k3y", "Content-Type": "application/json"})
    states = b'[{"reading": NaN}, {"reading": Infinity}, {"reading": -Infinity}, {"reading": 1e400}]'
    questions = b'{"churn": {"type": "noul", "instructions": "does the statement hold ?"}}'
    for state in (b'{"reading": NaN}', b'{"reading": 1e400}'):
        one = app.post("/v1/systemone", content=b'{"state": %s, "questions": %s}' % (state, questions))
        assert one.status_code == 200, one.text
    accepted = app.post("/v1/jobs", content=b'{"states": %s, "questions": %s}' % (states, questions))
    assert accepted.status_code == 202, accepted.text
    status = app.get("/v1/jobs/%s" % accepted.json()["id"])
    assert status.status_code == 200 and status.json()["states"] == 4


def test_body_limits_and_auth_are_the_decision_routes(client: TestClient) -> None:
    huge = client.post("/v1/jobs", content=b'{"states": ["' + b"a" * (2 * 1024 * 1024) + b'"]}',
                       headers={"Content-Type": "application/json"})
    assert (huge.status_code, huge.json()) == (413, {"detail": "request body too large"})
    assert client.post("/v1/jobs", content=b"{nope").json() == {"detail": "request body must be valid JSON"}
    for method, path in (("POST", "/v1/jobs"), ("GET", "/v1/jobs/abc"), ("GET", "/v1/jobs/abc/results")):
        denied = client.request(method, path, headers={"Authorization": "Bearer wrong"})
        assert (denied.status_code, denied.json()) == (401, {"detail": "invalid or missing bearer token"})


def test_unknown_jobs_are_404_and_results_wait_for_the_end(client: TestClient, root: Path) -> None:
    for job_id in ("0123456789abcdef", "input", "x" * 81, "a.b"):
        response = client.get("/v1/jobs/%s" % job_id)
        assert (response.status_code, response.json()) == (404, {"detail": "no job %r" % job_id})
    assert client.get("/v1/jobs/nope/results").json() == {"detail": "no job 'nope'"}
    accepted = client.post("/v1/jobs", json=body(input=str(root / "jobs/input/good.jsonl")))
    assert accepted.status_code == 202 and accepted.json()["states"] == 2 and accepted.json()["status"] == "queued"
    early = client.get("/v1/jobs/%s/results" % accepted.json()["id"])
    assert early.status_code == 409 and "is queued (0 of 1 shards done)" in early.json()["detail"]


def test_a_local_input_may_be_named_by_key_or_by_its_path_in_the_store(root: Path) -> None:
    store = LocalStore(root)
    assert key_in(store, "jobs/input/good.jsonl", "jobs/input/", "input") == "jobs/input/good.jsonl"
    assert key_in(store, str(root.resolve() / "jobs/input/good.jsonl"), "jobs/input/", "input") == \
        "jobs/input/good.jsonl"


def test_the_sync_budget_refuses_a_long_batch_toward_jobs() -> None:
    budget = Settings.of(batch_time_budget=1.0, batch_token_rate=100)
    answer = {"states": states(10), "questions": QUESTIONS, "lang": "en"}
    refused = TestClient(create_app({"english": decider()}, budget)).post("/v1/systemone/batch", json=answer)
    assert refused.status_code == 413
    assert "over this deployment's 1 s budget" in refused.json()["detail"]
    assert "POST /v1/jobs" in refused.json()["detail"]
    small = TestClient(create_app({"english": decider()}, budget)).post(
        "/v1/systemone/batch", json=dict(answer, states=["a"]))
    assert small.status_code == 200
    default = TestClient(create_app({"english": decider()}, Settings.of(batch_token_rate=100)))
    assert default.post("/v1/systemone/batch", json=answer).status_code == 200  # off unless the deployment sets it


def test_without_a_job_engine_there_are_no_job_routes() -> None:
    plain = TestClient(create_app({"english": decider()}, Settings.of()))
    assert plain.post("/v1/jobs", json=body(states=["a"])).status_code == 404


def test_a_job_with_more_states_than_the_batch_cap_runs(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    engine = LocalEngine(store, partial(make_worker, tmp_path), processes=False)
    jobs = job_service(store, engine)
    with TestClient(create_app({"english": decider()}, SETTINGS, jobs=jobs)) as client:
        accepted = client.post("/v1/jobs", json={"states": states(200), "questions": QUESTIONS, "lang": "en"})
        assert accepted.status_code == 202 and accepted.json()["states"] == 200
        assert engine.wait(accepted.json()["id"], timeout=60)["status"] == "succeeded"


def _fresh(tmp_path: Path) -> tuple[LocalStore, TestClient]:
    store = LocalStore(tmp_path / "store")
    store.create("jobs/input/good.jsonl", GOOD)
    settings = Settings.of(api_key="k3y")
    jobs = job_service(store, Idle(), settings)
    return store, TestClient(create_app({"english": decider()}, settings, registry=Registry(), jobs=jobs),
                             headers={"Authorization": "Bearer k3y"})


def test_an_output_is_one_job_s_alone_and_never_overwrites(tmp_path: Path) -> None:
    """An `output` naming another job's output, an existing object, a folder of them or a path under a file is
    refused before anything of the job is written (it used to overwrite another job's results, or leave a job
    running forever when the merge failed); a second job naming the same new output is a 409."""
    store, client = _fresh(tmp_path)
    first = client.post("/v1/jobs", json=body(input="jobs/input/good.jsonl"))
    assert first.status_code == 202
    store.create("jobs/output/taken-results.jsonl", b"{}\n")
    store.create("jobs/output/folder/inside.jsonl", b"{}\n")
    before = sorted(p.relative_to(store.root) for p in Path(store.root).rglob("*") if p.is_file())
    for output, status, detail in (
            ("jobs/output/%s.jsonl" % first.json()["id"], 422, "is job %r's own output" % first.json()["id"]),
            ("jobs/output/taken-results.jsonl", 422, "already exists in the store"),
            ("jobs/output/folder", 422, "already exists in the store"),
            ("jobs/output/taken-results.jsonl/under.jsonl", 422, "already exists in the store"),
            ("jobs/output/" + "x" * 256, 422, "outside this deployment's job output prefix")):
        refused = client.post("/v1/jobs", json=body(input="jobs/input/good.jsonl", output=output))
        assert (refused.status_code, refused.json()["detail"].count(detail[:20])) == (status, 1), refused.json()
    after = sorted(p.relative_to(store.root) for p in Path(store.root).rglob("*") if p.is_file())
    assert after == before   # nothing was left by the refusals
    mine = client.post("/v1/jobs", json=body(input="jobs/input/good.jsonl", output="jobs/output/mine.jsonl"))
    assert mine.status_code == 202
    again = client.post("/v1/jobs", json=body(input="jobs/input/good.jsonl", output="jobs/output/mine.jsonl"))
    assert again.status_code == 409 and "already the output of another job" in again.json()["detail"]


def test_a_job_whose_output_cannot_be_written_ends_failed_saying_why(tmp_path: Path) -> None:
    """If the merge cannot write the output (here a folder stands at its key, which no read sees), the job
    ends `failed` with the reason, instead of staying `running` and being retried at every restart."""
    store = LocalStore(tmp_path)
    engine = LocalEngine(store, partial(make_worker, tmp_path), processes=False)
    jobs = job_service(store, engine)
    with TestClient(create_app({"english": decider()}, SETTINGS, jobs=jobs)) as client:
        store.create("jobs/input/two.jsonl", GOOD)
        # Made before the submission (which reads no folder as an object), so the merge cannot win a race to it.
        Path(store.root, "jobs/output/late2.jsonl").mkdir(parents=True)
        accepted = client.post("/v1/jobs", json={"input": "jobs/input/two.jsonl", "questions": QUESTIONS,
                                                 "lang": "en", "output": "jobs/output/late2.jsonl"})
        assert accepted.status_code == 202, accepted.text
        ended = engine.wait(accepted.json()["id"], timeout=60)
        assert ended["status"] == "failed" and "could not be written to its output" in ended["detail"], ended
        assert str(tmp_path) not in ended["detail"]


def test_a_slow_job_body_never_holds_the_only_admission_slot(tmp_path: Path) -> None:
    """POST /v1/jobs reads its body before admission, as the decision routes do: a slow sender gets its 408 and
    a decision request meanwhile is answered (it read inside the slot: 16 slow senders locked out every route)."""
    import asyncio

    import httpx

    settings = Settings.of(max_concurrent=1, body_read_timeout=0.5)
    app = create_app({"english": decider()}, settings, registry=Registry(),
                     jobs=job_service(LocalStore(tmp_path), Idle(), settings))

    async def slow_body() -> Any:
        yield b'{"states": ["x"], '
        await asyncio.sleep(2)
        yield b'"questions": {}}'

    async def run() -> tuple[httpx.Response, httpx.Response]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://local") as client:
            stalled = asyncio.create_task(client.post("/v1/jobs", content=slow_body()))
            await asyncio.sleep(0.1)
            served = await client.post("/v1/systemone", json={"state": "x", "questions": QUESTIONS, "lang": "en"})
            return served, await stalled

    served, timed_out = asyncio.run(run())
    assert served.status_code == 200, served.text
    assert (timed_out.status_code, timed_out.json()) == (408, {"detail": "request body was not received in time"})


@pytest.mark.parametrize("confidence", ["laya", "jev"])
def test_a_strict_deployment_s_job_lines_are_its_batch_results(tmp_path: Path, confidence: str) -> None:
    """Strict mode reaches jobs: the body is prepared as /batch prepares it (default instructions), and each line's
    result is shaped as /batch shapes it, with the deployment's confidence (the worker used to drop both)."""
    import json

    settings = Settings.of(jobs_time_budget=0.05, jobs_token_rate=20_000, jev_strict=True, jev_confidence=confidence)
    store = LocalStore(tmp_path)
    engine = LocalEngine(store, partial(make_worker, tmp_path, settings=settings), processes=False)
    questions = {"churn": {"type": "noul"}, "team": QUESTIONS["team"]}   # strict: no instructions needed
    with TestClient(create_app({"english": decider()}, settings, jobs=job_service(store, engine, settings))) as client:
        batch = client.post("/v1/systemone/batch", json={"states": states(6), "questions": questions, "lang": "en"})
        assert batch.status_code == 200, batch.text
        accepted = client.post("/v1/jobs", json={"states": states(6), "questions": questions, "lang": "en"})
        assert accepted.status_code == 202, accepted.text
        assert engine.wait(accepted.json()["id"], timeout=60)["status"] == "succeeded"
        lines = [json.loads(line) for line in client.get("/v1/jobs/%s/results" % accepted.json()["id"]).iter_lines()]
    assert [line["result"] for line in lines] == batch.json()["results"]


def test_damaged_jobs_are_reported_for_that_job_and_never_stop_the_server(tmp_path: Path) -> None:
    """A corrupt or partial job document, a corrupt or missing spec, a missing results file: each is reported for
    its job (failed with the reason, a 409 for results, error lines in a stream), the server still starts and
    answers the other jobs, and nothing is a 500 (a `{}` document used to stop `serve` from starting)."""
    import json

    from laya_serverless.jobs.store_keys import job_key, result_key, spec_key

    store = LocalStore(tmp_path)
    engine = LocalEngine(store, partial(make_worker, tmp_path), processes=False)
    with TestClient(create_app({"english": decider()}, SETTINGS, jobs=job_service(store, engine))) as client:
        done = client.post("/v1/jobs", json={"states": states(30), "questions": QUESTIONS, "lang": "en"}).json()
        assert engine.wait(done["id"], timeout=60)["status"] == "succeeded"
    assert done["shards"] >= 2
    Path(store.root, result_key(done["id"], 1)).unlink()   # a results file removed by hand
    for name, document in (("empty", b"{}"), ("garbage", b"\x00not json"), ("partial", b'{"id": "partial"}')):
        store.create(job_key(name), document)
    running = json.loads(Path(store.root, job_key(done["id"])).read_text())
    store.create(job_key("nospec"), json.dumps(dict(running, id="nospec", status="running", finished=[])).encode())
    store.create(job_key("badspec"), json.dumps(dict(running, id="badspec", status="succeeded")).encode())
    store.create(spec_key("badspec"), b'{"bounds": "nope"}')

    engine = LocalEngine(store, partial(make_worker, tmp_path), processes=False)
    with TestClient(create_app({"english": decider()}, SETTINGS, jobs=job_service(store, engine))) as client:
        for name in ("empty", "garbage", "partial"):
            status = client.get("/v1/jobs/%s" % name)
            assert status.status_code == 200 and status.json()["status"] == "failed", status.text
            assert "incomplete or corrupt" in status.json()["detail"] or "is corrupt" in status.json()["detail"]
            results = client.get("/v1/jobs/%s/results" % name)
            assert results.status_code == 409 and "has no results to read" in results.json()["detail"]
        assert engine.wait("nospec", timeout=30)["status"] == "failed"   # resumed at start, ended: no spec
        assert "has no spec" in client.get("/v1/jobs/nospec").json()["detail"]
        bad = client.get("/v1/jobs/badspec/results")
        assert bad.status_code == 409 and "spec of job 'badspec' is incomplete or corrupt" in bad.json()["detail"]
        lines = [json.loads(line) for line in client.get("/v1/jobs/%s/results" % done["id"]).iter_lines()]
    assert [line["index"] for line in lines] == list(range(30))   # whole: the missing shard reads as error lines
    missing = [line for line in lines if "error" in line]
    assert missing and all(line["error"]["detail"] == "this shard's results are missing from the store"
                           for line in missing)
    assert str(tmp_path) not in json.dumps(lines)


def test_an_idempotency_key_makes_a_retried_submission_the_same_job(tmp_path: Path) -> None:
    """The same Idempotency-Key and body answer the same job and store nothing twice; another body with that key
    is a 409; a key past its 24 h window starts a new job; a malformed key is a 400; no key, a new job each time."""
    import json

    from laya_serverless.jobs.store_keys import idempotency_key_of

    store, client = _fresh(tmp_path)
    job = body(input="jobs/input/good.jsonl")
    first = client.post("/v1/jobs", json=job, headers={"Idempotency-Key": "order-7f3a"})
    again = client.post("/v1/jobs", json=job, headers={"Idempotency-Key": "order-7f3a"})
    assert first.status_code == again.status_code == 202 and again.json()["id"] == first.json()["id"]
    assert len(list(Path(store.root, "jobs").glob("*/job.json"))) == 1
    other = client.post("/v1/jobs", json=body(states=["another"]), headers={"Idempotency-Key": "order-7f3a"})
    assert other.status_code == 409 and "used for another request within 24 h" in other.json()["detail"]
    for bad in ("", "has space", "x" * 256):
        refused = client.post("/v1/jobs", json=job, headers={"Idempotency-Key": bad})
        assert refused.status_code == 400 and "Idempotency-Key" in refused.json()["detail"], (bad, refused.text)
    unkeyed = [client.post("/v1/jobs", json=job).json()["id"] for _ in range(2)]
    assert len(set(unkeyed)) == 2 and first.json()["id"] not in unkeyed
    record = Path(store.root, idempotency_key_of("order-7f3a"))
    record.write_text(json.dumps(dict(json.loads(record.read_text()), created=0)))   # a day and more ago
    later = client.post("/v1/jobs", json=job, headers={"Idempotency-Key": "order-7f3a"})
    assert later.status_code == 202 and later.json()["id"] != first.json()["id"]


class _ReadsCounted(LocalStore):
    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.reads: list[str] = []

    def read(self, key: str) -> tuple[bytes, str] | None:
        self.reads.append(key)
        return super().read(key)


def test_an_input_over_the_limit_is_refused_from_its_size_before_a_byte_is_read(tmp_path: Path) -> None:
    """The input's size comes from the store's metadata (stat here, HEAD on S3): a 413 without reading the
    object (a multi-GB input used to be read whole first, and run a Lambda function out of memory)."""
    store = _ReadsCounted(tmp_path / "store")
    store.create("jobs/input/huge.jsonl", b'"x"\n' * 1000)
    settings = Settings.of(api_key="k3y", jobs_max_input_bytes=1000)
    client = TestClient(create_app({"english": decider()}, settings, registry=Registry(),
                                   jobs=job_service(store, Idle(), settings)), headers={"Authorization": "Bearer k3y"})
    refused = client.post("/v1/jobs", json=body(input="jobs/input/huge.jsonl"))
    assert (refused.status_code, refused.json()) == (413, {"detail": "input too large (4000 > 1000 bytes)"})
    assert "jobs/input/huge.jsonl" not in store.reads


def test_a_link_out_of_the_local_store_is_not_an_input(tmp_path: Path) -> None:
    outside = tmp_path / "outside.jsonl"
    outside.write_bytes(b'"a secret of this machine"\n')
    store, client = _fresh(tmp_path)
    Path(store.root, "jobs/input/link.jsonl").symlink_to(outside)
    refused = client.post("/v1/jobs", json=body(input="jobs/input/link.jsonl"))
    assert refused.status_code == 422 and "does not exist" in refused.json()["detail"]
    inside = Path(store.root, "jobs/input/alias.jsonl")
    inside.symlink_to(Path(store.root, "jobs/input/good.jsonl"))   # a link within the store is an object
    assert client.post("/v1/jobs", json=body(input="jobs/input/alias.jsonl")).status_code == 202


class _Counted(Idle):
    def __init__(self) -> None:
        self.started: list[str] = []

    def start(self, job_id: str) -> None:
        self.started.append(job_id)


def test_a_job_id_names_one_body_and_another_body_under_it_is_a_409(tmp_path: Path) -> None:
    """A direct submission reusing an id with the same questions and other states used to be accepted and answered
    with the first job's results; now the states' digest is in the job's spec, and another body is a 409 that writes
    nothing. The same body again is the same job (Lambda's retry)."""
    store, engine = LocalStore(tmp_path), _Counted()
    jobs = job_service(store, engine, Settings())
    registry, deployed = Registry(), ["english"]
    first = jobs.submit(body(states=["i was charged twice"], lang="en"), registry, deployed, job_id="tickets-1")
    stored = sorted(store.list("jobs/"))
    assert jobs.submit(body(states=["i was charged twice"], lang="en"), registry, deployed, job_id="tickets-1") == first
    for other in (body(states=["i was charged three times"], lang="en"),   # same length, other state
                  body(states=["i was charged twice", "again"], lang="en"),
                  body(states=["i was charged twice"], lang="en", max_len=64),
                  body(states=["i was charged twice"], lang="en", output="jobs/output/elsewhere.jsonl")):
        with pytest.raises(Conflict, match="job 'tickets-1' already exists with another request"):
            jobs.submit(other, registry, deployed, job_id="tickets-1")
    assert sorted(store.list("jobs/")) == stored and engine.started == ["tickets-1", "tickets-1"]


def test_concurrent_submissions_of_one_id_with_other_states_accept_exactly_one(tmp_path: Path) -> None:
    """8 submissions of one id, each with its own state, at once: all 8 used to be accepted, one state stored and
    the engine started 8 times. The create-only spec admits one; the other 7 are 409s."""
    from concurrent.futures import ThreadPoolExecutor
    from threading import Barrier

    store, engine = LocalStore(tmp_path), _Counted()
    jobs = job_service(store, engine, Settings())
    barrier = Barrier(8)

    def submit(n: int) -> str:
        barrier.wait()
        try:
            jobs.submit(body(states=["state number %d" % n], lang="en"), Registry(), ["english"], job_id="raced")
            return "accepted %d" % n
        except Conflict:
            return "conflict"

    with ThreadPoolExecutor(8) as pool:
        outcomes = list(pool.map(submit, range(8)))
    [accepted] = [o for o in outcomes if o != "conflict"]
    assert outcomes.count("conflict") == 7 and engine.started == ["raced"]
    [shard] = [k for k in store.list("jobs/raced/") if "/shards/" in k]
    assert json.loads(store.read(shard)[0])["states"] == ["state number %s" % accepted.split()[1]]


def test_a_budget_past_the_encoder_s_positions_is_refused_in_each_shard_and_never_retried(tmp_path: Path) -> None:
    """A job's max_len of 513 on a 512-position encoder used to fail every shard in onnxruntime, be retried 3 times
    and end with error lines for short states too (dead-lettered on AWS): now each shard is refused at once with
    the limit named, as /batch refuses it (422)."""
    from laya_serverless import Decider
    from laya_serverless.jobs.merge import finish
    from laya_serverless.jobs.worker import REFUSED, Worker
    from laya_serverless.protocol.deployment import Deployment
    from laya_serverless.protocol.detect import analyse
    from tests.unit.fakes import RowSession, config, word_encoder

    store = LocalStore(tmp_path)
    accepted = job_service(store, Idle()).submit(body(states=states(40), lang="en", max_len=513),
                                                          Registry(), ["english"])
    bounded = Decider(RowSession(), word_encoder(), config(max_positions=512))
    worker = Worker(store, Deployment({"english": bounded}, Registry(), "english"), SETTINGS.protocol,
                    SETTINGS.limits, Registry(), analyse)
    assert [worker.answer_shard(accepted["id"], n) for n in range(accepted["shards"])] == [REFUSED] * accepted["shards"]
    finish(store, accepted["id"])
    lines = [json.loads(line) for line in b"".join(job_service(store, Idle()).results(accepted["id"]))
             .splitlines()]
    assert [line["index"] for line in lines] == list(range(40))
    assert {line["error"]["detail"] for line in lines} == {
        "max_len exceeds the model's position limit (513 > 512): its encoder embeds at most 512 tokens a row"}
