"""`laya-artifacts`: build artifacts from Laya checkpoints, and create local test checkpoints."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from laya_artifacts.paths import BUILD_CACHE
from laya_serverless.command import Command, register

if TYPE_CHECKING:
    from laya_artifacts.qat.finetune import QatSettings


def _progress(message: str) -> None:
    print("[laya-artifacts] %s" % message, file=sys.stderr, flush=True)


def _fail(message: str) -> int:
    _progress("error: %s" % message)
    return 2


def _candidates(value: str | None) -> list[str] | None:
    return [name.strip() for name in value.split(",") if name.strip()] if value else None


def _build(args: argparse.Namespace) -> int:
    from laya_artifacts.checkpoints.sources import resolve_checkpoint
    from laya_artifacts.goldens.corpus import read_gate_cases
    from laya_artifacts.search.precision import check_candidate_names

    for path in args.gate_cases:  # users' rows are refused before anything else happens
        read_gate_cases(path)
    try:  # as are unknown candidates: without --target the corpus would be recorded first
        check_candidate_names(_candidates(args.candidates))
    except ValueError as exc:
        return _fail(str(exc))

    try:
        checkpoint, name, revision = resolve_checkpoint(args.checkpoint, args.revision, _progress)
    except Exception as exc:  # offline hub lookups fail in many ways; say which and stop
        return _fail("cannot resolve checkpoint %s: %s" % (args.checkpoint, exc))
    name = args.name or name
    started = time.perf_counter()
    try:
        artifact = (_build_target(args, checkpoint, name, revision, args.target, args.goldens) if args.target else
                    _build_default(args, checkpoint, name, revision))
    except ValueError as exc:  # argument validation (an unknown candidate); the build's own errors reach main
        return _fail(str(exc))
    _progress("built %s in %.1f s" % (artifact, time.perf_counter() - started))
    if args.sign_key:
        from laya_artifacts.deploy.sign import open_signer, sign_artifact

        _progress("signed: %s" % sign_artifact(artifact, open_signer(args.sign_key)))
    if args.publish:
        from laya_artifacts.deploy.publish import publish
        from laya_serverless.artifact.store import open_store

        publish(artifact, open_store(args.store), _progress)
    return 0


def _out(args: argparse.Namespace, name: str, target: str) -> Path:
    """NAME-TARGET under the build cache, or --out (without --target, a prefix: OUT-TARGET)."""
    if args.out:
        return Path(args.out) if args.target else Path("%s-%s" % (args.out, target))
    return BUILD_CACHE / "artifacts" / ("%s-%s" % (name.replace("/", "--"), target))


def _build_target(args: argparse.Namespace, checkpoint: Path, name: str, revision: str | None, target: str,
                  goldens: str | Path | None, candidates: Sequence[str] | None = None) -> Path:
    from laya_artifacts.build import build_artifact
    from laya_artifacts.spec import BuildSeams, BuildSpec

    spec = BuildSpec.of(target, name=name, revision=revision, goldens=goldens, gate_cases=args.gate_cases,
                        candidates=candidates or _candidates(args.candidates),
                        exhaustive_search=args.exhaustive_search, min_speedup=args.min_speedup,
                        search_records=Path(args.search_records) if args.search_records else None,
                        research=args.research, emulate_classes=args.emulate_classes,
                        quantization_aware=_qat_settings(args))
    artifact, _ = build_artifact(checkpoint, spec, _out(args, name, target), seams=BuildSeams(progress=_progress))
    return artifact


def _build_default(args: argparse.Namespace, checkpoint: Path, name: str, revision: str | None) -> Path:
    """No --target: a served artifact in minutes for any checkpoint. cpu-int8 searched over the public recipes only
    (unless --candidates names others), then exact cpu-fp32 where no candidate passes and wins; the corpus is
    recorded once, for both. The int8 verdict is said either way."""
    from laya_artifacts.errors import GateFailed
    from laya_artifacts.goldens.record import corpus_directory, recorded_goldens
    from laya_artifacts.search.quantize import PUBLIC_RECIPES
    from laya_serverless.artifact.targets import CPU_FP32, CPU_INT8

    candidates = _candidates(args.candidates) or list(PUBLIC_RECIPES)
    _progress("no --target: cpu-int8 searched over %s, then exact cpu-fp32 if none passes and wins "
              "(--target cpu-int8 searches every candidate; --target cpu-fp32 skips the search)"
              % ", ".join(candidates))
    goldens = args.goldens or recorded_goldens(checkpoint, name, corpus_directory(checkpoint, name, BUILD_CACHE),
                                               revision, _progress)
    try:
        artifact = _build_target(args, checkpoint, name, revision, CPU_INT8, goldens, candidates)
    except GateFailed as exc:
        _progress("int8 verdict: refused: %s" % str(exc).splitlines()[0])
        _progress("building exact %s instead" % CPU_FP32)
        return _build_target(args, checkpoint, name, revision, CPU_FP32, goldens)
    _progress("int8 verdict: passed the gate and faster than FP32 on this machine (%s)" % artifact)
    return artifact


def _int8_options(build: argparse.ArgumentParser) -> None:
    """`build`'s options for what a cpu-int8 build remembers and proves beyond this machine."""
    build.add_argument("--search-records", default=str(BUILD_CACHE / "search-records"), metavar="DIR",
                       help="where cpu-int8 search decisions are kept and reused ('' turns reuse off)")
    build.add_argument("--no-emulate-classes", dest="emulate_classes", action="store_false",
                       help="do not prove the AVX2 class, nor the arm64 ones where the arm64 package is built, "
                       "under qemu (they are then left to the deploy-time gate)")
    build.add_argument("--research", action="store_true",
                       help="search again even where a search record holds this search's decision")
    _qat_options(build)


def _qat_options(build: argparse.ArgumentParser) -> None:
    """`build`'s options for the quantization-aware fine-tune (`qat/finetune.py`)."""
    from laya_artifacts.qat.finetune import QatSettings
    from laya_artifacts.qat.scheme import TRAINABLE

    d = QatSettings()
    qat = build.add_argument_group("quantization-aware fine-tune (cpu-int8)")
    qat.add_argument("--quantization-aware", action="store_true",
                     help="fine-tune a copy under the artifact's int8 scheme, distilled from this checkpoint's "
                          "upstream FP32 on the gate's selection cases (and states made of them), then "
                          "build and gate the copy against this checkpoint's goldens")
    qat.add_argument("--qat-steps", type=int, default=d.steps, metavar="N", help="default %(default)s (one case each)")
    qat.add_argument("--qat-lr", type=float, default=d.lr, metavar="LR", help="default %(default)s")
    qat.add_argument("--qat-seed", type=int, default=d.seed, metavar="N", help="default %(default)s")
    qat.add_argument("--qat-generated-per-case", type=int, default=d.generated_per_case, metavar="N",
                     help="states generated from each selection text (default %(default)s)")
    qat.add_argument("--qat-trainable", choices=TRAINABLE, default=d.trainable,
                     help="head: the decision head and the encoder's norms and biases (default); all: every "
                          "encoder tensor but the embedding tables")
    qat.add_argument("--qat-train-layers", type=int, default=d.train_layers, metavar="N",
                     help="with head: also all of the top N encoder layers (default %(default)s)")
    qat.add_argument("--qat-threads", type=int, default=d.threads, metavar="N", help="torch threads (default "
                                                                                     "%(default)s)")
    qat.add_argument("--qat-device", default=d.device, help="where the student trains: cpu (default) or cuda")
    qat.add_argument("--qat-dir", metavar="DIR", help="where the fine-tune keeps its state and the tuned copy "
                                                      "(default: beside --out, OUT.qat)")
    qat.add_argument("--resume", action="store_true", help="continue the fine-tune from the state saved in --qat-dir")


def _qat_settings(args: argparse.Namespace) -> QatSettings | None:
    if not args.quantization_aware:
        return None
    from laya_artifacts.qat.finetune import QatSettings

    return QatSettings(steps=args.qat_steps, lr=args.qat_lr, seed=args.qat_seed, trainable=args.qat_trainable,
                       generated_per_case=args.qat_generated_per_case, train_layers=args.qat_train_layers,
                       threads=args.qat_threads, device=args.qat_device,
                       resume=args.resume, work_dir=Path(args.qat_dir) if args.qat_dir else None)


def _build_arguments(build: argparse.ArgumentParser) -> None:
    from laya_artifacts.search.precision import CANDIDATE_NAMES, MIN_SPEEDUP
    from laya_serverless.artifact.store import DEFAULT_LOCAL_STORE
    from laya_serverless.artifact.targets import CPU_INT8, TARGETS  # cuda-* build and gate only on an NVIDIA GPU

    build.add_argument("checkpoint", help="a local checkpoint directory, or a Hugging Face id (owner/name[/subfolder])")
    build.add_argument("--revision", help="Hugging Face branch, tag or commit (default main), recorded as its commit")
    build.add_argument("--target", choices=TARGETS,
                       help="the one target to build, refused with exit 2 if its gate fails (default: none: %s "
                            "searched over the public int8 recipes only, then exact cpu-fp32 if none passes and "
                            "wins, so a served artifact either way)" % CPU_INT8)
    build.add_argument("--name", help="checkpoint name in the store (default: the directory or hub id)")
    build.add_argument("--out", help="artifact directory to write (default: .cache/artifacts/NAME-TARGET; without "
                                     "--target, OUT is a prefix: OUT-cpu-int8, OUT-cpu-fp32)")
    build.add_argument("--goldens", help="golden file to gate against (default: record the corpus now with upstream)")
    build.add_argument("--gate-cases", action="append", default=[], metavar="FILE.jsonl",
                       help="your own gate cases, one JSON object per line (state, questions, optional id, "
                            "controls, split); repeatable; recorded with upstream and gated like the corpus")
    build.add_argument("--candidates", metavar="NAME[,NAME]",
                       help="cpu-int8: search only these candidates (%s)" % ", ".join(CANDIDATE_NAMES))
    build.add_argument("--exhaustive-search", action="store_true",
                       help="cpu-int8: gate every candidate on selection, not only until the fastest passes")
    build.add_argument("--min-speedup", type=float, default=MIN_SPEEDUP, metavar="X",
                       help="cpu-int8: a candidate must be X times as fast as FP32 on this machine "
                            "(default %(default)s; 0 lifts the rule)")
    _int8_options(build)
    build.add_argument("--store", default=DEFAULT_LOCAL_STORE, help="s3://bucket/prefix or a folder")
    build.add_argument("--publish", action="store_true", help="publish to --store once the gate passed")
    build.add_argument("--sign-key", metavar="KEY", help="sign the gated artifact: a KMS key ARN or a PEM private key")


def environment() -> dict[str, Any]:
    """What a build here depends on: tool versions, this CPU and its int8 kernel class, the runtime's lock."""
    from laya_artifacts.build import tool_versions
    from laya_artifacts.package.runtime_lock import runtime_record
    from laya_serverless.artifact.cpu import cpu_family
    from laya_serverless.artifact.platform import cpu_profile, int8_kernels

    profile, tools = cpu_profile(), tool_versions()
    return {"tools": tools, "onnxruntime": tools.get("onnxruntime") or tools.get("onnxruntime-gpu"),
            "cpu": profile, "cpu_class": cpu_family(profile), "int8_kernels": int8_kernels(profile),
            "runtime_lock": runtime_record()}


def _env(args: argparse.Namespace) -> int:
    found = environment()
    if args.json:
        print(json.dumps(found, indent=2, sort_keys=True))
        return 0
    lock = found["runtime_lock"]
    lines = [*("%s: %s" % kv for kv in found["tools"].items()),
             "cpu: %s (%s)" % (found["cpu"].get("model") or "?", found["cpu"].get("machine")),
             "cpu class: %s" % found["cpu_class"], "int8 kernels: %s" % found["int8_kernels"],
             "runtime lock: %s sha256 %s" % (lock["lock"], lock["sha256"] or lock.get("note"))]
    print("\n".join(lines))
    return 0


def _env_arguments(env: argparse.ArgumentParser) -> None:
    env.add_argument("--json", action="store_true", help="one JSON object instead of lines")


COMMANDS = (
    Command("build", "export, quantize, gate and describe one artifact", _build_arguments, _build),
    Command("env", "what a build here depends on: tool versions, the CPU and its int8 kernels, onnxruntime, the "
            "runtime lock's sha256", _env_arguments, _env),
)


def commands() -> tuple[Command, ...]:
    """Every `laya-artifacts` command: the CLI's own, then each stage's `COMMANDS`, in the order `--help` lists."""
    from laya_artifacts import bench, quickstart
    from laya_artifacts.checkpoints import commands as checkpoints
    from laya_artifacts.deploy import commands as deploy
    from laya_artifacts.goldens import commands as goldens
    from laya_artifacts.package import commands as package
    from laya_artifacts.tune import commands as tune

    return (*COMMANDS, *goldens.COMMANDS, *deploy.COMMANDS, *quickstart.COMMANDS, *package.COMMANDS,
            *bench.COMMANDS, *tune.COMMANDS, *checkpoints.COMMANDS)


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="laya-artifacts", description=__doc__)
    root.set_defaults(progress=_progress, fail=_fail)   # every command reports as the CLI does
    register(root.add_subparsers(dest="command", required=True), commands())
    return root


def main(argv: Sequence[str] | None = None) -> int:
    from laya_serverless.errors import LayaError

    args = parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)   # `tune` records the command it ran
    try:
        return int(args.run(args))
    except (LayaError, FileNotFoundError) as exc:  # a BuildError, or the runtime's (ArtifactError): one line
        return _fail(str(exc))


if __name__ == "__main__":
    raise SystemExit(main())
