"""Jobs on a real artifact (the tiny ModernBERT, FP32, published to a local store): `laya-serverless job run`
with two worker processes, and `job submit | status | results` against `laya-serverless serve`'s app on
uvicorn, each compared with /v1/systemone/batch on the same states (same choices, |dp| <= 1e-4)."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from laya_artifacts.deploy.publish import publish
from laya_serverless.artifact.store import LocalStore
from laya_serverless.http.service import build_service
from laya_serverless.local_edge.cli import main as cli
from laya_serverless.local_edge.jobs_engine import local_jobs
from laya_serverless.settings import Settings

pytestmark = pytest.mark.slow

QUESTIONS = {
    "team": {"type": "choice", "instructions": "Which team?", "criteria": {"billing": "refunds", "tech": None}},
    "urgency": {"type": "score", "instructions": "How urgent?", "criteria": ["low", "medium", "high"]},
    "churn": {"type": "noul", "instructions": "Will they leave?"},
}
STATES = [("I was charged twice for order %d and nobody answers." % i) if i % 3 else
          {"ticket": "The app crashes on login, attempt %d." % i, "plan": "pro"} for i in range(90)]


@pytest.fixture(scope="module")
def environ(tiny_fp32: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("jobs-artifact")
    publish(tiny_fp32, LocalStore(root / "store"))
    return {"LAYA_STORE": str(root / "store"), "LAYA_DEPLOYED": "multilingual=tiny-modernbert",
            "LAYA_CACHE_DIR": str(root / "cache"), "LAYA_TARGET": "cpu-fp32", "LAYA_THREADS": "1",
            "LAYA_JOBS_TIME_BUDGET": "0.5", "LAYA_JOBS_TOKEN_RATE": "4000"}  # ~2,000 row tokens a shard


@pytest.fixture(scope="module")
def expected(environ: dict[str, str]) -> list[dict[str, Any]]:
    client = TestClient(build_service(Settings.from_environ(environ)))
    out = []
    for start in range(0, len(STATES), 64):
        response = client.post("/v1/systemone/batch", json={"states": STATES[start:start + 64], "questions": QUESTIONS})
        assert response.status_code == 200
        out.extend(response.json()["results"])
    return out


def assert_same_answers(lines: list[dict[str, Any]], expected: list[dict[str, Any]]) -> None:
    assert [line["index"] for line in lines] == list(range(len(expected)))
    for line, want in zip(lines, expected, strict=True):
        got = line["result"]
        assert got["routing"] == want["routing"] and got["usage"] == want["usage"]
        for qid, answer in want["answers"].items():
            mine = got["answers"][qid]
            assert mine.get("choice") == answer.get("choice") and mine.get("score") == answer.get("score")
            for option, p in answer.get("probabilities", {}).items():
                assert abs(mine["probabilities"][option] - p) <= 1e-4


def test_job_run_with_two_worker_processes(environ: dict[str, str], expected: list[dict[str, Any]], tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    source, questions, out = tmp_path / "in.jsonl", tmp_path / "q.json", tmp_path / "out.jsonl"
    source.write_text("".join(json.dumps(s) + "\n" for s in STATES), encoding="utf-8")
    questions.write_text(json.dumps(QUESTIONS), encoding="utf-8")
    assert cli(["job", "run", str(source), "--questions", str(questions), "--out", str(out), "--workers", "2"]) == 0
    progress = capsys.readouterr().err
    assert "90 states in" in progress and "90/90 [" in progress and "succeeded" in progress  # tqdm's bar
    assert_same_answers([json.loads(line) for line in out.read_text().splitlines()], expected)


@pytest.fixture
def server(environ: dict[str, str]) -> Iterator[str]:
    """`laya-serverless serve`'s app (local job engine included) on uvicorn, on a free port."""
    import uvicorn

    settings = Settings.from_environ(dict(environ, LAYA_JOBS_WORKERS="1"))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    app = build_service(settings, jobs=local_jobs(settings))
    served = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=served.run, daemon=True)
    thread.start()
    while not served.started:
        time.sleep(0.05)
    yield "http://127.0.0.1:%d" % port
    served.should_exit = True
    thread.join(timeout=30)


def test_submit_status_results_against_the_server(server: str, expected: list[dict[str, Any]], tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    source, questions, out = tmp_path / "in.jsonl", tmp_path / "q.json", tmp_path / "out.jsonl"
    source.write_text("".join(json.dumps(s) + "\n" for s in STATES), encoding="utf-8")
    questions.write_text(json.dumps(QUESTIONS), encoding="utf-8")
    assert cli(["job", "submit", str(source), "--questions", str(questions), "--url", server]) == 0
    accepted = json.loads(capsys.readouterr().out)
    assert accepted["status"] == "queued" and accepted["states"] == 90 and accepted["shards"] > 1
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert cli(["job", "status", accepted["id"], "--url", server]) == 0
        status = json.loads(capsys.readouterr().out)
        if status["status"] not in ("queued", "running"):
            break
        time.sleep(0.2)
    assert status["status"] == "succeeded"
    assert cli(["job", "results", accepted["id"], "--url", server, "--out", str(out)]) == 0
    assert_same_answers([json.loads(line) for line in out.read_text().splitlines()], expected)
    assert cli(["job", "status", "no-such-job", "--url", server]) == 1
    assert "error 404: no job 'no-such-job'" in capsys.readouterr().err
