"""One fresh process of `laya-artifacts tune`: open an artifact as a Lambda instance would, answer, report.

    python -m laya_artifacts.tune.worker SPEC_JSON

It imports only the runtime package (no torch), so its cold start is the runtime's. Two kinds:
- `cold`: load, answer the workload's first request (spawn -> that answer is the cold start), then answer
  `requests` more back to back (a busy instance) and time each;
- `restore`: load, answer SnapStart's own warm-up question (what the snapshot holds), then time the first
  workload request: the first decision after a restore, less the snapshot's page-in, which only Lambda has.
Each event is one JSON line on stdout; times are `time.monotonic()`, which the parent shares.
"""

from __future__ import annotations

import time

STARTED = time.monotonic()

import json  # noqa: E402  (the clock starts before anything is imported)
import os  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402


def _emit(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


def _peak_rss_mb() -> float:
    """VmHWM: the process's peak resident memory."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _cpu_s() -> float:
    """CPU seconds this process used, all its threads (getrusage: microseconds, where os.times has ticks)."""
    import resource

    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


def open_decider(artifact: Path, config: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """The runtime's Decider and the thread share it runs with. `runtime`: what the runtime chooses by itself
    (`core.cpu_share` from its Settings: LAYA_THREADS and LAYA_SPINNING as the environment has them, the
    quota this process is in); otherwise the configuration's threads (0: onnxruntime's own default) and
    spinning, through the same `Threading` the runtime opens its sessions with."""
    from laya_serverless.core.cpu_share import size_threads
    from laya_serverless.core.decider import Decider
    from laya_serverless.core.session import Threading
    from laya_serverless.settings import Settings

    if config.get("threads") is None:
        settings = Settings.from_environ(os.environ)
        share = size_threads(settings.deployment.threads, settings.deployment.spinning)
        threading, chosen = share.threading(), share.report()
    else:
        threading = Threading(int(config["threads"]) or None, bool(config["spinning"]))
        chosen = {"threads": threading.intra_op, "spinning": threading.spinning, "threads_from": "tune"}
    return Decider.from_artifact(artifact, threads=threading, verify=False), chosen


def answer(decider: Any, body: dict[str, Any]) -> None:
    controls = {k: body[k] for k in ("max_len", "head_max_len", "min_confidence") if k in body}
    if "states" in body:
        decider.predict_batch(body["states"], body["questions"], batch_size=body.get("batch_size"),
                              sort_by_length=bool(body.get("sort_by_length", False)), **controls)
    else:
        decider.predict(body["state"], body["questions"], **controls)


def run(spec: dict[str, Any]) -> None:
    from laya_serverless.lambda_edge.snapstart import WARM_QUESTIONS, WARM_STATE

    bodies = [json.loads(line) for line in Path(spec["workload"]).read_text(encoding="utf-8").splitlines()
              if line.strip()]
    decider, chosen = open_decider(Path(spec["artifact"]), spec["config"])
    loaded = time.monotonic()
    _emit("loaded", t=loaded, started=STARTED, threading=chosen)
    if spec["kind"] == "restore":
        decider.predict(WARM_STATE, WARM_QUESTIONS)       # the SnapStart hook's warm-up, before the snapshot
        begin = time.perf_counter()
        answer(decider, bodies[0])
        _emit("restore", ms=(time.perf_counter() - begin) * 1000, peak_rss_mb=_peak_rss_mb())
        return
    answer(decider, bodies[0])
    _emit("first", t=time.monotonic())
    cpu_before = _cpu_s()
    for n in range(int(spec["requests"])):
        index = (n + 1) % len(bodies)
        begin = time.perf_counter()
        answer(decider, bodies[index])
        _emit("request", index=index, ms=(time.perf_counter() - begin) * 1000)
    _emit("done", cpu_s=_cpu_s() - cpu_before, peak_rss_mb=_peak_rss_mb())


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    run(json.loads(args[0]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
