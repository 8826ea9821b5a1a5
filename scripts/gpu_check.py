"""The GPU check, run from the carried payload (gpu_payload.py) in one device call, results in <= 8 files.

    python3 /tmp/w/code/scripts/gpu_check.py device --work /tmp/w --out "$OUT"     there (docs/gpu.md, "How to run")
    python scripts/gpu_check.py dry-run --work DIR --out DIR [--kinds tiny-modernbert,demo]       here, on the CPU

Steps, each written to `summary.json` as it ends, so a run cut short still says how far it got:

1. the machine: nvidia-smi, Python, torch, transformers, onnx, onnxruntime and its providers;
2. no silent fallback, live: a CUDA provider made to fail at creation (no visible device; a device id the
   machine lacks), with its libraries all found, makes onnxruntime hand back a CPU session, and
   `open_session` must refuse it; the control opens on CUDA (probe graph: ONNX IR 10, which 1.31 reads);
3. the checkpoints: tiny ModernBERT, MiniLM and the demo as carried (hash-checked), the ModernBERT-base shape
   redrawn here from its seed with the carried scorer, and its weights' hash compared to the goldens';
4. build and gate `cuda-fp16` and `cuda-fp32` of each against goldens recorded on the build host's CPU,
   checkpoints in parallel (a failed gate is a result, not a stop);
5. warm latency of both targets beside upstream `laya.Agent(device="cuda")`, one checkpoint at a time.

`dry-run` runs the same code here on the CPU provider (gates, refusal and timings there prove the script,
not the GPU): every build's gate on CPUExecutionProvider under a fake GPU profile, as tests do.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

KINDS = ("tiny-modernbert", "minilm", "demo", "modernbert-base")
TARGETS = ("cuda-fp16", "cuda-fp32")
GOLDENS = {"tiny-modernbert": "goldens/tiny-modernbert/goldens.json", "minilm": "goldens/minilm/goldens.json",
           "demo": "artifacts/laya_artifacts/goldens/shipped_goldens/91cb836da13fbf40.json",
           "modernbert-base": "goldens/modernbert-base/goldens.json"}
# From the start: the device call's limit is 600 s. A dry run on a shared 2-core machine gets longer.
DEADLINES_S = {"device": (360, 540), "dry-run": (2400, 3000)}
STARTED = time.time()


def elapsed() -> float:
    return round(time.time() - STARTED, 1)


class Run:
    """Paths, the child environment, and the summary written after every step."""

    def __init__(self, work: Path, out: Path, dry: bool, budget: float | None = None) -> None:
        self.work, self.out, self.dry, self.code = work, out, dry, work / "code"
        self.build_deadline, self.run_deadline = DEADLINES_S["dry-run" if dry else "device"]
        if budget:   # what the device call has left: builds get two thirds, benchmarks stop 20 s before the end
            self.build_deadline, self.run_deadline = budget * 2 / 3, budget - 20
        self.logs = work / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.summary: dict[str, Any] = {"mode": "dry-run (CPU)" if dry else "device", "started": time.strftime(
            "%Y-%m-%dT%H:%M:%SZ", time.gmtime(STARTED))}
        paths = [str(self.code / "functions"), str(self.code / "artifacts")]
        if not dry:
            paths.insert(0, str(work / "site"))
        self.env = dict(os.environ, PYTHONPATH=":".join(paths), PYTHONUNBUFFERED="1", TOKENIZERS_PARALLELISM="false")
        if not dry:   # the image's pip-installed CUDA 13 and cuDNN, for onnxruntime's loader, as in the endpoint
            found = [nvidia_libraries(), os.environ.get("LD_LIBRARY_PATH", "")]
            self.env["LD_LIBRARY_PATH"] = ":".join(p for p in found if p)

    def save(self, key: str, value: Any) -> None:
        self.summary[key] = value
        self.summary["elapsed_s"] = elapsed()
        (self.out / "summary.json").write_text(json.dumps(self.summary, indent=1, default=str) + "\n")
        print("[%6.1fs] %s: %s" % (elapsed(), key, json.dumps(value, default=str)[:400]), flush=True)

    def child(self, name: str, args: list[str], timeout: float, env: dict[str, str] | None = None) -> dict[str, Any]:
        """Run `python3 THIS_FILE args` (or a script) to the end or `timeout`; its output goes to logs/NAME.log."""
        return self.wait(name, self.start(name, args, env), timeout)

    def start(self, name: str, args: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        log = (self.logs / ("%s.log" % name)).open("wb")
        return subprocess.Popen([sys.executable, *args], stdout=log, stderr=subprocess.STDOUT,
                                env=env or self.env, cwd=self.code)

    def wait(self, name: str, process: subprocess.Popen[bytes], timeout: float) -> dict[str, Any]:
        try:
            code = process.wait(timeout=max(timeout, 1))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            code = "killed after %.0f s" % timeout
        tail = (self.logs / ("%s.log" % name)).read_text(errors="replace").splitlines()[-6:]
        return {"exit": code, "at_s": elapsed(), "log_tail": tail}


def nvidia_libraries() -> str:
    import glob

    try:
        import nvidia
    except ImportError:
        return ""
    return ":".join(sorted({os.path.dirname(p) for d in nvidia.__path__ for p in glob.glob(d + "/*/lib/lib*.so*")}))


# ---- children (each runs in its own process, with the payload's paths) ------------------------------------------

def machine() -> dict[str, Any]:
    import onnx
    import onnxruntime as ort
    import torch
    import transformers
    from onnxruntime.capi import build_and_package_info as info

    smi = "no nvidia-smi"
    if shutil.which("nvidia-smi"):
        found = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,compute_cap",
                                "--format=csv,noheader"], capture_output=True, text=True)
        smi = found.stdout.strip() or found.stderr.strip()
    return {"nvidia_smi": smi, "python": sys.version.split()[0],
            "torch": torch.__version__, "torch_cuda": torch.version.cuda, "transformers": transformers.__version__,
            "onnx": onnx.__version__, "onnxruntime": ort.__version__, "onnxruntime_file": ort.__file__,
            "onnxruntime_cuda": getattr(info, "cuda_version", None), "providers": ort.get_available_providers(),
            "cpu_count": os.cpu_count()}


def probe_graph(path: Path) -> Path:
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="matmul")], "probe",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])],
                              [helper.make_tensor("w", TensorProto.FLOAT, [2, 2], [1.0, 2.0, 3.0, 4.0])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10   # onnx 1.23 writes 14 by default, which onnxruntime 1.31 refuses to read
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(path))
    return path


def refusal(case: str, dry: bool) -> dict[str, Any]:
    """One forced provider failure (or the control): what onnxruntime did, and what `open_session` did."""
    import onnxruntime as ort

    from laya_serverless.core.providers import (
        CPU_PROVIDER,
        CUDA_OPTIONS,
        CUDA_PROVIDER,
        ONNXRUNTIME,
        Placement,
        open_session,
    )
    from laya_serverless.errors import DeviceUnavailable

    graph = probe_graph(Path("/tmp/laya-probe-%s.onnx" % case))
    options = dict(CUDA_OPTIONS, device_id="99") if case == "missing-device-id" else dict(CUDA_OPTIONS)
    try:
        raw = ort.InferenceSession(str(graph), providers=[(CUDA_PROVIDER, options), CPU_PROVIDER])
        placed: Any = raw.get_providers()
    except Exception as exc:  # onnxruntime raising is a result too (it did not hand back a CPU session)
        placed = "raised %s: %s" % (type(exc).__name__, exc)

    class ProbeSession:   # the probe graph is no decision graph: only the providers matter here
        def __init__(self, session: Any) -> None:
            self.session = session

        def active_providers(self) -> list[str]:
            return list(self.session.get_providers())

    # The providers open_session asks for, with the forced failure's option where there is one.
    placement = Placement(
        available=(lambda: [CUDA_PROVIDER, CPU_PROVIDER]) if dry else ONNXRUNTIME.available,
        open=lambda g, p, _t, _o: ProbeSession(ort.InferenceSession(str(g), providers=[
            (CUDA_PROVIDER, options) if (s if isinstance(s, str) else s[0]) == CUDA_PROVIDER else s for s in p])))
    result: dict[str, Any] = {"cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
                              "provider_options": options, "onnxruntime_placed_it_on": placed}
    try:
        session = open_session(graph, "cuda", placement=placement)
        result["open_session"] = "opened on %s" % session.active_providers()
    except DeviceUnavailable as exc:
        result["open_session"] = "refused: %s" % exc
    except Exception as exc:  # noqa: BLE001 - anything else is reported as it is
        result["open_session"] = "raised %s: %s" % (type(exc).__name__, exc)
    return result


def checkpoint(kind: str, work: Path) -> dict[str, Any]:
    """The carried checkpoint, or (the base shape) one redrawn here from its seed with the carried scorer."""
    from laya_artifacts.goldens.record import load_goldens, weights_sha256

    carried, goldens_file = work / "ckpt" / kind, work / "code" / GOLDENS[kind]
    goldens = load_goldens(goldens_file)["checkpoint"]["weights_sha256"] if goldens_file.is_file() else None
    result: dict[str, Any] = {"goldens_weights_sha256": goldens}
    if kind != "modernbert-base":
        result.update(path=str(carried), weights_sha256=weights_sha256(carried))
    else:
        result.update(path=str(redraw_base(work, result)), weights_sha256=weights_sha256(work / "ckpt" / kind))
    result["matches_goldens"] = result["weights_sha256"] == goldens
    result["matches_build_host"] = result["weights_sha256"] == expected_sha256(work, kind)
    return result


def expected_sha256(work: Path, kind: str) -> str | None:
    """The weights' hash where the payload was packed (gpu_payload.py)."""
    if kind == "modernbert-base":
        return (work / "ckpt" / "modernbert-base-fixed" / "weights_sha256").read_text().strip()
    record = work / "code" / "payload.json"
    return json.loads(record.read_text())["checkpoints_sha256"].get(kind) if record.is_file() else None


def redraw_base(work: Path, result: dict[str, Any]) -> Path:
    from safetensors.torch import load_file, save_file

    from laya_artifacts.checkpoints.make import make_checkpoint
    from laya_artifacts.goldens.record import weights_sha256

    fixed, out = work / "ckpt" / "modernbert-base-fixed", work / "ckpt" / "modernbert-base"
    started = time.time()
    make_checkpoint("modernbert-base", out)
    result["redraw_s"] = round(time.time() - started, 1)
    expected = (fixed / "weights_sha256").read_text().strip()
    result["redrawn_as_is_matches"] = weights_sha256(out) == expected
    if not result["redrawn_as_is_matches"]:   # the float64 scorer and the tokenizer, as the build host made them
        for item in fixed.iterdir():
            if item.name not in ("scorer.safetensors", "weights_sha256"):
                (shutil.copytree if item.is_dir() else shutil.copy)(item, out / item.name, **(
                    {"dirs_exist_ok": True} if item.is_dir() else {}))
        weights = load_file(str(out / "model.safetensors"))
        weights.update(load_file(str(fixed / "scorer.safetensors")))
        save_file(weights, str(out / "model.safetensors"))
        result["patched_scorer_and_tokenizer"] = True
    return out


def build(kind: str, path: str, work: Path, dry: bool) -> None:
    """Both cuda targets of one checkpoint; each result to results/KIND-TARGET.json."""
    import torch

    from laya_artifacts import build as recipe
    from laya_artifacts.build import GateFailed, build_artifact
    from laya_artifacts.spec import BuildSeams, BuildSpec

    torch.set_num_threads(4)
    placement = None
    # as tests/functional/laya_artifacts/test_cuda_build.py: the cuda path, gated on the CPU provider, a fake GPU
    if dry:
        from laya_serverless.core.providers import CPU_PROVIDER, CUDA_PROVIDER, Placement

        gate = recipe.run_gate
        recipe.run_gate = lambda a, g, t, **kw: gate(a, g, t, **{**kw, "device": "cpu"})  # type: ignore[assignment]
        recipe.gpu_profile = lambda: {"gpu": {"name": "dry run: no GPU"}, "gpu_count": 0}  # type: ignore[assignment]
        placement = Placement(available=lambda: [CUDA_PROVIDER, CPU_PROVIDER])
    results = work / "results"
    results.mkdir(exist_ok=True)
    if not (work / "code" / GOLDENS[kind]).is_file():   # never recorded here: staged ungated, for latency alone
        stage_ungated(kind, Path(path), work, results)
        return
    for target in TARGETS:
        out = work / "art" / ("%s-%s" % (kind, target))
        started = time.time()
        record: dict[str, Any] = {"kind": kind, "target": target, "out": str(out)}
        try:
            kwargs = {"placement": placement} if placement else {}
            spec = BuildSpec(target, name=kind, goldens=work / "code" / GOLDENS[kind])
            _, report = build_artifact(Path(path), spec, out,
                                       seams=BuildSeams(progress=lambda m: print(m, flush=True), **kwargs))
            record["passed"] = report.passed
        except GateFailed as exc:
            record.update(passed=False, failure=str(exc))
        except Exception as exc:  # one configuration's error is a result; the next target still builds
            record.update(passed=False, error="%s: %s" % (type(exc).__name__, exc))
        record["build_s"] = round(time.time() - started, 1)
        report_file = out / "parity_report.json"
        if report_file.is_file():
            record["report"] = json.loads(report_file.read_text())
        if (out / "manifest.json").is_file():
            record["manifest_configuration"] = json.loads((out / "manifest.json").read_text())["configuration"]
        (results / ("%s-%s.json" % (kind, target))).write_text(json.dumps(record, indent=1, default=str))
        print("RESULT", kind, target, record.get("passed"), record["build_s"], "s", flush=True)


def stage_ungated(kind: str, checkpoint_dir: Path, work: Path, results: Path) -> None:
    """Both targets' graphs as the build stages them, without a gate (no goldens were carried for `kind`)."""
    import shutil
    import tempfile

    from laya_artifacts.export.cuda import convert_fp16
    from laya_artifacts.export.onnx_export import export_checkpoint
    from laya_serverless.artifact.layout import GRAPH_FILE, TOKENIZER_FILE, copy_decode_config

    with tempfile.TemporaryDirectory() as scratch:
        started = time.time()
        export_checkpoint(checkpoint_dir, Path(scratch))
        exported = round(time.time() - started, 1)
        for target in TARGETS:
            out = work / "art" / ("%s-%s" % (kind, target))
            out.mkdir(parents=True)
            record: dict[str, Any] = {"kind": kind, "target": target, "out": str(out), "passed": None,
                                      "staged_ungated": "no goldens carried", "export_s": exported}
            if target == "cuda-fp16":
                record["recipe"] = convert_fp16(Path(scratch) / GRAPH_FILE, out / GRAPH_FILE)
            else:
                shutil.copy(Path(scratch) / GRAPH_FILE, out / GRAPH_FILE)
            shutil.copy(Path(scratch) / TOKENIZER_FILE, out / TOKENIZER_FILE)
            copy_decode_config(Path(scratch), out, optimized_offline=False)
            (results / ("%s-%s.json" % (kind, target))).write_text(json.dumps(record, indent=1, default=str))
            print("RESULT", kind, target, "staged ungated", flush=True)


# ---- the driver -------------------------------------------------------------------------------------------------

def gate_figures(record: dict[str, Any]) -> dict[str, Any]:
    report = record.get("report") or {}
    keep = ("passed", "rows", "max_probability_error", "max_action_error", "hard_mismatches", "splits", "cpu_retry",
            "tolerance")
    figures = {k: report[k] for k in keep if k in report}
    return {"passed": record.get("passed"), "build_s": record.get("build_s"), **figures,
            **{k: record[k] for k in ("failure", "error", "staged_ungated") if k in record}}


def drive(run: Run, kinds: list[str], no_build: set[str]) -> None:
    me = str(Path(__file__).resolve())
    run.save("payload", json.loads((run.code / "payload.json").read_text()) if (run.code / "payload.json").is_file()
             else None)
    found = run.child("machine", [me, "child", "machine"], 90)
    run.save("machine", dict(found, result=read_json_line(run.logs / "machine.log")))
    base = None
    if "modernbert-base" in kinds:   # the slowest checkpoint first, in the background
        base = run.start("checkpoint-modernbert-base", [me, "child", "checkpoint", "modernbert-base",
                                                         "--work", str(run.work)])
    probes = {}
    for case, hide in (("control", None), ("no-visible-device", ""), ("missing-device-id", None)):
        env = dict(run.env, **({"CUDA_VISIBLE_DEVICES": hide} if hide is not None else {}))
        probes[case] = run.child("refusal-" + case, [me, "child", "refusal", case] + (["--dry"] if run.dry else []),
                                 60, env=env)
        probes[case]["result"] = read_json_line(run.logs / ("refusal-%s.log" % case))
    run.save("refusal", probes)
    checkpoints, builds = {}, {}
    for kind in kinds:
        if kind == "modernbert-base":
            continue
        checkpoints[kind] = run.child("checkpoint-" + kind, [me, "child", "checkpoint", kind, "--work", str(run.work)],
                                      60)
        checkpoints[kind]["result"] = read_json_line(run.logs / ("checkpoint-%s.log" % kind))
        if kind not in no_build:
            builds[kind] = run.start("build-" + kind, build_args(me, kind, checkpoints[kind]["result"], run))
    if base is not None:
        checkpoints["modernbert-base"] = run.wait("checkpoint-modernbert-base", base, run.build_deadline - elapsed())
        checkpoints["modernbert-base"]["result"] = read_json_line(run.logs / "checkpoint-modernbert-base.log")
    if base is not None and "modernbert-base" not in no_build:
        builds["modernbert-base"] = run.start("build-modernbert-base", build_args(
            me, "modernbert-base", checkpoints["modernbert-base"]["result"], run))
    run.save("checkpoints", checkpoints)
    finished = {kind: run.wait("build-" + kind, process, run.build_deadline - elapsed())
                for kind, process in builds.items()}
    results = {}
    for kind in builds:
        for target in TARGETS:
            path = run.work / "results" / ("%s-%s.json" % (kind, target))
            results["%s %s" % (kind, target)] = json.loads(path.read_text()) if path.is_file() else None
    run.save("builds", {k: gate_figures(v) if v else {"missing": finished[k.split()[0]]} for k, v in results.items()})
    (run.out / "builds.json").write_text(json.dumps(results, indent=1, default=str))
    bench = {}
    for kind in builds:
        if elapsed() > run.run_deadline - 30:
            bench[kind] = "skipped: %.0f s left" % (run.run_deadline - elapsed())
            continue
        staged = [run.work / "art" / ("%s-%s" % (kind, t)) for t in TARGETS]
        args = [str(run.code / "scripts" / "bench_gpu.py"), "--checkpoint",
                str((checkpoints[kind].get("result") or {}).get("path")), "--rounds", "3" if run.dry else "30",
                "--device", "cpu" if run.dry else "cuda"]
        args += ["--artifact=%s=%s" % (t, d) for t, d in zip(TARGETS, staged, strict=True)
                 if (d / "model.onnx").is_file()]
        bench[kind] = run.child("bench-" + kind, args, run.run_deadline - elapsed())
        bench[kind]["result"] = read_json_block(run.logs / ("bench-%s.log" % kind))
        run.save("bench", bench)
    run.save("bench", bench)


def build_args(me: str, kind: str, result: dict[str, Any] | None, run: Run) -> list[str]:
    return [me, "child", "build", kind, "--path", str((result or {}).get("path")), "--work", str(run.work)] + (
        ["--dry"] if run.dry else [])


def read_json_line(log: Path) -> Any:
    for line in reversed(log.read_text(errors="replace").splitlines()):
        if line.startswith("JSON "):
            return json.loads(line[5:])
    return None


def read_json_block(log: Path) -> Any:
    text = log.read_text(errors="replace")
    start = text.find("{\n")
    try:
        return json.loads(text[start:]) if start >= 0 else None
    except json.JSONDecodeError:
        return None


def collect(run: Run) -> None:
    """The logs and the parity reports in one file each (8 files come back at most)."""
    with (run.out / "logs.txt").open("w") as logs:
        for log in sorted(run.logs.glob("*.log")):
            logs.write("==== %s\n%s\n" % (log.name, log.read_text(errors="replace")))
    with (run.out / "parity_reports.txt").open("w") as reports:
        for report in sorted((run.work / "art").glob("*/parity_report.txt")):
            reports.write("==== %s\n%s\n" % (report.parent.name, report.read_text()))


def parser() -> argparse.ArgumentParser:
    """This script's arguments (tests/unit/test_docs_commands.py parses the docs' command lines with it)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=("device", "dry-run", "child"))
    parser.add_argument("what", nargs="*")
    parser.add_argument("--work", type=Path)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--path")
    parser.add_argument("--dry", action="store_true")
    parser.add_argument("--budget", type=float, help="seconds this run may take in all (default: 540 on the device)")
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--no-build", default="", help="kinds whose checkpoint is made but not built (dry runs)")
    return parser


def main() -> int:
    args = parser().parse_args()
    if args.mode == "child":
        what = args.what[0]
        if what == "machine":
            print("JSON " + json.dumps(machine()))
        elif what == "refusal":
            print("JSON " + json.dumps(refusal(args.what[1], args.dry)))
        elif what == "checkpoint":
            print("JSON " + json.dumps(checkpoint(args.what[1], args.work)))
        elif what == "build":
            build(args.what[1], args.path, args.work, args.dry)
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    run = Run(args.work.resolve(), args.out.resolve(), args.mode == "dry-run", args.budget)
    try:
        drive(run, [k for k in args.kinds.split(",") if k], set(args.no_build.split(",")))
    finally:
        collect(run)
        run.save("done", True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
