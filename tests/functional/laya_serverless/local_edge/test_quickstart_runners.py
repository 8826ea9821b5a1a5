"""The README's local runners right after the quickstart: `laya-artifacts demo` publishes what it publishes (the
demo serves cpu-fp32), and `serve`, `invoke`, `start-api` and `job run`, with no LAYA_TARGET or LAYA_DEPLOYED set,
each answer the README's example from that store and say which target they serve. The docs' own curl and
`job` command lines run here as written, against that server (tests/unit/test_docs_commands.py names them)."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from laya_artifacts.quickstart import EXAMPLE_QUESTIONS, EXAMPLE_STATE
from tests.doc_commands import DocCommand, page_commands
from tests.functional.threaded_server import free_port
from tests.paths import ROOT
from tests.prerequisites import require

pytestmark = pytest.mark.slow
WAIT = 300  # seconds a runner may take to load on a busy machine: a hang, not a speed rule


@pytest.fixture(scope="module")
def environ(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The quickstart's own store (`laya-artifacts demo --once`), and an environment that names nothing else."""
    from laya_artifacts.cli import main

    root = tmp_path_factory.mktemp("quickstart")
    assert main(["demo", "--once", "--store", str(root / "store"), "--cache", str(root / "cache")]) == 0
    keep = {name: value for name, value in os.environ.items() if not name.startswith(("LAYA_", "AWS_"))}
    return dict(keep, LAYA_STORE=str(root / "store"), LAYA_CACHE_DIR=str(root / "serving"), LAYA_JOBS_WORKERS="1")


def _cli(environ: dict[str, str], *args: str) -> list[str]:
    return [sys.executable, "-c", "from laya_serverless.local_edge.cli import main; raise SystemExit(main(%r))"
            % (list(args),)]


@pytest.fixture
def running(environ: dict[str, str]) -> Iterator[Any]:
    """Start a runner; yields (its ready line, its URL) once it says `ready:`."""
    started: list[subprocess.Popen[str]] = []
    readers: list[threading.Thread] = []

    def start(command: str, *args: str) -> tuple[str, str]:
        port = free_port()
        process = subprocess.Popen(_cli(environ, command, "--port", str(port), *args), env=environ, text=True,
                                   stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, cwd=ROOT)
        started.append(process)
        assert process.stderr is not None
        for line in process.stderr:
            if "ready:" in line or "error:" in line:
                # the rest is read, never left to fill the pipe and stall the server
                readers.append(threading.Thread(target=process.stderr.read, daemon=True))
                readers[-1].start()
                return line.strip(), "http://127.0.0.1:%d" % port
        raise AssertionError("%s ended without a ready line (exit %s)" % (command, process.wait(WAIT)))

    yield start
    for process in started:
        process.terminate()
        process.wait(WAIT)
    for reader in readers:
        reader.join(WAIT)
    for process in started:
        assert process.stderr is not None
        process.stderr.close()


def _decide(url: str) -> dict[str, Any]:
    body = json.dumps({"state": EXAMPLE_STATE, "questions": EXAMPLE_QUESTIONS}).encode()
    request = urllib.request.Request(url + "/v1/systemone", data=body, headers={"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=WAIT) as response:
        return dict(json.loads(response.read()))


def test_serve_answers_and_says_which_target_it_serves(running: Any) -> None:
    ready, url = running("serve")
    assert "ready: " + url in ready and "english=demo/cpu-" in ready, ready
    assert _decide(url)["answers"]["team"]["choice"] == "billing"


def test_start_api_answers_through_the_lambda_handler(running: Any) -> None:
    ready, url = running("start-api")
    assert "ready: " + url in ready, ready
    assert _decide(url)["answers"]["team"]["choice"] == "billing"


def test_start_api_answers_http_api_events(running: Any) -> None:
    ready, url = running("start-api", "--payload", "v2")
    assert "HTTP API (payload 2.0)" in ready, ready
    assert _decide(url)["answers"]["team"]["choice"] == "billing"


# the README's event, and deploy.md's under the stage's base path (the page sets LAYA_API_BASE_PATH=/laya)
@pytest.mark.parametrize(("event", "more"), [("http-api-v2-systemone.json", {}),
                                             ("rest-v1-systemone-base64-base-path.json",
                                              {"LAYA_API_BASE_PATH": "/laya"})])
def test_invoke_answers_the_docs_events_and_exits_zero(environ: dict[str, str], event: str,
                                                       more: dict[str, str]) -> None:
    done = subprocess.run(_cli(environ, "invoke", "--event", "tests/events/" + event), env=dict(environ, **more),
                          capture_output=True, text=True, timeout=WAIT, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    response = json.loads(done.stdout)
    body = base64.b64decode(response["body"]) if response.get("isBase64Encoded") else response["body"]
    assert response["statusCode"] == 200 and json.loads(body)["answers"]["team"]["choice"] == "billing"


def test_job_run_answers_every_line(environ: dict[str, str], tmp_path: Path) -> None:
    states = [EXAMPLE_STATE, "The app crashes on login."]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(state) + "\n" for state in states))
    (tmp_path / "q.json").write_text(json.dumps(EXAMPLE_QUESTIONS))
    done = subprocess.run(_cli(environ, "job", "run", str(tmp_path / "in.jsonl"), "--questions",
                               str(tmp_path / "q.json"), "--out", str(tmp_path / "out.jsonl"), "--workers", "1"),
                          env=environ, capture_output=True, text=True, timeout=WAIT, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [line["index"] for line in lines] == [0, 1] and lines[0]["result"]["answers"]["team"]["choice"] == "billing"


# --- the docs' command lines, as written -------------------------------------------------------------------


def _documented(page: str, tool: str) -> list[DocCommand]:
    return [c for c in page_commands(ROOT / page) if c.tool == tool and c.fenced and not c.marked]


def _curl(command: DocCommand, url: str, job: str = "") -> bytes:
    """Run a documented curl command line against `url` instead of the port the page names (and `job` for the
    page's example id)."""
    require(None if shutil.which("curl") else "curl is not on PATH")
    argv = [re.sub(r"^(127\.0\.0\.1|localhost):8000", url, word).replace("3f0c…", job) for word in command.argv]
    done = subprocess.run(["curl", "--fail-with-body", *argv[1:]], capture_output=True, timeout=WAIT)
    assert done.returncode == 0, (command.where, done.stdout[-2000:], done.stderr[-2000:])
    return done.stdout


def _until_ended(url: str, job: str) -> dict[str, Any]:
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        with urllib.request.urlopen(url + "/v1/jobs/" + job, timeout=WAIT) as response:
            status = dict(json.loads(response.read()))
        if status["status"] in ("succeeded", "partial", "failed"):
            return status
        time.sleep(0.5)
    raise AssertionError("job %s did not end within %d s" % (job, WAIT))


def test_the_readme_s_curl_commands_answer(running: Any) -> None:
    _ready, url = running("serve")
    health, decide = _documented("README.md", "curl")
    assert json.loads(_curl(health, url))["loaded"] == ["english"]   # the demo, resident
    answer = json.loads(_curl(decide, url))
    assert answer["answers"]["team"]["choice"] == "billing" and answer["answers"]["churn"]["type"] == "noul"


def test_the_jobs_page_s_curl_commands_run_a_job(running: Any) -> None:
    _ready, url = running("serve")
    submit, status, results = _documented("docs/jobs.md", "curl")
    accepted = json.loads(_curl(submit, url))
    assert accepted["status"] == "queued" and accepted["states"] == 2
    _until_ended(url, accepted["id"])
    assert json.loads(_curl(status, url, accepted["id"]))["status"] == "succeeded"
    lines = [json.loads(line) for line in _curl(results, url, accepted["id"]).splitlines()]
    assert [line["index"] for line in lines] == [0, 1] and lines[0]["result"]["answers"]["team"]["choice"] == "billing"


def test_the_job_commands_submit_follow_and_fetch(running: Any, environ: dict[str, str], tmp_path: Path) -> None:
    """docs/jobs.md's `job submit` (a local file, and a file in the store), `job status` and `job results`."""
    _ready, url = running("serve")
    states = "".join(json.dumps(s) + "\n" for s in [EXAMPLE_STATE, "The app crashes on login."])
    (tmp_path / "tickets.jsonl").write_text(states)
    (tmp_path / "q.json").write_text(json.dumps(EXAMPLE_QUESTIONS))
    inside = Path(environ["LAYA_STORE"]) / "jobs" / "input" / "tickets.jsonl"
    inside.parent.mkdir(parents=True, exist_ok=True)
    inside.write_text(states)
    run: Callable[..., subprocess.CompletedProcess[str]] = lambda *args: subprocess.run(  # noqa: E731
        _cli(environ, "job", *args, "--url", url), env=environ, capture_output=True, text=True, timeout=WAIT,
        cwd=tmp_path)
    for source in (["tickets.jsonl", "--key", "unused"], ["--input", "jobs/input/tickets.jsonl"]):
        submitted = run("submit", *source, "--questions", "q.json")
        assert submitted.returncode == 0, submitted.stderr[-2000:]
        job = json.loads(submitted.stdout)["id"]
        _until_ended(url, job)
        status = run("status", job)
        assert status.returncode == 0 and json.loads(status.stdout)["done"] == 2, status.stderr[-2000:]
        fetched = run("results", job, "--out", "results.jsonl")
        assert fetched.returncode == 0, fetched.stderr[-2000:]
        lines = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
        assert [line["index"] for line in lines] == [0, 1]
