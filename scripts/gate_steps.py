"""The deploy gate's steps on one built artifact, under a Lambda memory size's CPU quota: how many steps its replay
takes and how long each is, as the custom resource would poll them (`laya_serverless.gate.regate`).

    python scripts/gate_steps.py ARTIFACT_DIR [--memory 3008] [--step-seconds 600] [--max-steps N]

The artifact (with its goldens sidecar, as `laya-artifacts build` leaves it) is published to a temporary local
store; each step is `regate_published` with the deadline a step gets on Lambda. Prints one JSON line per step and
one at the end. Root and a cgroup cpu controller are needed for the quota (else it says so and runs without).
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

from laya_artifacts.deploy.publish import publish  # noqa: E402
from laya_artifacts.tune.quota import close_quota, open_quota  # noqa: E402
from laya_serverless.artifact.manifest import Manifest  # noqa: E402
from laya_serverless.artifact.store import LocalStore  # noqa: E402
from laya_serverless.gate.regate import STEP_SECONDS, gate_threads, regate_published  # noqa: E402


def parser() -> argparse.ArgumentParser:
    found = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    found.add_argument("artifact", type=Path)
    found.add_argument("--memory", type=int, default=3008, help="the function's memory size (its CPU quota)")
    found.add_argument("--step-seconds", type=float, default=STEP_SECONDS)
    found.add_argument("--max-steps", type=int, default=0, help="stop after this many steps (0: until whole)")
    return found


def main() -> int:
    args = parser().parse_args()
    manifest = Manifest.load(args.artifact)
    checkpoint, target = manifest.checkpoint["name"], manifest.target
    quota = open_quota(args.memory, "laya-gate-steps")
    quota.enter()
    with tempfile.TemporaryDirectory(prefix="laya-gate-steps-") as scratch:
        store = LocalStore(Path(scratch) / "store")
        publish(args.artifact, store)
        started, step = time.monotonic(), 0
        while True:
            step += 1
            began = time.monotonic()
            summary = regate_published(store, checkpoint, target, Path(scratch) / "cache",
                                       deadline=began + args.step_seconds)
            print(json.dumps({"step": step, "wall_s": round(time.monotonic() - began, 1),
                              "pending": summary.get("pending"), "passed": summary.get("passed"),
                              "replay_seconds": summary.get("replay_seconds"),
                              "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}),
                  flush=True)
            if "pending" not in summary or (args.max_steps and step >= args.max_steps):
                break
    print(json.dumps({"steps": step, "total_wall_s": round(time.monotonic() - started, 1),
                      "memory_mb": args.memory, "threads": gate_threads().intra_op, "quota": quota.mode,
                      "quota_note": quota.reason,
                      "step_seconds": args.step_seconds, "checkpoint": checkpoint, "target": target,
                      "summary": summary}), flush=True)
    close_quota(quota)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
