"""Where a torch-free cold start goes: import, fetch + verify, session creation, first answer.

    laya-artifacts bench cold-start [--store .laya-store] [--checkpoint demo] [--target cpu-fp32] [--rounds 5]
                                       [--drop-caches]

Each round runs one fresh process per cache state: `empty` (the artifact cache is emptied first,
as on a new Lambda instance: download + hash each file), `cached` (files already in the cache:
hash only). With `--drop-caches` (root; Linux) the page cache is dropped before each process, so
reads come from disk. Prints the median of every phase per state, as JSON lines and a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from laya_serverless.artifact.store import DEFAULT_LOCAL_STORE

ROOT = Path(__file__).resolve().parents[3]   # the checkout: benchmarks read its goldens and stores
PHASES = ("import", "fetch_verify", "session", "first_answer", "total")

_CHILD = r"""
import json, sys, time
started = time.perf_counter()
import laya_serverless
from laya_serverless.artifact.fetch import fetch_published
from laya_serverless.artifact.store import open_store
from laya_serverless.core.decider import Decider
imported = time.perf_counter()
from pathlib import Path
_, path, _ = fetch_published(open_store(sys.argv[1]), sys.argv[2], sys.argv[3], Path(sys.argv[4]))
fetched = time.perf_counter()
decider = Decider.from_artifact(path, verify=False)
opened = time.perf_counter()
decider.predict("I was charged twice for my order.", {"refund": {"type": "noul", "instructions": "Refund?"}})
answered = time.perf_counter()
print(json.dumps({"import": imported - started, "fetch_verify": fetched - imported, "session": opened - fetched,
                  "first_answer": answered - opened, "total": answered - started}))
"""


def _drop_page_cache() -> None:
    subprocess.run(["sync"], check=True)
    Path("/proc/sys/vm/drop_caches").write_text("3\n")


def _one(args: argparse.Namespace, cache: Path, state: str) -> dict[str, float]:
    if state == "empty":
        shutil.rmtree(cache, ignore_errors=True)
    if args.drop_caches:
        _drop_page_cache()
    out = subprocess.run([sys.executable, "-c", _CHILD, args.store, args.checkpoint, args.target, str(cache)],
                         capture_output=True, text=True, check=True, cwd=ROOT)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", default=str(ROOT / DEFAULT_LOCAL_STORE))
    parser.add_argument("--checkpoint", default="demo")
    parser.add_argument("--target", default="cpu-fp32")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--drop-caches", action="store_true", help="drop the page cache before each process (root)")
    args = parser.parse_args(argv)
    runs: dict[str, list[dict[str, float]]] = {"empty": [], "cached": []}
    with tempfile.TemporaryDirectory(prefix="laya-cold-") as scratch:
        cache = Path(scratch) / "cache"
        for _ in range(args.rounds):
            for state in runs:
                runs[state].append(_one(args, cache, state))
    print("| cache | " + " | ".join(PHASES) + " |")
    print("|---|" + "---|" * len(PHASES))
    for state, rows in runs.items():
        medians = {phase: statistics.median(r[phase] for r in rows) for phase in PHASES}
        print(json.dumps({"cache": state, **medians}), file=sys.stderr)
        print("| %s | " % state + " | ".join("%.0f ms" % (1000 * medians[p]) for p in PHASES) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
