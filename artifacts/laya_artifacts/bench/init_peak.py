"""An artifact's INIT peak over its steady memory, opened the runtime's way, one way per fresh memory cgroup.

    laya-artifacts bench init-peak ARTIFACT_DIR [--ways runtime,as-stored,...] [--rounds 1] [--threads 2]
                                                [--json OUT]

Each way runs in a fresh process placed in its own cgroup-v1 memory group (root only; elsewhere only VmHWM and
VmRSS are reported). The process copies the graph into an anonymous memory file as the Lambda fetch does (read
with O_DIRECT, so the artifact's page cache is charged to no group), resets the group's peak, and opens the
artifact through `Decider.from_artifact` with the memory file freed once parsed, as `assembly.loader` does on
Lambda; then it answers one request. Reported per way (medians over the rounds, ways interleaved): the group's
peak while loading (`memory.max_usage_in_bytes`: the memory file included, as Lambda counts it), its use once
loaded and once the first answer is out (the fair steady: `peak / steady` is the INIT ratio), VmHWM and VmRSS,
the session's creation seconds (wall, and CPU over all threads: steadier on a shared machine), and a digest of the
graph's raw outputs and the answer (equal digests: bit-identical answers).

Ways: `runtime` (what the runtime does: a compact graph's weights widened as it streams in, `core.restore`);
`as-stored` (the graph opened as stored, its Casts folded by onnxruntime: the runtime before `core.restore`), alone
or with `+OPTION`: `no-arena`, `initializers-outside-arena`, `no-prepack`, `env-allocators` (onnxruntime session
options), `trim` (`malloc_trim(0)` once the session exists) or `mmap-threshold` (glibc's `M_MMAP_THRESHOLD` at 1 MiB
throughout: freed blocks go straight back to the system); `runtime` without a part of it: `runtime-no-threshold`
(no 1 MiB threshold while onnxruntime parses), `runtime-no-trim` (no `malloc_trim`), `runtime-no-fold` (every weight
widened: `FOLD_SHARE` 0), `runtime-all-inline` (no weight read in place); `file` (`runtime` from the graph on disk,
not a memory file); `bytes` (as stored, from the graph read into Python bytes, dropped once the session exists).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

CGROUP_V1 = Path("/sys/fs/cgroup/memory")
OPTIONS = {"no-arena": None, "initializers-outside-arena": "session.use_device_allocator_for_initializers",
           "no-prepack": "session.disable_prepacking", "env-allocators": "session.use_env_allocators"}
WAYS = ("runtime", "as-stored", *("as-stored+" + o for o in (*OPTIONS, "trim", "mmap-threshold")),
        "runtime-no-threshold", "runtime-no-trim", "runtime-no-fold", "runtime-all-inline", "file", "bytes")
STATE = {"ticket": "I was charged twice for the same order and the support line keeps hanging up on me",
         "history": ["asked for a refund on Monday", "no answer yet"]}
QUESTIONS = {"team": {"type": "choice", "instructions": "Which team should take it?",
                      "criteria": ["billing", "tech", "shipping", "other"]},
             "urgent": {"type": "noul", "instructions": "Is it urgent?"},
             "anger": {"type": "score", "instructions": "How angry is the customer?",
                       "criteria": ["low", "mid", "high"]}}


def _status_mb(key: str) -> float:
    return next(int(line.split()[1]) / 1024 for line in open("/proc/self/status") if line.startswith(key))


def _cpu_s() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)   # every thread of the process
    return usage.ru_utime + usage.ru_stime


def _copy_direct(source: Path, target: str) -> None:
    """`source` into `target`, read with O_DIRECT where the file system allows (no page cache charged)."""
    import mmap

    try:
        fd = os.open(source, os.O_RDONLY | os.O_DIRECT)
    except OSError:
        fd = os.open(source, os.O_RDONLY)
    buffer = mmap.mmap(-1, 1 << 22)   # page-aligned, as O_DIRECT wants
    with open(target, "wb") as out:
        while count := os.readv(fd, [buffer]):
            out.write(buffer[:count])
    os.close(fd)


def _patch(way: str) -> None:
    """Bend the runtime's session opening to `way` (this process only)."""
    import ctypes

    import onnxruntime as ort

    from laya_serverless.artifact import compact
    from laya_serverless.core import restore, session

    option = way.partition("+")[2]
    if way.startswith("as-stored") or way == "bytes":
        setattr(session, "widened", lambda graph, discard=False: _unchanged(graph))   # noqa: B010
    if option in OPTIONS:
        base = ort.SessionOptions

        class Options(base):  # type: ignore[misc, valid-type]
            def __init__(self) -> None:
                super().__init__()
                if OPTIONS[option] is None:
                    self.enable_cpu_mem_arena = False
                else:
                    self.add_session_config_entry(OPTIONS[option], "1")
        setattr(ort, "SessionOptions", Options)   # noqa: B010
    if option == "mmap-threshold":
        ctypes.CDLL(None).mallopt(-3, 1 << 20)   # M_MMAP_THRESHOLD
    if way == "runtime-no-threshold":
        setattr(restore, "_mmap_threshold", lambda size: None)   # noqa: B010
    if way == "runtime-no-trim":
        setattr(restore, "_give_back_heap", lambda: None)   # noqa: B010
    if way == "runtime-no-fold":
        setattr(compact, "FOLD_SHARE", 0.0)   # noqa: B010
    if way == "runtime-all-inline":
        scan = getattr(restore, "scan")   # noqa: B009
        setattr(restore, "scan", lambda buf: _all_inline(scan(buf)))   # noqa: B010
    if way == "bytes":
        def from_bytes(graph: Path, options: Any, providers: list[Any], after_parse: Any) -> Any:
            made = ort.InferenceSession(Path(graph).read_bytes(), sess_options=options, providers=providers)
            if after_parse is not None:
                after_parse()
            return made
        setattr(session, "_inference_session", from_bytes)   # noqa: B010
    if option == "trim":
        opened = session.OnnxDecisionSession.__init__

        def trimmed(self: Any, *args: Any, **kwargs: Any) -> None:
            opened(self, *args, **kwargs)
            ctypes.CDLL(None).malloc_trim(0)
        setattr(session.OnnxDecisionSession, "__init__", trimmed)   # noqa: B010


def _unchanged(graph: Path) -> Any:
    from contextlib import nullcontext

    from laya_serverless.core.restore import Widened

    return nullcontext(Widened(graph))


def _all_inline(found: Any) -> Any:
    for weight in found[2] if found else []:
        weight.way = "widen" if weight.way == "in-place" else weight.way
    return found


def probe(way: str, artifact: Path, threads: int, cgroup: str) -> dict[str, Any]:
    """One way, in this process (run by `measure` in a fresh one)."""
    import gc
    import hashlib
    import time

    from laya_serverless import Decider
    from laya_serverless.artifact.fetch import MemoryFile
    from laya_serverless.artifact.layout import GRAPH_FILE
    from laya_serverless.core import decider as decider_module

    def group(name: str) -> float | None:
        return int(Path(cgroup, name).read_text()) / 2**20 if cgroup else None

    _patch(way)
    memory = None
    if way != "file":
        memory = MemoryFile(GRAPH_FILE)
        _copy_direct(artifact / GRAPH_FILE, str(memory.path))
    if cgroup:
        Path(cgroup, "memory.max_usage_in_bytes").write_text("0")   # the peak from here on
    timed: dict[str, float] = {}
    opener = getattr(decider_module, "open_decision_session")   # noqa: B009

    def session_timed(*args: Any, **kwargs: Any) -> Any:
        start, cpu = time.perf_counter(), _cpu_s()
        made = opener(*args, **kwargs)
        timed["session_s"], timed["session_cpu_s"] = time.perf_counter() - start, _cpu_s() - cpu
        return made
    setattr(decider_module, "open_decision_session", session_timed)   # noqa: B010
    start = time.perf_counter()
    decider = Decider.from_artifact(artifact, threads=threads, verify=False, graph=memory.path if memory else None,
                                    release_graph=memory.close if memory else None)
    opened_s = time.perf_counter() - start
    if way.endswith("no-arena"):   # no arena to shrink after each run, as the runtime's run options ask
        import onnxruntime as ort

        setattr(decider.session, "_run_options", ort.RunOptions())   # noqa: B010
    gc.collect()
    figures = {"way": way, "open_s": opened_s, **timed, "peak_mb": group("memory.max_usage_in_bytes"),
               "loaded_mb": group("memory.usage_in_bytes"), "vm_hwm_loaded_mb": _status_mb("VmHWM")}
    outputs: list[bytes] = []
    run = decider.session.run

    def recorded(feeds: Any) -> Any:
        logits, act = run(feeds)
        outputs.extend([logits.tobytes(), act.tobytes()])
        return logits, act
    decider.session.run = recorded   # type: ignore[method-assign]
    answer = decider.predict(STATE, QUESTIONS)
    gc.collect()
    digest = hashlib.sha256(b"".join(outputs) + json.dumps(answer, sort_keys=True).encode()).hexdigest()[:16]
    return {**figures, "steady_mb": group("memory.usage_in_bytes"), "peak_after_answer_mb":
            group("memory.max_usage_in_bytes"), "vm_hwm_mb": _status_mb("VmHWM"), "vm_rss_mb": _status_mb("VmRSS"),
            "digest": digest}


def _cgroup() -> Path | None:
    if not (CGROUP_V1 / "memory.max_usage_in_bytes").is_file():
        return None
    path = CGROUP_V1 / ("laya-init-peak-%s" % uuid.uuid4().hex[:8])
    try:
        path.mkdir()
    except OSError:
        return None
    return path


def measure(way: str, artifact: Path, threads: int) -> dict[str, Any]:
    """One way, in a fresh process in a fresh memory cgroup where one can be made."""
    group = _cgroup()
    enter = "echo $$ > %s/cgroup.procs && " % group if group else ""
    command = enter + "exec %s -m laya_artifacts.bench.init_peak --probe %s %s %d %s" % (
        sys.executable, way, artifact, threads, group or "''")
    try:
        done = subprocess.run(["sh", "-c", command], capture_output=True, text=True)
    finally:
        if group:
            group.rmdir()
    if done.returncode:
        raise RuntimeError("the %s probe failed: %s" % (way, done.stderr[-2000:]))
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    if figures["peak_mb"] and figures["steady_mb"]:
        figures["peak_over_steady"] = figures["peak_mb"] / figures["steady_mb"]
    return figures


def _row(way: str, rounds: list[dict[str, Any]]) -> str:
    med = {k: statistics.median(r[k] for r in rounds) for k, v in rounds[0].items() if isinstance(v, int | float)}
    digests = sorted({r["digest"] for r in rounds})

    def mb(key: str) -> str:
        return "%6.0f" % med[key] if key in med else "     -"
    return ("%-26s peak %s  loaded %s  steady %s  ratio %s  VmHWM %s  VmRSS %s  session %5.2f s (CPU %5.2f s)  "
            "open %5.2f s  %s") % (way, mb("peak_mb"), mb("loaded_mb"), mb("steady_mb"),
                                   "%.3f" % med["peak_over_steady"] if "peak_over_steady" in med else "-",
                                   mb("vm_hwm_mb"), mb("vm_rss_mb"), med.get("session_s", 0.0),
                                   med.get("session_cpu_s", 0.0), med["open_s"], ",".join(digests))


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--probe"]:
        way, artifact, threads, cgroup = argv[1:5]
        print(json.dumps(probe(way, Path(artifact), int(threads), cgroup)))
        return 0
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("artifact", type=Path)
    parser.add_argument("--ways", default="runtime,as-stored", help="comma-separated, of %s" % ", ".join(WAYS))
    parser.add_argument("--rounds", type=int, default=1, help="fresh processes per way, ways interleaved (medians)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", type=Path, help="write every round's figures here")
    args = parser.parse_args(argv)
    ways = args.ways.split(",")
    unknown = sorted(set(ways) - set(WAYS))
    if unknown:
        parser.error("unknown ways %s; known: %s" % (", ".join(unknown), ", ".join(WAYS)))
    graph = args.artifact / "model.onnx"
    print("%s (%d bytes), %d threads; MB are MiB" % (graph, graph.stat().st_size, args.threads))
    rounds = []
    for number in range(args.rounds):
        rounds.append([measure(way, args.artifact, args.threads) for way in ways])
        print("round %d of %d: %s" % (number + 1, args.rounds, json.dumps(rounds[-1])), file=sys.stderr)
    for index, way in enumerate(ways):
        print(_row(way, [r[index] for r in rounds]))
    if args.json:
        args.json.write_text(json.dumps({"artifact": str(args.artifact), "threads": args.threads,
                                         "rounds": rounds}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
