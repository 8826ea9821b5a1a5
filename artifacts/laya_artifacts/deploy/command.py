"""`laya-artifacts deploy` (`make deploy`): from the configured checkpoints to a working API on AWS, in six steps.

    1 build        each checkpoint built and gated: cpu-int8 where its gate passes, and always cpu-fp32
    2 storage      the artifact bucket (`-c artifact_bucket=NAME`, else laya-serverless-<account>-<region>),
                   created private, encrypted and versioned when absent (`deploy/bucket.py`)
    3 publish      every artifact to s3://<bucket>/<artifact_prefix> (`publish.publish`), signed with the account's
                   KMS signing key (`sign.ensure_signing_key`; `-c signing=false` publishes unsigned); the ids go
                   to the stack as `-c artifact_pins`, so a new artifact is a new version that rolls out as a canary
    4 deploy       `cdk deploy` of the stack on that bucket, `-c target=` the target every checkpoint has
    5 deploy gate  for int8, the records the stack's deploy-time gate wrote under gates/ (CloudFormation
                   waited for it); reported, since an unproven int8 artifact serves its cpu-fp32 one
    6 smoke test   GET /health and one decision through `ApiUrl`, keyed from Secrets Manager (`deploy/smoke.py`)

Each step is a function over injected seams (boto3 clients, `run_cdk`, an HTTP client), so the tests run
every step against moto and a local server and replace only the CloudFormation call. Whatever fails in a
step is raised as one `DeployFailed` naming it: "step 4/6 deploy: cdk exited 1 ...".
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from laya_artifacts.checkpoints.demo import DEMO_NAME
from laya_artifacts.deploy.bucket import (
    DEFAULT_JOBS_RETENTION_DAYS,
    MAX_JOBS_RETENTION_DAYS,
    MULTIPART_ABORT_DAYS,
    default_bucket_name,
    ensure_bucket,
    ensure_lifecycle,
)
from laya_artifacts.deploy.graph_sizes import graph_expansions, graph_sizes
from laya_artifacts.deploy.preflight import aws_region, check_credentials
from laya_artifacts.deploy.smoke import Http, smoke_test, urllib_client
from laya_artifacts.errors import DeployFailed, GateFailed
from laya_artifacts.paths import BUILD_CACHE
from laya_serverless.artifact.store import ObjectStore, S3Store
from laya_serverless.artifact.targets import CPU_FP32, CPU_INT8, CPU_TARGETS, FALLBACK_TARGET
from laya_serverless.settings import DEPLOYED, Settings

STEPS = ("build", "storage", "publish", "deploy", "deploy gate", "smoke test")
# The CDK app's names (laya_infra.constants; a test ties them): the stack, and the store's default key prefix.
STACK_NAME = "LayaServerless"
DEFAULT_ARTIFACT_PREFIX = "laya-artifacts"
OUTPUTS = ("ApiUrl", "ApiKeySecretArn", "ArtifactBucketName", "ArtifactStore", "DeployGateFunctionName")
INFRA_DIR = Path(__file__).resolve().parents[3] / "infra"
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")

Progress = Callable[[str], None]
Resolver = Callable[[str], tuple[Path, str, str | None]]
"""A checkpoint source (`demo`, a directory, a hub id) -> (directory, name, revision)."""
Builder = Callable[[Path, str, str | None, str], Path]
"""(checkpoint directory, name, revision, target) -> a gated artifact directory; raises GateFailed."""
RunCdk = Callable[[Sequence[str]], int]
"""The CDK CLI's arguments -> its exit status (the outputs come back in the `--outputs-file` it is given)."""
T = TypeVar("T")


@dataclass(frozen=True)
class Request:
    """What to deploy: checkpoint sources to build (None: the demo, unless artifacts are given), artifacts
    already built, the targets to try, `-c` context for the stack and arguments for `cdk deploy` itself."""

    checkpoints: tuple[str, ...] | None = None
    artifacts: tuple[Path, ...] = ()
    targets: tuple[str, ...] = (CPU_INT8, CPU_FP32)
    context: Mapping[str, str] = field(default_factory=dict)
    cdk_args: tuple[str, ...] = ()
    cache: Path = BUILD_CACHE
    revision: str | None = None  # the one Hugging Face checkpoint's revision; None: main, resolved to its commit


@dataclass(frozen=True)
class Seams:
    """Everything a deploy touches outside this process. `resolve`/`build` default to the real pipeline."""

    s3: Any
    sts: Any
    secrets: Any
    run_cdk: RunCdk
    http: Http = urllib_client
    resolve: Resolver | None = None
    build: Builder | None = None
    sleep: Callable[[float], None] = time.sleep
    kms: Any = None  # signs what is published with the account's signing key (none: unsigned, -c signing off)


@dataclass
class Built:
    """One checkpoint's artifacts by target, and why a target's gate refused it."""

    name: str
    artifacts: dict[str, Path] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Deployed:
    url: str
    context: dict[str, str]
    published: dict[str, str]          # "checkpoint/target" -> artifact id
    outputs: dict[str, str]
    gate: list[str]
    smoke: dict[str, Any]


def _safe(name: str) -> str:
    return _SAFE.sub("--", name)


def pipeline_builder(cache: Path, progress: Progress) -> Builder:
    """The real build: the gate corpus recorded once per checkpoint (beside it when it lives in `cache`, as the
    demo does for `make serve` too), then `build_artifact` into `cache/artifacts/`."""

    def build(checkpoint: Path, name: str, revision: str | None, target: str) -> Path:
        from laya_artifacts.build import build_artifact
        from laya_artifacts.goldens.record import corpus_directory, recorded_goldens
        from laya_artifacts.spec import BuildSeams, BuildSpec

        goldens = recorded_goldens(checkpoint, name, corpus_directory(checkpoint, name, cache), revision, progress)
        out = Path(cache) / "artifacts" / ("%s-%s-%d" % (_safe(name), target, time.time()))
        spec = BuildSpec(target, name=name, revision=revision, goldens=goldens,
                         search_records=Path(cache) / "search-records", emulate_classes=True)
        build_artifact(checkpoint, spec, out, seams=BuildSeams(progress=progress))
        return out

    return build


def _targets(requested: Sequence[str]) -> list[str]:
    unknown = [t for t in requested if t not in CPU_TARGETS]
    if unknown:
        raise DeployFailed("--targets %s: Lambda serves %s only" % (",".join(unknown), " and ".join(CPU_TARGETS)))
    return [t for t in (CPU_INT8, CPU_FP32) if t in requested or t == FALLBACK_TARGET]  # fp32 always


def build_step(request: Request, resolve: Resolver, build: Builder, progress: Progress) -> list[Built]:
    """Step 1: the given artifacts as they are, then each checkpoint built for each target (int8 first); an int8
    refused by its gate is reported and skipped, a refused cpu-fp32 fails. Every checkpoint needs cpu-fp32."""
    from laya_serverless.artifact.manifest import verify_artifact

    targets, found = _targets(request.targets), dict[str, Built]()
    for directory in request.artifacts:
        manifest = verify_artifact(Path(directory))
        name = str(manifest.checkpoint["name"])
        found.setdefault(name, Built(name)).artifacts[manifest.target] = Path(directory)
        progress("using %s/%s as built in %s" % (name, manifest.target, directory))
    sources = request.checkpoints if request.checkpoints is not None else () if request.artifacts else (DEMO_NAME,)
    for source in sources:
        checkpoint, name, revision = resolve(source)
        built = found.setdefault(name, Built(name))
        for target in [t for t in targets if t not in built.artifacts]:
            progress("building %s/%s from %s" % (name, target, checkpoint))
            try:
                built.artifacts[target] = build(checkpoint, name, revision, target)
            except GateFailed as exc:
                if target == FALLBACK_TARGET:
                    raise
                built.refused[target] = str(exc).splitlines()[0]
                progress("the %s gate refused %s: %s" % (target, name, built.refused[target]))
    if not found:
        raise DeployFailed("nothing to deploy: name a checkpoint or an artifact")
    lacking = sorted(name for name, built in found.items() if FALLBACK_TARGET not in built.artifacts)
    if lacking:
        raise DeployFailed("%s has no %s artifact; every checkpoint needs one (it serves wherever int8 is unproven)"
                           % (", ".join(lacking), FALLBACK_TARGET))
    return list(found.values())


def plan_context(context: Mapping[str, str], built: Sequence[Built], progress: Progress) -> dict[str, str]:
    """Step 1's verdict, as context: `deployed` (default english=<the one checkpoint>) and `target`: cpu-int8 when
    every deployed checkpoint has one, else cpu-fp32 (`-c target=` is honoured only if every one has it)."""
    plan, by_name = dict(context), {b.name: b for b in built}
    if "deployed" not in plan:
        if len(by_name) > 1:
            raise DeployFailed("%d checkpoints (%s): say which name serves which with -c deployed=english=%s,..."
                               % (len(by_name), ", ".join(by_name), next(iter(by_name))))
        plan["deployed"] = "english=%s" % next(iter(by_name))
    stored = list(dict.fromkeys(Settings.from_environ({DEPLOYED: plan["deployed"]}).deployment.deployed.values()))
    unknown = [s for s in stored if s not in by_name]
    if unknown:
        raise DeployFailed("-c deployed=%s names %s, which this deploy neither built nor was given"
                           % (plan["deployed"], ", ".join(unknown)))
    chosen = plan.get("target") or (CPU_INT8 if all(CPU_INT8 in by_name[s].artifacts for s in stored) else CPU_FP32)
    lacking = [s for s in stored if chosen not in by_name[s].artifacts]
    if lacking:
        why = "; ".join(by_name[s].refused.get(chosen, "not built") for s in lacking)
        raise DeployFailed("-c target=%s, but %s has no %s artifact (%s)" % (chosen, ", ".join(lacking), chosen, why))
    plan["target"] = chosen
    if "graph_mb" not in plan:   # the stack sums what each checkpoint needs at INIT (infra/laya_infra/sizing.py)
        sizes = graph_sizes({name: by_name[name].artifacts.values() for name in stored})
        if sizes:
            plan["graph_mb"] = sizes
        grows = graph_expansions({name: by_name[name].artifacts.values() for name in stored})
        if grows and "expands_at_load" not in plan:
            plan["expands_at_load"] = grows
    progress("serving %s as %s" % (plan["deployed"], chosen))
    return plan


def storage_step(s3: Any, sts: Any, context: Mapping[str, str], progress: Progress) -> str:
    """Step 2: the bucket named by `-c artifact_bucket`, or this account's default, there and private."""
    region = str(s3.meta.region_name)
    name = context.get("artifact_bucket") or default_bucket_name(sts, region)
    created = ensure_bucket(s3, name, region)
    progress("%s s3://%s (%s)" % ("created" if created else "using", name, region))
    # The stack takes this bucket as an existing one and cannot manage its rules: job data expires from here.
    days_text = str(context.get("jobs_retention_days") or DEFAULT_JOBS_RETENTION_DAYS)
    if not days_text.isdigit() or not 1 <= int(days_text) <= MAX_JOBS_RETENTION_DAYS:
        raise DeployFailed("-c jobs_retention_days must be days between 1 and %d, got %r"
                           % (MAX_JOBS_RETENTION_DAYS, days_text))
    prefix = context.get("artifact_prefix", DEFAULT_ARTIFACT_PREFIX).strip("/")
    if ensure_lifecycle(s3, name, prefix, int(days_text)):
        progress("    lifecycle: %s/jobs/ expires after %s days, unfinished uploads after %d"
                 % (prefix, days_text, MULTIPART_ABORT_DAYS))
    return name


def publish_step(built: Sequence[Built], store: ObjectStore, progress: Progress, signer: Any = None) -> dict[str, str]:
    """Step 3: every artifact (signed by `signer` when given), cpu-fp32 first (what serves where int8 is unproven)."""
    from laya_artifacts.deploy.publish import publish

    published = {}
    for each in built:
        for target in sorted(each.artifacts, key=lambda t: t != FALLBACK_TARGET):
            published["%s/%s" % (each.name, target)] = publish(each.artifacts[target], store, progress, signer)
    return published


def signing_step(kms: Any, context: dict[str, str], progress: Progress) -> Any:
    """The signer of step 3: the account's signing key (created once, like the bucket), which the stack is told
    to trust with `-c signing_key`; None without a KMS client or with `-c signing=false`."""
    from laya_artifacts.deploy.sign import KmsSigner, ensure_signing_key

    if kms is None or str(context.get("signing", "true")).lower() in ("false", "0", "no", "off"):
        return None
    arn = context.get("signing_key") or ensure_signing_key(kms)
    context["signing_key"] = arn
    progress("signing with %s" % arn)
    return KmsSigner(arn, kms)


def cdk_deploy_args(context: Mapping[str, str], outputs_file: Path, extra: Sequence[str] = ()) -> list[str]:
    flags = [arg for key, value in context.items() for arg in ("-c", "%s=%s" % (key, value))]
    return ["deploy", STACK_NAME, "--require-approval", "never", "--outputs-file", str(outputs_file),
            *flags, *extra]


def deploy_step(context: Mapping[str, str], run_cdk: RunCdk, workdir: Path, extra: Sequence[str] = (),
                progress: Progress = lambda _m: None) -> dict[str, str]:
    """Step 4: `cdk deploy` with the planned context; the stack's outputs, read from its outputs file."""
    Path(workdir).mkdir(parents=True, exist_ok=True)
    outputs_file = (Path(workdir) / "cdk-outputs.json").resolve()
    outputs_file.unlink(missing_ok=True)  # an earlier deploy's outputs must not pass for this one's
    args = cdk_deploy_args(context, outputs_file, extra)
    progress("cdk %s" % " ".join(args))
    status = run_cdk(args)
    if status != 0:
        raise DeployFailed("cdk exited %d (its output is above; a first deploy in an account and region needs "
                           "`cdk bootstrap` once, docs/deploy.md)" % status)
    try:
        outputs = json.loads(outputs_file.read_text(encoding="utf-8"))[STACK_NAME]
    except (OSError, ValueError, KeyError) as exc:
        raise DeployFailed("cdk wrote no %s outputs to %s (%s)" % (STACK_NAME, outputs_file, exc)) from exc
    if "ApiUrl" not in outputs:
        raise DeployFailed("the %s outputs in %s have no ApiUrl" % (STACK_NAME, outputs_file))
    return {str(k): str(v) for k, v in outputs.items()}


def gate_step(context: Mapping[str, str], published: Mapping[str, str], store: ObjectStore,
              outputs: Mapping[str, str]) -> list[str]:
    """Step 5: for an int8 deployment, each artifact's gate records under gates/ (what the stack's gate wrote)."""
    target = context["target"]
    if "int8" not in target:
        return ["%s needs no deploy gate" % target]
    if str(context.get("deploy_gate", "true")).lower() in ("false", "0", "no", "off"):
        return ["the deploy gate is off (-c deploy_gate=false): int8 serves only on the build CPU's int8 kernels"]
    lines = []
    function = outputs.get("DeployGateFunctionName", "the DeployGateFunctionName output")
    for key, artifact_id in published.items():
        if key.endswith("/" + target):
            kernels = [k.rsplit("/", 1)[-1].removesuffix(".json") for k in store.list("gates/%s/" % artifact_id)]
            lines.append("%s: gated on Lambda's CPU (%s)" % (key, ", ".join(kernels)) if kernels else
                         "%s: no gate record, so the API serves its %s artifact (/health says why under "
                         "target_fallbacks); re-run the gate's steps with `aws lambda invoke --function-name %s` "
                         "until it answers IsComplete (docs/operations.md, \"By hand\"), then deploy again"
                         % (key, FALLBACK_TARGET, function))
    return lines


def cdk_runner(infra: Path = INFRA_DIR, python_bin: Path | None = None) -> RunCdk:
    """The pinned CDK CLI (`infra/node_modules/.bin/cdk`) run in `infra/`, this Python first on PATH (the app
    is `python3 app.py`); its output goes straight to the terminal."""
    cdk = Path(infra) / "node_modules" / ".bin" / "cdk"

    def run(args: Sequence[str]) -> int:
        if not cdk.is_file():
            raise DeployFailed("%s is missing: install the pinned CDK CLI with `npm ci --prefix infra`" % cdk)
        bin_dir = str(python_bin or Path(sys.executable).parent)
        env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}
        env.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
        return subprocess.run([str(cdk), *args], cwd=infra, env=env, check=False).returncode

    return run


def aws_seams(environ: Mapping[str, str] | None = None) -> Seams:
    """boto3's session in the region `cdk deploy` uses (`aws_region`), its credentials, and the real CDK CLI."""
    import boto3

    session = boto3.Session()
    session = boto3.Session(region_name=aws_region(os.environ if environ is None else environ, session.region_name))
    return Seams(s3=session.client("s3"), sts=session.client("sts"), secrets=session.client("secretsmanager"),
                 run_cdk=cdk_runner(), kms=session.client("kms"))


def _step(number: int, run: Callable[[], T], progress: Progress) -> T:
    name = STEPS[number - 1]
    progress("step %d/%d %s" % (number, len(STEPS), name))
    try:
        return run()
    except Exception as exc:  # every failure of a step, ours or a library's, is that step's one error
        why = str(exc).strip() or type(exc).__name__
        raise DeployFailed("step %d/%d %s: %s" % (number, len(STEPS), name, why), step=name) from exc


def deploy(request: Request, seams: Seams, progress: Progress = lambda _m: None) -> Deployed:
    """Run the six steps in order; the first failure raises `DeployFailed` naming its step."""
    from laya_artifacts.checkpoints.sources import resolve_source

    resolve = seams.resolve or (lambda source: resolve_source(source, request.revision, request.cache, progress))
    build = seams.build or pipeline_builder(request.cache, progress)

    def first() -> tuple[list[Built], dict[str, str]]:
        if request.revision is not None and len(request.checkpoints or ()) != 1:
            raise DeployFailed("--revision pins one Hugging Face checkpoint: name exactly one --checkpoint (or build "
                               "each with `laya-artifacts build ID --revision REV` and deploy them with --artifact)")
        built = build_step(request, resolve, build, progress)
        return built, plan_context(request.context, built, progress)

    check_credentials(seams.sts, progress)   # minutes of building must not end in "no credentials"
    built, context = _step(1, first, progress)
    bucket = _step(2, lambda: storage_step(seams.s3, seams.sts, context, progress), progress)
    context["artifact_bucket"] = bucket
    store = S3Store(bucket, context.get("artifact_prefix", DEFAULT_ARTIFACT_PREFIX).strip("/"), seams.s3)
    published = _step(3, lambda: publish_step(built, store, progress, signing_step(seams.kms, context, progress)),
                      progress)
    # What this deploy published is what its function version serves: a new artifact is a new version (canary).
    context["artifact_pins"] = ",".join("%s=%s" % pair for pair in sorted(published.items()))
    outputs = _step(4, lambda: deploy_step(context, seams.run_cdk, request.cache / "deploy", request.cdk_args,
                                           progress), progress)
    gate = _step(5, lambda: gate_step(context, published, store, outputs), progress)
    for line in gate:
        progress("    " + line)
    smoke = _step(6, lambda: smoke_test(outputs, seams.secrets, seams.http, seams.sleep, progress), progress)
    progress("ready: %s (key: aws secretsmanager get-secret-value --secret-id %s)"
             % (outputs["ApiUrl"], outputs.get("ApiKeySecretArn", "none, -c auth=false")))
    return Deployed(outputs["ApiUrl"], context, published, outputs, gate, smoke)


__all__ = ["DEFAULT_ARTIFACT_PREFIX", "OUTPUTS", "STACK_NAME", "STEPS", "Built", "Deployed", "Request", "Seams",
           "aws_seams", "build_step", "cdk_deploy_args", "cdk_runner", "deploy", "deploy_step", "gate_step",
           "pipeline_builder", "plan_context", "publish_step", "signing_step", "storage_step"]
