"""Jobs on the local engine, end to end over fake deciders (the real decider code, a row-wise fake session):
answers equal /v1/systemone/batch, a kill between shards resumes with each index once, a replay of every
shard changes nothing, a poison shard ends the job partial."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from laya_serverless.artifact.store import LocalStore
from laya_serverless.http.app import create_app
from laya_serverless.jobs.job_service import JobService
from laya_serverless.jobs.merge import finish
from laya_serverless.jobs.results import answer_lines, read_spec
from laya_serverless.jobs.state import read_job
from laya_serverless.jobs.store_keys import result_key
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
from tests.paths import ROOT

# the engine in a process of its own, importing this tier's helpers from the repository root
RUN_ENGINE = "import sys; from tests.functional.laya_serverless.jobs.jobs_support import run_engine; "

N_STATES = 150


class DeadEngine:
    """Takes jobs and runs nothing: a server killed right after answering 202."""

    def start(self, job_id: str) -> None: ...

    def open(self) -> None: ...

    def close(self) -> None: ...


def service(root: Path, poison: bool = False, settings: Settings = SETTINGS, **engine: Any) -> JobService:
    store = LocalStore(root)
    options = {"processes": False, "backoff": 0.0, **engine}
    engine = LocalEngine(store, partial(make_worker, root, poison, settings), **options)
    return job_service(store, engine, settings)


def app(jobs: JobService | None, poison: bool = False, settings: Settings = SETTINGS) -> TestClient:
    return TestClient(create_app({"english": decider(poison)}, settings, registry=Registry(), jobs=jobs))


def wait_for(client: TestClient, job_id: str, timeout: float = 60.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = client.get("/v1/jobs/%s" % job_id).json()
        if status["status"] in ("succeeded", "partial", "failed"):
            return status
        time.sleep(0.05)
    raise AssertionError("job %s did not end: %s" % (job_id, status))


def lines(response: Any) -> list[dict[str, Any]]:
    assert response.headers["content-type"].startswith("application/x-ndjson")
    return [json.loads(line) for line in response.text.splitlines()]


def batch_answers(client: TestClient, body: dict[str, Any]) -> list[dict[str, Any]]:
    """What /v1/systemone/batch answers for the same states, 64 at a time (its cap)."""
    out = []
    for start in range(0, len(body["states"]), 64):
        chunk = dict(body, states=body["states"][start:start + 64])
        response = client.post("/v1/systemone/batch", json=chunk)
        assert response.status_code == 200, response.text
        out.extend(response.json()["results"])
    return out


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any], list[dict[str, Any]]]:
    """One job of N_STATES run through the routes: (store root, its status, its result lines)."""
    root = tmp_path_factory.mktemp("jobs") / "store"
    with app(service(root, workers=2)) as client:
        accepted = client.post("/v1/jobs", json={"states": states(N_STATES), "questions": QUESTIONS, "lang": "en"})
        assert accepted.status_code == 202, accepted.text
        status = wait_for(client, accepted.json()["id"])
        return root, status, lines(client.get("/v1/jobs/%s/results" % accepted.json()["id"]))


def test_a_job_is_accepted_split_and_answered_in_input_order(finished: Any) -> None:
    _, status, results = finished
    assert status["status"] == "succeeded" and status["states"] == status["done"] == N_STATES
    assert status["failed"] == 0 and status["shards_total"] == status["shards_done"] > 4
    assert set(status) == {"id", "status", "states", "done", "failed", "shards_total", "shards_done", "created_at",
                           "updated_at", "output"}
    assert status["output"] == "jobs/output/%s.jsonl" % status["id"]   # the key: never the server's own folders
    assert [line["index"] for line in results] == list(range(N_STATES))


def test_answers_equal_the_batch_route(finished: Any) -> None:
    _, _, results = finished
    with app(None) as client:
        expected = batch_answers(client, {"states": states(N_STATES), "questions": QUESTIONS, "lang": "en"})
    assert [line["result"] for line in results] == expected
    assert len({json.dumps(r["answers"], sort_keys=True) for r in expected}) > 10  # the answers really vary


def test_the_merged_output_is_the_results_route(finished: Any) -> None:
    root, status, results = finished
    output = (Path(root) / status["output"]).read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in output] == results


def test_a_kill_between_shards_resumes_with_each_index_once(tmp_path: Path, finished: Any) -> None:
    """The first engine answered two shards, wrote a third without counting it, and died; a new one finishes."""
    first = job_service(LocalStore(tmp_path), DeadEngine())  # the server dies right after the 202
    accepted = first.submit({"states": states(N_STATES), "questions": QUESTIONS, "lang": "en"}, Registry(),
                            ["english"])
    worker = make_worker(tmp_path)
    worker.answer(accepted["id"], [0, 2])
    spec = read_spec(first.store, accepted["id"])
    third = worker._answer(spec, states(N_STATES)[spec["bounds"][3]:spec["bounds"][4]])
    first.store.create(result_key(accepted["id"], 3), answer_lines(spec["bounds"][3], third))
    assert read_job(first.store, accepted["id"])[0]["shards_done"] == 2

    second = service(tmp_path)
    second.open()  # resumes every job in the store that has not ended
    try:
        doc = second.engine.wait(accepted["id"], timeout=60)  # type: ignore[attr-defined]
    finally:
        second.close()
    assert doc["status"] == "succeeded" and doc["done"] == N_STATES and doc["shards_done"] == doc["shards_total"]
    resumed = [json.loads(line) for chunk in second.results(accepted["id"]) for line in chunk.splitlines()]
    assert [line["index"] for line in resumed] == list(range(N_STATES))
    assert [line["result"] for line in resumed] == [line["result"] for line in finished[2]]


def test_replaying_every_shard_changes_nothing(tmp_path: Path) -> None:
    jobs = service(tmp_path)
    jobs.open()
    try:
        accepted = jobs.submit({"states": states(80), "questions": QUESTIONS, "lang": "en"}, Registry(), ["english"])
        before = jobs.engine.wait(accepted["id"], timeout=60)  # type: ignore[attr-defined]
    finally:
        jobs.close()
    results = b"".join(jobs.results(accepted["id"]))
    output = (tmp_path / before["output"]).read_bytes()
    outcome = make_worker(tmp_path).answer(accepted["id"], list(range(before["shards_total"])))
    assert outcome.replayed == list(range(before["shards_total"])) and not outcome.answered
    assert finish(jobs.store, accepted["id"]) == before == read_job(jobs.store, accepted["id"])[0]
    assert b"".join(jobs.results(accepted["id"])) == results and (tmp_path / before["output"]).read_bytes() == output
    again = jobs.submit({"states": states(80), "questions": QUESTIONS, "lang": "en"}, Registry(), ["english"],
                        job_id=accepted["id"])  # a replayed submission of the same job
    assert again == {"id": accepted["id"], "status": "succeeded", "states": 80, "shards": before["shards_total"]}


def test_a_poison_shard_ends_as_error_lines_and_the_job_partial(tmp_path: Path) -> None:
    poisoned = (37,)
    with app(service(tmp_path, poison=True, attempts=3)) as client:
        accepted = client.post("/v1/jobs", json={"states": states(N_STATES, poisoned), "questions": QUESTIONS,
                                                 "lang": "en"}).json()
        status = wait_for(client, accepted["id"])
        results = lines(client.get("/v1/jobs/%s/results" % accepted["id"]))
    spec = read_spec(LocalStore(tmp_path), accepted["id"])
    bad = next(n for n in range(len(spec["bounds"]) - 1) if spec["bounds"][n] <= 37 < spec["bounds"][n + 1])
    failed = range(spec["bounds"][bad], spec["bounds"][bad + 1])
    assert status["status"] == "partial" and status["failed"] == len(failed)
    assert status["done"] + status["failed"] == N_STATES and status["shards_done"] == status["shards_total"]
    assert [line["index"] for line in results] == list(range(N_STATES))
    for line in results:
        if line["index"] in failed:
            assert line == {"index": line["index"], "error": {"detail": "this shard failed 3 times: inference failed"}}
        else:
            assert "result" in line


def test_worker_processes_answer_like_threads(tmp_path: Path, finished: Any) -> None:
    """The real pool: two spawned processes, each building its own fake deployment."""
    jobs = service(tmp_path, processes=True, workers=2)
    jobs.open()
    try:
        accepted = jobs.submit({"states": states(N_STATES), "questions": QUESTIONS, "lang": "en"}, Registry(),
                               ["english"])
        doc = jobs.engine.wait(accepted["id"], timeout=120)  # type: ignore[attr-defined]
    finally:
        jobs.close()
    assert doc["status"] == "succeeded"
    got = [json.loads(line) for chunk in jobs.results(accepted["id"]) for line in chunk.splitlines()]
    assert got == finished[2]


def test_a_server_killed_mid_job_finishes_it_on_restart(tmp_path: Path, finished: Any) -> None:
    """A real kill: an engine in its own process takes the job, is SIGKILLed after a few shards; a new one resumes."""
    store = LocalStore(tmp_path)
    accepted = job_service(store, DeadEngine()).submit(
        {"states": states(N_STATES), "questions": QUESTIONS, "lang": "en"}, Registry(), ["english"])
    environ = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    server = subprocess.Popen([sys.executable, "-c", RUN_ENGINE + "run_engine(sys.argv[1], sys.argv[2])",
                               str(tmp_path), "0.05"],
                              env=environ, cwd=ROOT)
    try:
        deadline = time.monotonic() + 60
        # Wait on the job's own count: a shard's results land before its state update, so counting result
        # objects could kill the engine between the two (it then resumes that shard, but the check below
        # is about the recorded count).
        while read_job(store, accepted["id"])[0]["shards_done"] < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        server.send_signal(signal.SIGKILL)
        server.wait()
    done_before = read_job(store, accepted["id"])[0]
    assert 2 <= done_before["shards_done"] < done_before["shards_total"] and done_before["status"] == "running"
    restarted = service(tmp_path)
    restarted.open()
    try:
        doc = restarted.engine.wait(accepted["id"], timeout=60)  # type: ignore[attr-defined]
    finally:
        restarted.close()
    assert doc["status"] == "succeeded" and doc["done"] == N_STATES
    got = [json.loads(line) for chunk in restarted.results(accepted["id"]) for line in chunk.splitlines()]
    assert [line["index"] for line in got] == list(range(N_STATES))
    assert [line["result"] for line in got] == [line["result"] for line in finished[2]]


def _children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def _alive(pid: int) -> bool:
    try:
        return Path("/proc/%d/stat" % pid).read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_worker_processes_end_with_their_server(tmp_path: Path, how: signal.Signals) -> None:
    """A server's job worker processes never outlive it (they stayed, reparented, holding a model's memory)."""
    store = LocalStore(tmp_path)
    accepted = job_service(store, DeadEngine()).submit(
        {"states": states(N_STATES), "questions": QUESTIONS, "lang": "en"}, Registry(), ["english"])
    environ = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    server = subprocess.Popen([sys.executable, "-c", RUN_ENGINE + "run_engine(*sys.argv[1:])",
                               str(tmp_path), "0.2", "processes"],
                              env=environ, cwd=ROOT)
    try:
        deadline = time.monotonic() + 60  # until a loaded worker answered a shard and waits for the next
        while read_job(store, accepted["id"])[0]["shards_done"] < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        workers = _children(server.pid)
        assert any(b"spawn_main" in Path("/proc/%d/cmdline" % w).read_bytes() for w in workers if _alive(w))
    finally:
        server.send_signal(how)
        server.wait()
    deadline = time.monotonic() + 15
    while any(_alive(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = {w: Path("/proc/%d/cmdline" % w).read_bytes()[:200] for w in workers if _alive(w)}
    assert not left, "worker processes outlived their server: %s" % left
