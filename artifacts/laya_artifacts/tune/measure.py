"""`laya-artifacts tune`: time an artifact under each Lambda memory size's CPU share and price a decision.

For every memory size it runs the artifact in fresh processes (`tune_worker`) inside that size's CPU quota
(`tune_quota`), in alternating rounds so that a neighbour's burst falls on every configuration alike, and
measures: the cold start (spawn -> first answer), the first decision after a SnapStart-like restore, warm
p50/p99/mean on the workload (`tune_workload`), CPU per decision and peak RSS. `tune_prices` turns the warm
durations into USD per 1M decisions per architecture; the cheapest fitting size within the p99 SLO is
recommended. `tune_report` writes the table and the PNG.
"""

from __future__ import annotations

import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from laya_artifacts.errors import TuneError
from laya_artifacts.tune.prices import ARCHES, MEASURED_ARCH, Prices
from laya_artifacts.tune.quota import CGROUP_ROOT, UNCONSTRAINED, Quota, close_quota, open_quota, vcpus_for
from laya_artifacts.tune.workload import Request
from laya_serverless.core.cpu_share import MB_PER_VCPU
from laya_serverless.settings import SPINNING, THREADS

SCHEMA = "laya-tune/1"
DEFAULT_MEMORY = (1024, 2048, 3008)
DEFAULT_CONFIGS = ("runtime",)   # what a deployment runs with; --configs compares others
DEFAULT_ROUNDS = 3
DEFAULT_REQUESTS = 16            # warm requests per process, after the cold one (the built-in mix twice)
PROCESS_TIMEOUT_S = 900
CONFIG_HELP = ("runtime: the runtime's own choice (LAYA_THREADS and LAYA_SPINNING unset: threads sized to the CPU "
               "quota, spinning off); auto: threads = min(cores, ceil(vCPUs)), spinning off, set by hand; ort: "
               "onnxruntime's defaults (a thread per core, spinning on); tN: N threads, spinning off; tN-spin: N "
               "threads, spinning on")

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Config:
    """A thread/spinning setting to time: `threads` None means the runtime chooses (`runtime`)."""

    name: str
    threads: int | None = None
    spinning: bool | None = None

    def for_size(self, memory_mb: int, cores: int) -> dict[str, Any]:
        if self.name == "auto":
            return {"threads": max(1, min(cores, math.ceil(vcpus_for(memory_mb) - 1e-9))), "spinning": False}
        return {"threads": self.threads, "spinning": self.spinning}


def parse_configs(text: str) -> list[Config]:
    configs = []
    for name in (part.strip() for part in text.split(",")):
        if not name:
            continue
        if name == "runtime":
            configs.append(Config(name))
        elif name == "auto":
            configs.append(Config(name))
        elif name == "ort":
            configs.append(Config(name, threads=0, spinning=True))
        elif name.startswith("t") and name[1:].removesuffix("-spin").isdigit() and int(name[1:].removesuffix(
                "-spin")) > 0:
            configs.append(Config(name, threads=int(name[1:].removesuffix("-spin")), spinning=name.endswith("-spin")))
        else:
            raise TuneError("unknown configuration %r (%s)" % (name, CONFIG_HELP))
    if not configs or len({c.name for c in configs}) != len(configs):
        raise TuneError("--configs needs distinct names (%s)" % CONFIG_HELP)
    return configs


def parse_memory(text: str) -> list[int]:
    try:
        sizes = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise TuneError("--memory takes MB values like 1024,2048,3008, got %r" % text) from None
    if not sizes or any(not 128 <= mb <= 10240 for mb in sizes):
        raise TuneError("--memory sizes must be Lambda's 128-10240 MB, got %r" % text)
    return sorted(set(sizes))


def usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def cpu_flags() -> list[str]:
    """The int8-relevant CPU flags, as docs/ quote them."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return []
    wanted = ("avx2", "avx512_vnni", "avx_vnni", "amx_int8", "asimddp", "i8mm")
    flags: set[str] = set()
    for line in text.splitlines():
        if line.startswith(("flags", "Features")):
            flags.update(f for f in line.split(":", 1)[1].split() if f in wanted)
    return sorted(flags)


def machine() -> dict[str, Any]:
    model = ""
    try:
        model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                      if line.startswith("model name")), "")
    except OSError:
        pass
    import onnxruntime

    return {"cpu": model or platform.processor(), "cpu_flags": cpu_flags(), "cores": usable_cores(),
            "machine": platform.machine(), "python": platform.python_version(), "onnxruntime": onnxruntime.__version__}


def describe_artifact(artifact: Path) -> dict[str, Any]:
    from laya_serverless.artifact.layout import GRAPH_FILE, DecodeConfig
    from laya_serverless.errors import ArtifactError

    if not artifact.is_dir():
        raise TuneError("%s: no such artifact directory (`make serve` builds .cache/artifacts/demo-cpu-fp32-<time>)"
                        % artifact)
    try:
        DecodeConfig.load(artifact)
    except (ArtifactError, OSError, ValueError) as exc:
        raise TuneError("%s is not an artifact directory: %s" % (artifact, exc)) from None
    graph = artifact / GRAPH_FILE
    found: dict[str, Any] = {"path": str(artifact), "graph_mb": round(graph.stat().st_size / 2**20, 1)}
    manifest = artifact / "manifest.json"
    if manifest.is_file():
        raw = json.loads(manifest.read_text())
        configuration = raw.get("configuration", {})
        found.update(target=raw.get("target") or configuration.get("target"),
                     checkpoint=(configuration.get("checkpoint") or {}).get("name")
                     if isinstance(configuration.get("checkpoint"), dict) else configuration.get("checkpoint"))
    return found


@dataclass
class Samples:
    """Everything timed for one (memory size, configuration)."""

    cold_ms: list[float] = field(default_factory=list)
    restore_ms: list[float] = field(default_factory=list)
    warm_ms: list[float] = field(default_factory=list)
    warm_decisions: list[int] = field(default_factory=list)
    cpu_s: float = 0.0
    peak_rss_mb: float = 0.0
    load_ms: list[float] = field(default_factory=list)
    threading: dict[str, Any] = field(default_factory=dict)   # what the process ran with (the runtime's report)


def _spawn(spec: dict[str, Any], quota: Quota, env: dict[str, str]) -> tuple[float, list[dict[str, Any]]]:
    """Run one worker inside `quota`; (its spawn time, its events)."""
    preexec = quota.enter if quota.enforced else None
    spawned = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-m", "laya_artifacts.tune.worker", json.dumps(spec)],
                              capture_output=True, text=True, env=env, preexec_fn=preexec, timeout=PROCESS_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise TuneError("a measuring process ran past %d s (%s, %d MB)" % (PROCESS_TIMEOUT_S, spec["kind"],
                                                                           quota.memory_mb)) from None
    if done.returncode != 0:
        raise TuneError("the measuring process failed (exit %d): %s" % (done.returncode, done.stderr.strip()[-2000:]))
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return spawned, events


def _child_env(memory_mb: int) -> dict[str, str]:
    """A Lambda function's view: its memory size, and none of this shell's thread settings."""
    env = {k: v for k, v in os.environ.items() if k not in (THREADS, SPINNING, "OMP_NUM_THREADS")}
    env["AWS_LAMBDA_FUNCTION_MEMORY_SIZE"] = str(memory_mb)
    return env


def measure(artifact: Path, requests: Sequence[Request], memory: Sequence[int], configs: Sequence[Config], *,
            rounds: int = DEFAULT_ROUNDS, warm_requests: int = DEFAULT_REQUESTS, quota: bool = True,
            cgroup_root: Path = CGROUP_ROOT, progress: Progress = lambda _m: None) -> tuple[dict[Any, Samples],
                                                                                           dict[int, Quota]]:
    """Time every (size, configuration) in `rounds` alternating rounds of fresh processes."""
    cores = usable_cores()
    quotas = {mb: (open_quota(mb, "laya-tune-%d-%d" % (os.getpid(), mb), cgroup_root) if quota
                   else Quota(mb, UNCONSTRAINED, reason="--no-quota")) for mb in memory}
    for q in quotas.values():
        if not q.enforced:
            progress("%d MB: measuring unconstrained (%s)" % (q.memory_mb, q.reason))
    pairs = [(mb, c) for mb in memory for c in configs]
    samples = {(mb, c.name): Samples() for mb, c in pairs}
    decisions = [r.decisions for r in requests]
    total, count = rounds * len(pairs), 0
    with tempfile.TemporaryDirectory(prefix="laya-tune-") as scratch:
        workload = Path(scratch) / "workload.jsonl"
        workload.write_text("".join(json.dumps(r.body, ensure_ascii=False) + "\n" for r in requests), encoding="utf-8")
        try:
            for round_number in range(rounds):
                shift = round_number % len(pairs)   # each round starts elsewhere: no pair always runs first
                for mb, config in pairs[shift:] + pairs[:shift]:
                    count += 1
                    spec = {"artifact": str(artifact), "workload": str(workload), "requests": warm_requests,
                            "config": config.for_size(mb, cores)}
                    env = _child_env(mb)
                    got = samples[(mb, config.name)]
                    spawned, events = _spawn({**spec, "kind": "cold"}, quotas[mb], env)
                    by_kind = {e["event"]: e for e in events}
                    got.cold_ms.append((by_kind["first"]["t"] - spawned) * 1000)
                    got.load_ms.append((by_kind["loaded"]["t"] - spawned) * 1000)
                    got.threading = by_kind["loaded"].get("threading", {})
                    timed = [e for e in events if e["event"] == "request"]
                    got.warm_ms.extend(round(e["ms"], 3) for e in timed)   # priced as written in the JSON
                    got.warm_decisions.extend(decisions[e["index"]] for e in timed)
                    got.cpu_s += by_kind["done"]["cpu_s"]
                    _, restored = _spawn({**spec, "kind": "restore"}, quotas[mb], env)
                    restore = next(e for e in restored if e["event"] == "restore")
                    got.restore_ms.append(restore["ms"])
                    got.peak_rss_mb = max(got.peak_rss_mb, by_kind["done"]["peak_rss_mb"], restore["peak_rss_mb"])
                    progress("[%d/%d] round %d, %d MB, %s: cold %.0f ms, restore %.0f ms, warm mean %.1f ms"
                             % (count, total, round_number + 1, mb, config.name, got.cold_ms[-1], restore["ms"],
                                float(np.mean([e["ms"] for e in timed])) if timed else float("nan")))
        finally:
            for q in quotas.values():
                close_quota(q)
    return samples, quotas


def _stats(values: Sequence[float]) -> dict[str, float]:
    data = np.asarray(values, dtype=float)
    return {"p50": round(float(np.percentile(data, 50)), 2), "p99": round(float(np.percentile(data, 99)), 2),
            "mean": round(float(data.mean()), 2), "n": int(data.size)}


def round_noise(warm_ms: Sequence[float], rounds: int) -> float:
    """How much a configuration's mean warm time moved between this run's rounds: half the range of the per-round
    means over their median. A cost difference inside it is not one."""
    if rounds < 2 or len(warm_ms) < rounds:
        return 0.0
    chunk = len(warm_ms) // rounds
    means = [float(np.mean(warm_ms[i * chunk:(i + 1) * chunk])) for i in range(rounds)]
    return round((max(means) - min(means)) / 2 / float(np.median(means)), 4)


def summarize(samples: dict[Any, Samples], quotas: dict[int, Quota], configs: Sequence[Config], prices: Prices,
              arches: Sequence[str], slo_p99_ms: float | None) -> list[dict[str, Any]]:
    """Per size: every configuration's figures and costs, and the size's best configuration (cheapest on the
    measured architecture) lifted to the size's own fields."""
    cores = usable_cores()
    sizes = []
    for mb, quota in quotas.items():
        rows = []
        for config in configs:
            got = samples[(mb, config.name)]
            warm = _stats(got.warm_ms)
            costs: dict[str, dict[str, Any]] = {}
            for arch in arches:
                factor = prices.time_factor(arch)
                costs[arch] = {"usd_per_1m_decisions": round(prices.per_million_decisions(
                    got.warm_ms, got.warm_decisions, mb, arch), 4), "estimated": arch != MEASURED_ARCH,
                    "time_factor": factor, "p99_ms": round(warm["p99"] * factor, 2)}
                if arch != MEASURED_ARCH:
                    costs[arch]["basis"] = prices.arm64_time_basis
            rows.append({"name": config.name, **config.for_size(mb, cores), "ran_with": got.threading,
                         "cold_ms": _stats(got.cold_ms), "restore_ms": _stats(got.restore_ms),
                         "load_ms": _stats(got.load_ms), "warm_ms": warm,
                         "cpu_ms_per_decision": round(got.cpu_s * 1000 / max(1, sum(got.warm_decisions)), 3),
                         "decisions_per_request": round(sum(got.warm_decisions) / len(got.warm_decisions), 3),
                         "peak_rss_mb": round(got.peak_rss_mb, 1), "cost": costs,
                         "noise": round_noise(got.warm_ms, len(got.cold_ms)),
                         "samples": {"warm_ms": list(got.warm_ms),
                                     "warm_decisions": list(got.warm_decisions),
                                     "cold_ms": [round(ms, 1) for ms in got.cold_ms],
                                     "restore_ms": [round(ms, 2) for ms in got.restore_ms]}})
        best = min(rows, key=lambda r: r["cost"][arches[0]]["usd_per_1m_decisions"])
        peak = max(r["peak_rss_mb"] for r in rows)
        fits = peak <= mb
        size: dict[str, Any] = {
            "memory_mb": mb, "vcpus": round(vcpus_for(mb), 3), "quota": quota.mode,
            "config": best["name"], "p50_ms": best["warm_ms"]["p50"], "p99_ms": best["warm_ms"]["p99"],
            "mean_ms": best["warm_ms"]["mean"], "cold_ms": best["cold_ms"]["p50"],
            "restore_ms": best["restore_ms"]["p50"], "peak_rss_mb": peak, "fits": fits, "noise": best["noise"],
            "cost_per_1m_decisions": {a: best["cost"][a]["usd_per_1m_decisions"] for a in arches},
            "estimated": {a: best["cost"][a]["estimated"] for a in arches},
            "meets_slo": {a: fits and (slo_p99_ms is None or best["cost"][a]["p99_ms"] <= slo_p99_ms)
                          for a in arches},
            "configs": rows,
        }
        if not quota.enforced:
            size["quota_reason"] = quota.reason
        sizes.append(size)
    return sizes


def _pick(meeting: Sequence[dict[str, Any]], arch: str) -> dict[str, Any]:
    """The cheapest size, unless others are within the noise band of it: then the smallest of those, said so."""
    def cost(size: dict[str, Any]) -> float:
        return float(size["cost_per_1m_decisions"][arch])

    cheapest = min(meeting, key=lambda s: (cost(s), s["memory_mb"]))
    tied = sorted((s for s in meeting if cost(s) - cost(cheapest) <= cost(cheapest) * cheapest["noise"]
                   + cost(s) * s["noise"]), key=lambda s: s["memory_mb"])
    best, band = tied[0], max(s["noise"] for s in tied)
    why = ("cheapest per 1M decisions, outside this run's noise band (+-%.1f%%)" % (100 * band) if len(tied) == 1
           else "%s MB are within this run's noise band (+-%.1f%%) of the cheapest: no winner on cost; the smallest "
                "of them is recommended" % (", ".join(str(s["memory_mb"]) for s in tied), 100 * band))
    return {"memory_mb": best["memory_mb"], "config": best["config"], "usd_per_1m_decisions": cost(best),
            "p99_ms": next(c["cost"][arch]["p99_ms"] for c in best["configs"] if c["name"] == best["config"]),
            "estimated": best["estimated"][arch], "noise": band,
            "within_noise": [s["memory_mb"] for s in tied], "why": why}


def recommend(sizes: Sequence[dict[str, Any]], arches: Sequence[str], slo_p99_ms: float | None) -> dict[str, Any]:
    """Per architecture and overall: the cheapest size meeting the SLO (and fitting), named a winner only outside
    the run's noise band (`_pick`)."""
    per_arch: dict[str, Any] = {}
    for arch in arches:
        meeting = [s for s in sizes if s["meets_slo"][arch]]
        per_arch[arch] = _pick(meeting, arch) if meeting else None
    found = [(arch, choice) for arch, choice in per_arch.items() if choice is not None]
    overall = None
    if found:
        arch, choice = min(found, key=lambda pair: pair[1]["usd_per_1m_decisions"])
        overall = {"arch": arch, **choice}
    why = ("no size fits and meets p99 <= %s ms" % slo_p99_ms if overall is None and slo_p99_ms is not None
           else "no size fits" if overall is None else "%s, among sizes that fit%s" % (
               overall["why"], " and meet p99 <= %g ms" % slo_p99_ms if slo_p99_ms is not None else ""))
    return {"slo_p99_ms": slo_p99_ms, "per_arch": per_arch, "choice": overall, "why": why}


def tune(artifact: Path, requests: Sequence[Request], *, memory: Sequence[int] = DEFAULT_MEMORY,
         arches: Sequence[str] = ARCHES, configs: Sequence[Config] | None = None, prices: Prices | None = None,
         slo_p99_ms: float | None = None, rounds: int = DEFAULT_ROUNDS, warm_requests: int = DEFAULT_REQUESTS,
         quota: bool = True, workload_name: str = "built-in", cgroup_root: Path = CGROUP_ROOT,
         progress: Progress = lambda _m: None, command: str = "") -> dict[str, Any]:
    """Measure and price `artifact`; the JSON document `--json` writes."""
    if rounds < 1 or warm_requests < 1:
        raise TuneError("--rounds and --requests must be at least 1")
    configs = list(configs or parse_configs(",".join(DEFAULT_CONFIGS)))
    prices = prices or Prices.load()
    unknown = [a for a in arches if a not in prices.gb_second_usd]
    if unknown:
        raise TuneError("the price table (%s) has no price for %s" % (prices.date, ", ".join(unknown)))
    described = describe_artifact(artifact)
    started = time.monotonic()
    progress("timing %s: %d sizes x %d configurations x %d rounds, %d warm requests each (%d in the workload)"
             % (artifact, len(memory), len(configs), rounds, warm_requests, len(requests)))
    samples, quotas = measure(artifact, requests, memory, configs, rounds=rounds, warm_requests=warm_requests,
                              quota=quota, cgroup_root=cgroup_root, progress=progress)
    sizes = summarize(samples, quotas, configs, prices, list(arches), slo_p99_ms)
    modes = sorted({q.mode for q in quotas.values()})
    return {
        "schema": SCHEMA, "date": time.strftime("%Y-%m-%d", time.gmtime()), "artifact": described,
        "machine": machine(), "command": command,
        "quota": {"mode": modes[0] if len(modes) == 1 else modes, "period_us": 100_000, "mb_per_vcpu": MB_PER_VCPU,
                  "note": "unconstrained: timings are this machine's, not the size's CPU share"
                  if UNCONSTRAINED in modes else "CFS quota per size, high weight, all cores visible"},
        "workload": {"name": workload_name, "requests": len(requests),
                     "decisions": [r.decisions for r in requests], "warm_requests_per_process": warm_requests,
                     "rounds": rounds},
        "configs": [c.name for c in configs], "prices": prices.describe(), "arches": list(arches),
        "sizes": sizes, "recommendation": recommend(sizes, list(arches), slo_p99_ms),
        "elapsed_s": round(time.monotonic() - started, 1),
    }
