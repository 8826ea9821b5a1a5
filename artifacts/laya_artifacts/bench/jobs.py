"""States per second for one job on the local engine (1 and 2 worker processes) against sequential
/v1/systemone/batch calls (64 states each) on the same states and questions, and the answers compared.

    laya-artifacts bench jobs [--store .laya-store] [--checkpoint demo] [--target cpu-fp32] [--states 2000]
                                 [--shard-seconds 2] [--workers 1,2]

The artifact comes from `--store` (read only: it is copied into a scratch store, where the jobs write).
Without a published `--checkpoint` there, the tiny test checkpoint is built (build side: torch) and used.
Questions are the quickstart's three. Every contender uses one intra-op thread per process except the
`/batch x2 threads` row. Job times run from POST to the merged output, worker start-up included, and
the workers' start-up (process spawn + verified load) is also reported on its own. Prints a Markdown
table and one JSON line of every figure: per-row wall and CPU time (docs/jobs.md's cost model), and the
splitter's row tokens a second on one thread, the `-c token_rate` / `LAYA_JOBS_TOKEN_RATE` for this checkpoint.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from laya_serverless.artifact.store import DEFAULT_LOCAL_STORE
from laya_serverless.settings import CACHE_DIR, DEPLOYED, STORE, TARGET, THREADS

ROOT = Path(__file__).resolve().parents[3]   # the checkout: benchmarks read its goldens and stores
sys.path[:0] = [str(ROOT / "functions"), str(ROOT / "artifacts"), str(ROOT / "scripts")]

_SUBJECTS = ["my March invoice", "the mobile app", "order #%d", "the login page", "my subscription", "the refund",
             "the export to CSV", "two-factor codes", "the dashboard", "a shipment to Lyon"]
_PROBLEMS = ["was charged twice", "crashes on start", "has not arrived after %d days", "shows an error 500",
             "cannot be cancelled", "is still pending", "times out", "never arrive by SMS", "is empty since Monday",
             "was sent to the wrong address"]
_TAILS = ["", " Nobody answers my emails.", " If this is not fixed today I will cancel.", " Please help.",
          " This is the third time I write.", " It is blocking my whole team.", " Thanks in advance."]


def make_states(n: int, seed: int = 7) -> list[Any]:
    """Support-ticket states of varied length (some JSON objects), reproducible."""
    rng = random.Random(seed)
    out: list[Any] = []
    for i in range(n):
        subject, problem = (part.replace("%d", str(rng.randint(2, 99))) for part in (rng.choice(_SUBJECTS),
                                                                                     rng.choice(_PROBLEMS)))
        text = "%s %s.%s" % (subject, problem, "".join(rng.sample(_TAILS, rng.randint(0, 3))))
        out.append({"ticket": text.capitalize(), "customer": "c-%04d" % i} if i % 4 == 0 else text.capitalize())
    return out


def scratch_store(args: argparse.Namespace, root: Path) -> tuple[Path, str, str]:
    """A store holding only the artifact to serve: (its path, checkpoint name, target)."""
    from laya_serverless.artifact.fetch import published_id
    from laya_serverless.artifact.store import LocalStore, pointer_key

    source, store = LocalStore(args.store), root / "store"
    try:
        artifact = published_id(source, args.checkpoint, args.target)
    except Exception as exc:
        print("[bench] no %s/%s in %s (%s): building the tiny test checkpoint" % (
            args.checkpoint, args.target, args.store, exc), file=sys.stderr)
        return tiny_store(root), "tiny-modernbert", "cpu-fp32"
    for key in [pointer_key(args.checkpoint, args.target)] + source.list("artifacts/%s/" % artifact):
        (store / key).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source.root / key, store / key)
    return store, args.checkpoint, args.target


def tiny_store(root: Path) -> Path:
    from laya_artifacts.build import build_artifact
    from laya_artifacts.checkpoints.make import make_checkpoint
    from laya_artifacts.deploy.publish import publish
    from laya_artifacts.spec import BuildSpec
    from laya_serverless.artifact.store import LocalStore

    checkpoint = make_checkpoint("tiny-modernbert", root / "checkpoint")
    spec = BuildSpec("cpu-fp32", name="tiny-modernbert", goldens=ROOT / "goldens" / "tiny-modernbert" / "goldens.json")
    artifact, _report = build_artifact(checkpoint, spec, root / "artifact")
    publish(artifact, LocalStore(root / "store"))
    return root / "store"


def environ(store: Path, checkpoint: str, target: str, cache: Path, threads: int, **extra: str) -> dict[str, str]:
    return {STORE: str(store), DEPLOYED: "english=%s" % checkpoint, TARGET: target,
            CACHE_DIR: str(cache), THREADS: str(threads), **extra}


def bench_batch(env: dict[str, str], states: list[Any],
                questions: dict[str, Any]) -> tuple[float, float, list[Any], int]:
    """Sequential /batch calls through the app in process: (seconds, CPU seconds, results, row tokens)."""
    from fastapi.testclient import TestClient

    from laya_serverless.http.service import build_service
    from laya_serverless.settings import Settings

    client = TestClient(build_service(Settings.from_environ(env)))
    client.post("/v1/systemone/batch", json={"states": states[:8], "questions": questions})  # warm up
    started, cpu, results = time.perf_counter(), time.process_time(), []
    for start in range(0, len(states), 64):
        response = client.post("/v1/systemone/batch", json={"states": states[start:start + 64], "questions": questions})
        assert response.status_code == 200, response.text
        results.extend(response.json()["results"])
    return (time.perf_counter() - started, time.process_time() - cpu, results,
            sum(r["usage"]["input_tokens"] for r in results))


def workers_seen(engine: Any) -> tuple[list[float], float]:
    """(RSS in MB of each worker process, CPU seconds they spent), read from /proc before the pool stops."""
    sizes, cpu = [], 0.0
    for process in getattr(engine._pool, "_processes", {}).values():
        status = Path("/proc/%d/status" % process.pid).read_text()
        sizes.append(int(next(line for line in status.splitlines() if line.startswith("VmRSS")).split()[1]) / 1024)
        fields = Path("/proc/%d/stat" % process.pid).read_text().rsplit(")", 1)[1].split()
        cpu += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime
    return sizes, cpu


def bench_job(env: dict[str, str], workers: int, states: list[Any], questions: dict[str, Any]) -> dict[str, Any]:
    from functools import partial

    from laya_serverless.artifact.store import open_store
    from laya_serverless.jobs.job_service import JobService
    from laya_serverless.jobs.results import iter_results, read_spec
    from laya_serverless.jobs.runtime import load_worker
    from laya_serverless.local_edge.jobs_engine import LocalEngine
    from laya_serverless.protocol.routing import Registry
    from laya_serverless.settings import Settings

    settings = Settings.from_environ(env)
    store = open_store(settings.deployment.store)
    engine = LocalEngine(store, partial(load_worker, settings), workers=workers, resume=False)
    started = time.perf_counter()
    service = JobService(store, engine, settings.jobs, settings.protocol, settings.limits)
    accepted = service.submit({"states": states, "questions": questions}, Registry(), ["english"])
    first_shard = None
    while True:
        doc = json.loads(store.read("jobs/%s/job.json" % accepted["id"])[0])  # type: ignore[index]
        if first_shard is None and doc["shards_done"]:
            first_shard = time.perf_counter() - started
        if doc["status"] in ("succeeded", "partial", "failed"):
            break
        time.sleep(0.05)
    seconds = time.perf_counter() - started
    rss, cpu = workers_seen(engine)
    engine.close()
    lines = [json.loads(line) for chunk in iter_results(store, accepted["id"], read_spec(store, accepted["id"]))
             for line in chunk.splitlines()]
    return {"seconds": seconds, "status": doc["status"], "shards": accepted["shards"], "first_shard_s": first_shard,
            "worker_rss_mb": rss, "worker_cpu_s": cpu, "results": [line["result"] for line in lines]}


def compare(mine: list[dict[str, Any]], reference: list[dict[str, Any]]) -> tuple[int, float, bool]:
    """(choices that differ, max |dp| over every option, bit-identical)."""
    flips, worst = 0, 0.0
    for got, want in zip(mine, reference, strict=True):
        for qid, answer in want["answers"].items():
            flips += got["answers"][qid].get("choice") != answer.get("choice")
            for option, p in answer.get("probabilities", {}).items():
                worst = max(worst, abs(got["answers"][qid]["probabilities"][option] - p))
    return flips, worst, mine == reference


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", default=str(ROOT / DEFAULT_LOCAL_STORE))
    parser.add_argument("--checkpoint", default="demo")
    parser.add_argument("--target", default="cpu-fp32")
    parser.add_argument("--states", type=int, default=2000)
    parser.add_argument("--shard-seconds", type=float, default=2.0, help="LAYA_JOBS_TIME_BUDGET for the jobs")
    parser.add_argument("--workers", default="1,2")
    args = parser.parse_args(argv)
    from quickstart import EXAMPLE_QUESTIONS as questions

    from laya_serverless.protocol.plan import estimated_tokens

    states = make_states(args.states)
    root = Path(tempfile.mkdtemp(prefix="bench-jobs-"))
    store, checkpoint, target = scratch_store(args, root)
    rows: list[tuple[str, float, str]] = []
    figures: dict[str, Any] = {"date": time.strftime("%Y-%m-%d"), "checkpoint": checkpoint, "target": target,
                               "states": len(states), "questions": len(questions), "cpus": os.cpu_count()}
    reference: list[Any] = []
    for threads in (1, 2):
        seconds, cpu, results, tokens = bench_batch(environ(store, checkpoint, target, root / "cache", threads),
                                                    states, questions)
        reference = reference or results
        rows.append(("/batch x%d (sequential, %d thread%s)" % ((len(states) + 63) // 64, threads,
                                                               "s" if threads > 1 else ""),
                     seconds, "CPU %.0f s" % cpu))
        figures["batch_threads%d_s" % threads], figures["batch_threads%d_cpu_s" % threads] = seconds, cpu
        figures.setdefault("row_tokens", tokens)
    estimated = sum(estimated_tokens(states, questions, None, None))  # what the splitter counts
    rate = estimated / figures["batch_threads1_s"]  # the splitter's row tokens a second, one thread: -c token_rate
    figures["per_row_ms"] = 1000 * figures["batch_threads1_s"] / (len(states) * len(questions))
    figures["per_row_cpu_ms"] = 1000 * figures["batch_threads1_cpu_s"] / (len(states) * len(questions))
    figures["token_rate_1_thread"] = rate
    figures["token_rate_1_cpu"] = estimated / figures["batch_threads1_cpu_s"]
    figures["estimated_row_tokens"] = estimated
    for workers in (int(w) for w in args.workers.split(",")):
        env = environ(store, checkpoint, target, root / "cache", 1, LAYA_JOBS_TIME_BUDGET=str(args.shard_seconds),
                      LAYA_JOBS_TOKEN_RATE=str(int(rate)))
        job = bench_job(env, workers, states, questions)
        flips, worst, identical = compare(job["results"], reference)
        rows.append(("job, %d worker process%s (%d shards)" % (workers, "es" if workers > 1 else "", job["shards"]),
                     job["seconds"], "%s; CPU %.0f s; choices differing %d; max |dp| %.1e; identical %s; first shard "
                     "%.1f s; worker RSS %s MB" % (job["status"], job["worker_cpu_s"], flips, worst, identical,
                                                   job["first_shard_s"] or 0,
                                                   "/".join("%.0f" % r for r in job["worker_rss_mb"]))))
        figures["job_workers%d" % workers] = {k: v for k, v in job.items() if k != "results"} | {
            "choices_differing": flips, "max_dp": worst, "identical": identical}
    print("| contender | seconds | states/s | notes |\n|---|---|---|---|")
    for name, seconds, notes in rows:
        print("| %s | %.1f | %.1f | %s |" % (name, seconds, len(states) / seconds, notes))
    print(json.dumps(figures))
    print("load average at the end: %.2f %.2f %.2f" % os.getloadavg(), file=sys.stderr)
    shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
