"""`laya-serverless job ...`: batch jobs from the command line.

    job submit FILE.jsonl | --input URI --questions Q.json [--url URL]   POST /v1/jobs; prints {"id", ...}
    job status ID [--url URL]                                            GET /v1/jobs/{id}
    job results ID [--url URL] [--out FILE]                              GET /v1/jobs/{id}/results (NDJSON)
    job run INPUT.jsonl --questions Q.json --out OUT.jsonl [--workers N] the local engine, in this process,
                                                                         with a progress bar (tqdm) on stderr
`--url` defaults to the local server `serve` starts (LAYA_HOST, LAYA_PORT). A bad file, a bad line or no server is
one line naming it (`JobInputError`), never a traceback.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from ..command import Command, register
from ..jobs.store_keys import INPUT_PREFIX
from ..settings import HOST, PORT, Settings

CONTROL_FLAGS = (("model", str), ("task", str), ("lang", str), ("max-len", int), ("head-max-len", int),
                 ("min-confidence", json.loads))
EXIT_PARTIAL = 3


class JobInputError(Exception):
    """A file, a line or a server the command cannot use; the message is the whole one-line error."""


def _say(message: str) -> None:
    print("[laya-serverless] %s" % message, file=sys.stderr, flush=True)


def _controls(args: argparse.Namespace) -> dict[str, Any]:
    return {flag.replace("-", "_"): getattr(args, flag.replace("-", "_")) for flag, _ in CONTROL_FLAGS
            if getattr(args, flag.replace("-", "_")) is not None}


def _request(args: argparse.Namespace, method: str, path: str, body: Any = None) -> tuple[int, bytes]:
    settings = Settings.from_environ()
    url = args.url or "http://%s:%d" % (settings.local_server.host or "127.0.0.1", settings.local_server.port)
    headers = {"Content-Type": "application/json"}
    key = args.key or settings.http.api_key
    if key:
        headers["Authorization"] = "Bearer " + key
    data = json.dumps(body, ensure_ascii=False).encode("utf-8") if body is not None else None
    request = urllib.request.Request(url.rstrip("/") + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return int(response.status), bytes(response.read())
    except urllib.error.HTTPError as exc:
        return int(exc.code), bytes(exc.read())
    except (urllib.error.URLError, OSError) as exc:   # refused, unresolvable, timed out
        why = getattr(exc, "reason", exc)
        raise JobInputError("no server answers at %s (%s); start one with `laya-serverless serve`, or pass --url "
                            "(the default follows %s)" % (url, getattr(why, "strerror", None) or why, PORT)) from None


def _answered(status: int, payload: bytes, out: Path | None = None) -> int:
    if status >= 400:
        try:
            detail = json.loads(payload).get("detail")
        except (ValueError, AttributeError):
            detail = payload[:500].decode("utf-8", "replace")
        _say("error %d: %s" % (status, detail))
        return 1
    if out is not None:
        out.write_bytes(payload)
        _say("wrote %s (%d lines)" % (out, payload.count(b"\n")))
    else:
        sys.stdout.write(payload.decode("utf-8") + ("" if payload.endswith(b"\n") else "\n"))
    return 0


def _read_states(path: str) -> list[Any]:
    """One state per line (any JSON value but null; blank lines skipped); a bad line is named by file and number."""
    states = []
    for number, line in enumerate(_read(path, "the input").split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            states.append(json.loads(line))
        except ValueError as exc:
            raise JobInputError("%s:%d: not a JSON value (%s)" % (path, number, getattr(exc, "msg", exc))) from None
    return states


def _read(path: str, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise JobInputError("cannot read %s %s: %s" % (what, path, exc.strerror or exc)) from None


def _questions(path: str) -> Any:
    try:
        return json.loads(_read(path, "--questions"))
    except ValueError as exc:
        raise JobInputError("%s: not JSON (%s, line %s)" % (path, getattr(exc, "msg", exc),
                                                            getattr(exc, "lineno", "?"))) from None


def _submit(args: argparse.Namespace) -> int:
    if (args.file is None) == (args.input is None):
        _say("error: give a local JSONL file (sent inline) or --input URI (a file in the server's store)")
        return 2
    body: dict[str, Any] = {"questions": _questions(args.questions), **_controls(args)}
    if args.file is not None:
        body["states"] = _read_states(args.file)
    else:
        body["input"] = args.input
    return _answered(*_request(args, "POST", "/v1/jobs", body))


def _status(args: argparse.Namespace) -> int:
    return _answered(*_request(args, "GET", "/v1/jobs/%s" % args.id))


def _results(args: argparse.Namespace) -> int:
    return _answered(*_request(args, "GET", "/v1/jobs/%s/results" % args.id), Path(args.out) if args.out else None)


def progress_note(doc: dict[str, Any]) -> str:
    """What the bar does not show: shards and failures."""
    return "%d/%d shards, %d failed" % (doc["shards_done"], doc["shards_total"], doc["failed"])


def _run(args: argparse.Namespace) -> int:
    from functools import partial

    from ..artifact.store import open_store
    from ..jobs.job_service import JobService
    from ..jobs.results import read_spec
    from ..jobs.runtime import load_worker
    from ..protocol.routing import Registry, canonical_name
    from .jobs_engine import LocalEngine

    settings = Settings.from_environ()
    questions, data = _questions(args.questions), _read(args.input, "the input")
    _read_states(args.input)  # a bad line is named here, before anything is stored
    store = open_store(settings.deployment.store)
    key = "%s%s.jsonl" % (INPUT_PREFIX, hashlib.sha256(data).hexdigest()[:32])
    store.create(key, data)  # content-addressed: the same file is stored once
    workers = args.workers if args.workers is not None else max(1, settings.jobs.jobs_workers)
    engine = LocalEngine(store, partial(load_worker, settings), workers=workers, resume=False)
    names = [canonical_name(name) for name in settings.deployment.deployed]
    registry = Registry({name: name for name in names if name not in Registry().sources})
    body = {"input": key, "questions": questions, **_controls(args)}
    service = JobService(store, engine, settings.jobs, settings.protocol, settings.limits)
    accepted = service.submit(body, registry, names)
    _say("job %s: %d states in %d shards, %d worker process(es)" % (accepted["id"], accepted["states"],
                                                                     accepted["shards"], workers))
    started = time.monotonic()
    try:
        doc = _watch(engine, accepted["id"], accepted["states"])
    finally:
        engine.close()
    store.download(read_spec(store, doc["id"])["output"], Path(args.out))
    _say("job %s %s in %.1f s: %s" % (doc["id"], doc["status"], time.monotonic() - started, args.out))
    return {"succeeded": 0, "partial": EXIT_PARTIAL}.get(doc["status"], 1)


def _watch(engine: Any, job_id: str, states: int) -> dict[str, Any]:
    from tqdm import tqdm  # the `local` extra: never in the Lambda package

    from ..jobs.state import TERMINAL, read_job

    engine.start(job_id)
    with tqdm(total=states, unit="state", file=sys.stderr, dynamic_ncols=True, mininterval=0.5) as bar:
        while True:
            doc, _ = read_job(engine.store, job_id)
            bar.update(doc["done"] + doc["failed"] - bar.n)
            bar.set_postfix_str(progress_note(doc), refresh=False)
            if doc["status"] in TERMINAL:
                return doc
            time.sleep(0.5)


def _server_arguments(command: argparse.ArgumentParser) -> None:
    command.add_argument("--url", help="the server (default http://%s:%s, 127.0.0.1:8000)" % (HOST, PORT))
    command.add_argument("--key", help="bearer key (default: LAYA_API_KEY)")


def _control_arguments(command: argparse.ArgumentParser) -> None:
    command.add_argument("--questions", required=True, help="a JSON file: the questions object")
    for flag, kind in CONTROL_FLAGS:
        command.add_argument("--" + flag, type=kind, help="the %s control" % flag.replace("-", "_"))


def _submit_arguments(submit: argparse.ArgumentParser) -> None:
    submit.add_argument("file", nargs="?", help="a JSONL file of states, sent inline")
    submit.add_argument("--input", help="a JSONL file already in the server's store, under jobs/input/")
    _server_arguments(submit)
    _control_arguments(submit)


def _status_arguments(status: argparse.ArgumentParser) -> None:
    status.add_argument("id", help="the job id POST /v1/jobs answered")
    _server_arguments(status)


def _results_arguments(results: argparse.ArgumentParser) -> None:
    results.add_argument("--out", help="write the NDJSON here instead of stdout")
    _status_arguments(results)


def _run_arguments(run: argparse.ArgumentParser) -> None:
    run.add_argument("input", help="a JSONL file, one state per line")
    run.add_argument("--out", required=True, help="where the results go (NDJSON, input order)")
    run.add_argument("--workers", type=int, help="worker processes (default LAYA_JOBS_WORKERS or 1)")
    _control_arguments(run)


JOB_COMMANDS = (
    Command("submit", "POST /v1/jobs", _submit_arguments, _submit),
    Command("status", "GET /v1/jobs/{id}", _status_arguments, _status),
    Command("results", "GET /v1/jobs/{id}/results", _results_arguments, _results),
    Command("run", "run a job on this machine with the local engine", _run_arguments, _run),
)


def _job_arguments(job: argparse.ArgumentParser) -> None:
    register(job.add_subparsers(dest="job_command", required=True), JOB_COMMANDS)


def _job(args: argparse.Namespace) -> int:
    """The chosen subcommand's run (each subcommand's own `run` default already wins; this names the rule)."""
    return next(c for c in JOB_COMMANDS if c.name == args.job_command).run(args)


COMMAND = Command("job", "batch jobs: submit/status/results against a server, or run locally", _job_arguments, _job)
