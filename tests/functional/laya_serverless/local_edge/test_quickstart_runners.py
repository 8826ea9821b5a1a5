"""The README's local runners right after the quickstart: `laya-artifacts demo` publishes what it publishes (the
demo serves cpu-fp32), and `serve`, `invoke`, `start-api` and `job run`, with no LAYA_TARGET or LAYA_DEPLOYED set,
each answer the README's example from that store and say which target they serve."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from laya_artifacts.quickstart import EXAMPLE_QUESTIONS, EXAMPLE_STATE
from tests.functional.threaded_server import free_port
from tests.paths import ROOT

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


def test_invoke_answers_the_readme_event_and_exits_zero(environ: dict[str, str]) -> None:
    done = subprocess.run(_cli(environ, "invoke", "--event", "tests/events/http-api-v2-systemone.json"), env=environ,
                          capture_output=True, text=True, timeout=WAIT, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    response = json.loads(done.stdout)
    assert response["statusCode"] == 200 and json.loads(response["body"])["answers"]["team"]["choice"] == "billing"


def test_job_run_answers_every_line(environ: dict[str, str], tmp_path: Path) -> None:
    states = [EXAMPLE_STATE, "The app crashes on login."]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(state) + "\n" for state in states))
    (tmp_path / "q.json").write_text(json.dumps(EXAMPLE_QUESTIONS))
    done = subprocess.run(_cli(environ, "job", "run", str(tmp_path / "in.jsonl"), "--questions",
                               str(tmp_path / "q.json"), "--out", str(tmp_path / "out.jsonl")),
                          env=environ, capture_output=True, text=True, timeout=WAIT, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [line["index"] for line in lines] == [0, 1] and lines[0]["result"]["answers"]["team"]["choice"] == "billing"
