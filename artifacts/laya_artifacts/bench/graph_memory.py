"""Memory and time of opening one ONNX graph, each way in a fresh process, in its own memory cgroup where it can.

    laya-artifacts bench graph-memory GRAPH.onnx [--threads 2] [--level ORT_ENABLE_BASIC] [--ways memfd,file]
                                                 [--rounds 1] [--json OUT]

Ways: `file` (a path on disk), `bytes` (the graph read into Python bytes), `memfd` (an anonymous memory file,
closed once the session exists), `memfd-closed-after-parse` (closed once onnxruntime has parsed the graph, before
it initializes the session: what the runtime does on Lambda, `core/session.py`, `artifact/fetch.py`), and
`memfd-no-arena` / `memfd-initializers-outside-arena` (`memfd` with ONNX Runtime's CPU arena off, or with
initializers allocated outside it: `session.use_device_allocator_for_initializers`). The level defaults to what
the artifact's `decode_config.json` beside the graph records (`DecodeConfig.session_level`), as the runtime opens it.

The `file` way first drops the graph's pages from the page cache (`posix_fadvise`), so that its reads are
charged to its cgroup as on a cold start (page cache the kernel may reclaim, unlike a memory file's pages).
`--limit-mb` puts a hard limit (no swap) on each cgroup and reports the ways the out-of-memory killer stopped.

Per way: session creation time; the process's peak and current RSS (VmHWM, VmRSS; a memory file's pages are
shared memory, outside RSS); and, run as root on a cgroup-v1 memory hierarchy, the cgroup's peak while loading
(`memory.max_usage_in_bytes`: the memory file included, as Lambda counts it) and its use once the session has
answered one short pass (steady). `peak/steady` is the INIT ratio the loader is held to.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

CGROUP_V1 = Path("/sys/fs/cgroup/memory")
WAYS = ("file", "bytes", "memfd", "memfd-closed-after-parse", "memfd-no-arena", "memfd-initializers-outside-arena")

PROBE = r"""
import gc, json, os, shutil, sys, time
import numpy as np
import onnxruntime as ort
way, graph, threads, level, cgroup = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
def status(key):
    return next(int(l.split()[1]) / 1024 for l in open("/proc/self/status") if l.startswith(key))
def charged(name):
    return int(open(os.path.join(cgroup, name)).read()) / 2**20 if cgroup else None
options = ort.SessionOptions()
options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
options.intra_op_num_threads = threads
options.add_session_config_entry("session.intra_op.allow_spinning", "0")
if way == "memfd-no-arena":
    options.enable_cpu_mem_arena = False
if way == "memfd-initializers-outside-arena":
    options.add_session_config_entry("session.use_device_allocator_for_initializers", "1")
start = time.perf_counter()
if way == "file":
    # its pages out of the page cache first, so that reading it is charged here, as on a cold start
    evict = os.open(graph, os.O_RDONLY)
    os.posix_fadvise(evict, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(evict)
    start = time.perf_counter()
    session = ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"])
elif way == "bytes":
    data = open(graph, "rb").read()
    session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
    del data
elif way == "memfd-closed-after-parse":
    # onnxruntime's constructor parses the graph; the memory file is closed before the session is initialized
    from onnxruntime.capi import _pybind_state as C
    fd = os.memfd_create("graph")
    with open(graph, "rb") as source, open("/proc/self/fd/%d" % fd, "wb") as target:
        shutil.copyfileobj(source, target, 1 << 20)
    parsed = C.InferenceSession(options, "/proc/self/fd/%d" % fd, True, False)
    os.close(fd)
    parsed.initialize_session(["CPUExecutionProvider"], [{}], set())
    session = ort.InferenceSession._from_initialized_c_session(parsed)
else:
    fd = os.memfd_create("graph")
    with open(graph, "rb") as source, open("/proc/self/fd/%d" % fd, "wb") as target:
        shutil.copyfileobj(source, target, 1 << 20)
    session = ort.InferenceSession("/proc/self/fd/%d" % fd, options, providers=["CPUExecutionProvider"])
    os.close(fd)
seconds = time.perf_counter() - start
gc.collect()
peak_cgroup = charged("memory.max_usage_in_bytes")
feeds = {"input_ids": np.array([[2, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 3]], dtype=np.int64),
         "attention_mask": np.ones((1, 12), dtype=np.int64), "marker_pos": np.array([[4, 6]], dtype=np.int64),
         "marker_mask": np.ones((1, 2), dtype=bool), "qtype": np.zeros(1, dtype=np.int64)}
run = ort.RunOptions()
if way != "memfd-no-arena":  # as the runtime runs (`core/session.py`); there is no arena to shrink otherwise
    run.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
session.run(None, feeds, run)
gc.collect()
print(json.dumps({"way": way, "session_s": seconds, "vm_hwm_mb": status("VmHWM"), "vm_rss_mb": status("VmRSS"),
                  "cgroup_peak_mb": peak_cgroup, "cgroup_steady_mb": charged("memory.usage_in_bytes")}))
"""


def _cgroup(limit_mb: int | None = None) -> Path | None:
    """A fresh child memory cgroup (v1, root only), limited to `limit_mb` (no swap) when given, or None where
    there is none to make."""
    if not (CGROUP_V1 / "memory.max_usage_in_bytes").is_file():
        return None
    path = CGROUP_V1 / ("laya-graph-memory-%s" % uuid.uuid4().hex[:8])
    try:
        path.mkdir()
    except OSError:
        return None
    if limit_mb:
        for name in ("memory.limit_in_bytes", "memory.memsw.limit_in_bytes"):
            if (path / name).exists():
                (path / name).write_text(str(limit_mb * 2**20))
    return path


def measure(way: str, graph: Path, threads: int, level: str, limit_mb: int | None = None) -> dict[str, Any]:
    """One way, in a fresh process (in a fresh memory cgroup where one can be made, limited to `limit_mb`)."""
    group = _cgroup(limit_mb)
    enter = "echo $$ > %s/cgroup.procs && " % group if group else ""
    command = enter + "exec %s -c '%s' %s %s %d %s %s" % (
        sys.executable, PROBE.replace("'", "'\\''"), way, graph, threads, level, group or "''")
    try:
        done = subprocess.run(["sh", "-c", command], capture_output=True, text=True)
    finally:
        if group:
            group.rmdir()
    if done.returncode in (-9, 137) and limit_mb:   # killed by the cgroup's out-of-memory killer
        return {"way": way, "oom_killed": True, "limit_mb": limit_mb}
    if done.returncode:
        raise RuntimeError("the %s probe failed: %s" % (way, done.stderr[-2000:]))
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    if figures["cgroup_peak_mb"] and figures["cgroup_steady_mb"]:
        figures["peak_over_steady"] = figures["cgroup_peak_mb"] / figures["cgroup_steady_mb"]
    return figures


def _level(graph: Path, given: str | None) -> str:
    if given:
        return given
    from laya_serverless.artifact.layout import DECODE_CONFIG_FILE, DecodeConfig

    if (graph.parent / DECODE_CONFIG_FILE).is_file():
        return DecodeConfig.load(graph.parent).session_level
    return "ORT_DISABLE_ALL"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("graph", type=Path)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--level", help="default: the level the artifact's decode config records")
    parser.add_argument("--ways", default="file,bytes,memfd", help="comma-separated, of %s" % ", ".join(WAYS))
    parser.add_argument("--rounds", type=int, default=1, help="fresh processes per way (medians are printed)")
    parser.add_argument("--json", type=Path, help="write every round's figures here")
    parser.add_argument("--limit-mb", type=int, help="a hard memory limit on each way's cgroup: does it load?")
    args = parser.parse_args(argv)
    level, ways = _level(args.graph, args.level), args.ways.split(",")
    print("%s (%d bytes) at %s, %d threads" % (args.graph, args.graph.stat().st_size, level, args.threads))
    rounds = []
    for number in range(args.rounds):
        rounds.append([measure(way, args.graph, args.threads, level, args.limit_mb) for way in ways])
        print("round %d of %d done" % (number + 1, args.rounds), file=sys.stderr)
    for index, way in enumerate(ways):
        mine = [r[index] for r in rounds]
        if any(m.get("oom_killed") for m in mine):
            print("%-34s out-of-memory killed under %d MB in %d of %d rounds"
                  % (way, args.limit_mb, sum(bool(m.get("oom_killed")) for m in mine), len(mine)))
            continue
        med = {k: statistics.median(m[k] for m in mine) for k in mine[0] if isinstance(mine[0][k], int | float)}
        print("%-34s session %5.2f s  VmHWM %6.0f MB  VmRSS %6.0f MB  cgroup peak %s  steady %s  peak/steady %s"
              % (way, med["session_s"], med["vm_hwm_mb"], med["vm_rss_mb"], _mb(med.get("cgroup_peak_mb")),
                 _mb(med.get("cgroup_steady_mb")), "%.2f" % med["peak_over_steady"] if "peak_over_steady" in med
                 else "-"))
    if args.json:
        args.json.write_text(json.dumps({"graph": str(args.graph), "level": level, "rounds": rounds}, indent=2))
    return 0


def _mb(value: float | None) -> str:
    return "%6.0f MB" % value if value is not None else "     -"


if __name__ == "__main__":
    raise SystemExit(main())
