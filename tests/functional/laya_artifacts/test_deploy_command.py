"""`laya-artifacts deploy` (`make deploy`) without AWS: every step but CloudFormation runs for real, on moto
(S3, STS, Secrets Manager) and a local server; the one thing replaced is `cdk deploy` itself.

The stand-in (`Cloud`) does what the stack would that later steps can see: it reads the `-c` flags cdk was
given with the stack's own `DeployConfig`, creates the key's secret, configures the API function's environment
with the stack's own `api_environment`, and runs the real Lambda handler (INIT reads the key from Secrets
Manager and the artifacts from the moto bucket) behind the local API Gateway front on uvicorn, at `ApiUrl`.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import stat
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from fastapi import FastAPI
from fastapi.responses import JSONResponse

from laya_artifacts.cli import main as cli
from laya_artifacts.deploy import command
from laya_artifacts.deploy.bucket import create_bucket, ensure_bucket
from laya_artifacts.deploy.smoke import SMOKE_QUESTIONS, answer_problems
from laya_artifacts.errors import DeployFailed, GateFailed
from laya_serverless import settings as env
from laya_serverless.artifact.layout import MANIFEST_FILE
from laya_serverless.artifact.manifest import sha256_file
from laya_serverless.artifact.store import S3Store, pointer_key
from tests.functional.threaded_server import free_port, start_server

REGION, ACCOUNT = "us-east-1", "123456789012"
DEFAULT_BUCKET = "laya-serverless-%s-%s" % (ACCOUNT, REGION)
FP32_ONLY = ("cpu-fp32",)

pytestmark = pytest.mark.usefixtures("close_mangums_loop")


class PolicyAside:
    """moto's S3 with bucket policies kept aside: moto enforces a policy's statements without their `Condition`
    blocks, so the TLS-only Deny (`aws:SecureTransport` false) would read as "deny everything", where S3 denies
    only plain-HTTP requests (and boto3 speaks HTTPS). The policy is recorded and read back, not enforced."""

    def __init__(self, client: Any) -> None:
        self._client, self.policies = client, dict[str, str]()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def put_bucket_policy(self, Bucket: str, Policy: str) -> None:  # noqa: N803 (boto's spelling)
        self._client.head_bucket(Bucket=Bucket)
        self.policies[Bucket] = json.dumps(json.loads(Policy))

    def get_bucket_policy(self, Bucket: str) -> dict[str, str]:  # noqa: N803
        return {"Policy": self.policies[Bucket]}


@pytest.fixture
def aws(moto_aws: Any) -> Iterator[dict[str, Any]]:
    services = (("s3", "s3"), ("sts", "sts"), ("secrets", "secretsmanager"))
    clients = {name: moto_aws(service) for name, service in services}
    yield {**clients, "s3": PolicyAside(clients["s3"])}


def _serve(app: Any) -> tuple[uvicorn.Server, threading.Thread, int]:
    port = free_port()
    server, thread = start_server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    return server, thread, port


class Cloud:
    """`run_cdk` for the tests: what `cdk deploy` would leave behind, with the API on a local server."""

    def __init__(self, aws: dict[str, Any], root: Path, status: int = 0, server_key: str | None = None,
                 front: Any = None, store_prefix: str | None = None) -> None:
        self.aws, self.root, self.status = aws, root, status
        self.server_key, self.front, self.store_prefix = server_key, front, store_prefix
        self.calls: list[list[str]] = []
        self.running: list[tuple[uvicorn.Server, threading.Thread, Any]] = []

    def context(self, call: int = -1) -> dict[str, str]:
        args = self.calls[call]
        return dict(args[i + 1].split("=", 1) for i, arg in enumerate(args) if arg == "-c")

    def __call__(self, args: Sequence[str]) -> int:
        from laya_infra.config import DeployConfig
        from laya_infra.functions import api_environment
        from laya_serverless.lambda_edge.api_handler import make_handler
        from laya_serverless.local_edge.start_api import ApiGatewayFront
        from tests.infra.conftest import stub_assets

        self.calls.append(list(args))
        if self.status:
            return self.status
        context = {**self.context(), "asset_dir": str(stub_assets(self.root / "assets"))}
        config = DeployConfig.from_context(context.get)  # the stack's own check of every flag it was given
        store = "s3://%s/%s" % (config.artifact_bucket, self.store_prefix or config.artifact_prefix)
        key = "generated-%s" % os.urandom(6).hex()
        arn = self.aws["secrets"].create_secret(Name="LayaApiKey", SecretString=key)["ARN"]
        environ = {**api_environment(config, store, None), env.CACHE_DIR: str(self.root / "lambda-tmp"),
                   env.API_KEY_SECRET: arn}
        if self.server_key:  # the function reading another key than the secret the stack's output names
            other = self.aws["secrets"].create_secret(Name="LayaApiKeyOther", SecretString=self.server_key)["ARN"]
            environ = {**environ, env.API_KEY_SECRET: other}
        front = self.front
        if front is None:
            front = ApiGatewayFront(make_handler(environ, self.aws["s3"], self.aws["secrets"]), payload="v1")
        server, thread, port = _serve(front)
        self.running.append((server, thread, front))
        outputs = {"ApiUrl": "http://127.0.0.1:%d%s" % (port, config.prefix or "/"), "ApiKeySecretArn": arn,
                   "ArtifactBucketName": config.artifact_bucket, "ArtifactStore": store}
        out = Path(args[list(args).index("--outputs-file") + 1])
        out.write_text(json.dumps({command.STACK_NAME: outputs}), encoding="utf-8")
        return 0

    def stop(self) -> None:
        for server, thread, front in self.running:
            server.should_exit = True
            thread.join(timeout=5)
            if hasattr(front, "close"):
                front.close()


@pytest.fixture
def cloud(aws: dict[str, Any], tmp_path: Path) -> Iterator[Any]:
    made: list[Cloud] = []

    def make(**options: Any) -> Cloud:
        made.append(Cloud(aws, tmp_path / ("cloud-%d" % len(made)), **options))
        return made[-1]

    yield make
    for each in made:
        each.stop()


def _seams(aws: dict[str, Any], run_cdk: Any, waits: list[float] | None = None, **more: Any) -> command.Seams:
    sleep = (lambda s: waits.append(s)) if waits is not None else (lambda _s: None)
    return command.Seams(s3=aws["s3"], sts=aws["sts"], secrets=aws["secrets"], run_cdk=run_cdk, sleep=sleep, **more)


# --- the whole command, on a built artifact -------------------------------------------------------------------


@pytest.mark.slow
def test_one_command_creates_the_bucket_publishes_deploys_and_answers(tiny_fp32: Path, aws: dict[str, Any],
                                                                      cloud: Any, tmp_path: Path) -> None:
    fake = cloud()
    said: list[str] = []
    request = command.Request(artifacts=(tiny_fp32,), targets=FP32_ONLY, context={"arch": "x86_64", "prefix": "/laya"},
                              cache=tmp_path / "cache")
    deployed = command.deploy(request, _seams(aws, fake), said.append)

    s3 = aws["s3"]  # step 2: the bucket the stack takes with -c artifact_bucket, private like its own
    blocked = s3.get_public_access_block(Bucket=DEFAULT_BUCKET)["PublicAccessBlockConfiguration"]
    assert all(blocked.values()) and len(blocked) == 4
    assert s3.get_bucket_versioning(Bucket=DEFAULT_BUCKET)["Status"] == "Enabled"
    rules = s3.get_bucket_encryption(Bucket=DEFAULT_BUCKET)["ServerSideEncryptionConfiguration"]["Rules"]
    assert rules[0]["ApplyServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256"
    assert s3.get_bucket_ownership_controls(Bucket=DEFAULT_BUCKET)["OwnershipControls"]["Rules"] == [
        {"ObjectOwnership": "BucketOwnerEnforced"}]
    (deny,) = json.loads(s3.get_bucket_policy(Bucket=DEFAULT_BUCKET)["Policy"])["Statement"]
    assert deny["Effect"] == "Deny" and deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}

    # step 3: published where the stack reads, its pointer naming the target deployed
    store = S3Store(DEFAULT_BUCKET, "laya-artifacts", s3)
    found = store.read(pointer_key("tiny-modernbert", "cpu-fp32"))
    assert found is not None
    pointer = json.loads(found[0])
    assert pointer["target"] == "cpu-fp32" and pointer["artifact"] == sha256_file(tiny_fp32 / MANIFEST_FILE)
    assert deployed.published == {"tiny-modernbert/cpu-fp32": pointer["artifact"]}

    # step 4: one cdk deploy, unattended, with the bucket, the target the checkpoint has and what it serves
    (args,) = fake.calls
    assert args[:6] == ["deploy", "LayaServerless", "--require-approval", "never", "--outputs-file",
                        str((tmp_path / "cache" / "deploy" / "cdk-outputs.json").resolve())]
    graph_mb = "tiny-modernbert=%d" % math.ceil((tiny_fp32 / "model.onnx").stat().st_size / 2**20)  # memory, summed
    context = fake.context()
    grows = context.pop("expands_at_load")   # the compact FP32 graph: FP16 weights widened at load
    assert re.fullmatch(r"tiny-modernbert=(\d\.\d\d)", grows) and 1 < float(grows.partition("=")[2]) <= 2
    assert context == {"arch": "x86_64", "prefix": "/laya", "deployed": "english=tiny-modernbert",
                       "target": "cpu-fp32", "artifact_bucket": DEFAULT_BUCKET, "graph_mb": graph_mb,
                       "artifact_pins": "tiny-modernbert/cpu-fp32=%s" % pointer["artifact"]}

    # steps 5 and 6: no gate for FP32; /health and one decision through ApiUrl, keyed from Secrets Manager
    assert deployed.gate == ["cpu-fp32 needs no deploy gate"]
    assert deployed.smoke["health"]["loaded"] == ["english"]
    assert set(deployed.smoke["answer"]["answers"]) == set(SMOKE_QUESTIONS)
    assert deployed.url.endswith("/laya")
    assert [line for line in said if line.startswith("step ")] == [
        "step 1/6 build", "step 2/6 storage", "step 3/6 publish", "step 4/6 deploy", "step 5/6 deploy gate",
        "step 6/6 smoke test"]


FAILURES = {
    "cdk fails": ({"status": 1}, r"^step 4/6 deploy: cdk exited 1 \(its output is above"),
    "the gateway answers 503": ({"front": "503"}, r"^step 6/6 smoke test: GET http://127\.0\.0\.1:\d+/laya/health "
                                                 r"answered 503: \{\"message\":\"Service Unavailable\"\}"),
    "the API has another key": ({"server_key": "not-the-secret"},
                                r"^step 6/6 smoke test: POST http://\S+/laya/v1/systemone answered 401: "
                                r"\{\"detail\":\"invalid or missing bearer token\"\} \(the key in arn:\S+ is not"),
    "nothing where the stack reads": ({"store_prefix": "elsewhere"},
                                      r"^step 6/6 smoke test: GET \S+/health: the API is up but serves nothing"),
}


def _gateway_503() -> FastAPI:
    app = FastAPI()

    @app.get("/laya/health")
    def health() -> JSONResponse:
        return JSONResponse({"message": "Service Unavailable"}, status_code=503)

    return app


@pytest.mark.slow
@pytest.mark.parametrize("case", list(FAILURES))
def test_each_failure_names_its_step(case: str, tiny_fp32: Path, aws: dict[str, Any], cloud: Any,
                                     tmp_path: Path) -> None:
    options, message = FAILURES[case]
    if options.get("front") == "503":
        options = {"front": _gateway_503()}
    waits: list[float] = []
    request = command.Request(artifacts=(tiny_fp32,), targets=FP32_ONLY, context={"prefix": "/laya"},
                              cache=tmp_path / "cache")
    with pytest.raises(DeployFailed, match=message) as failed:
        command.deploy(request, _seams(aws, cloud(**options), waits))
    assert failed.value.step == re.match(r"step \d/6 ([a-z ]+):", str(failed.value)).group(1)  # type: ignore[union-attr]
    if case == "the gateway answers 503":  # tried again while the API could still be starting, then given up
        assert waits == [2.0, 4.0, 8.0, 16.0, 20.0]


# --- step 1: what is built, and the target it leaves (a fake builder: no model is built) -------------------------


class FakeBuilds:
    def __init__(self, refuse: set[tuple[str, str]] | None = None) -> None:
        self.refuse = refuse or set()
        self.calls: list[tuple[str, str]] = []

    def resolve(self, source: str) -> tuple[Path, str, str | None]:
        return Path("/checkpoints") / source, source, None

    def build(self, checkpoint: Path, name: str, revision: str | None, target: str) -> Path:
        self.calls.append((name, target))
        if (name, target) in self.refuse:
            raise GateFailed("the parity gate failed for %s/%s (nothing passed)\nrow 1 ..." % (name, target))
        return Path("/artifacts") / ("%s-%s" % (name, target))


def _plan(builds: FakeBuilds, checkpoints: tuple[str, ...], targets: tuple[str, ...] = ("cpu-int8", "cpu-fp32"),
          context: dict[str, str] | None = None) -> tuple[list[command.Built], dict[str, str]]:
    request = command.Request(checkpoints=checkpoints, targets=targets, context=context or {})
    built = command.build_step(request, builds.resolve, builds.build, lambda _m: None)
    return built, command.plan_context(request.context, built, lambda _m: None)


def test_int8_refused_by_its_gate_deploys_cpu_fp32_and_says_why() -> None:
    builds = FakeBuilds(refuse={("demo", "cpu-int8")})
    (built,), context = _plan(builds, ("demo",))
    assert builds.calls == [("demo", "cpu-int8"), ("demo", "cpu-fp32")]
    assert context == {"deployed": "english=demo", "target": "cpu-fp32"}
    assert built.refused == {"cpu-int8": "the parity gate failed for demo/cpu-int8 (nothing passed)"}


def test_int8_everywhere_deploys_int8_and_cpu_fp32_is_always_built() -> None:
    builds = FakeBuilds()
    built, context = _plan(builds, ("a", "b"), targets=("cpu-int8",), context={"deployed": "english=a,french=b"})
    assert context["target"] == "cpu-int8" and all(set(b.artifacts) == {"cpu-int8", "cpu-fp32"} for b in built)
    builds = FakeBuilds(refuse={("b", "cpu-int8")})
    _, context = _plan(builds, ("a", "b"), context={"deployed": "english=a,french=b"})
    assert context["target"] == "cpu-fp32"  # one function, one target: b has no int8


def test_the_demo_is_the_default_and_targets_cpu_fp32_skips_the_int8_build() -> None:
    builds = FakeBuilds()
    (built,) = command.build_step(command.Request(targets=FP32_ONLY), builds.resolve, builds.build, lambda _m: None)
    assert builds.calls == [("demo", "cpu-fp32")] and set(built.artifacts) == {"cpu-fp32"}


@pytest.mark.parametrize("checkpoints, targets, context, refuse, message", [
    (("demo",), ("cpu-int8", "cpu-fp32"), {}, {("demo", "cpu-fp32")}, r"the parity gate failed for demo/cpu-fp32"),
    (("demo",), ("cpu-int8", "cpu-fp32"), {"target": "cpu-int8"}, {("demo", "cpu-int8")},
     r"-c target=cpu-int8, but demo has no cpu-int8 artifact \(the parity gate failed"),
    (("a", "b"), FP32_ONLY, {}, set(), r"2 checkpoints \(a, b\): say which name serves which with -c deployed="),
    (("a",), FP32_ONLY, {"deployed": "english=a,french=b"}, set(),
     r"-c deployed=english=a,french=b names b, which this deploy neither built nor was given"),
    (("a",), ("cuda-fp16",), {}, set(), r"--targets cuda-fp16: Lambda serves cpu-int8 and cpu-fp32 only"),
    ((), FP32_ONLY, {}, set(), r"nothing to deploy"),
])
def test_step_1_refuses_what_cannot_serve(aws: dict[str, Any], checkpoints: tuple[str, ...],
                                          targets: tuple[str, ...], context: dict[str, str],
                                          refuse: set[tuple[str, str]], message: str) -> None:
    builds = FakeBuilds(refuse=refuse)
    request = command.Request(checkpoints=checkpoints, targets=targets, context=context)
    seams = _seams(aws, lambda _a: pytest.fail("cdk must not run"), resolve=builds.resolve, build=builds.build)
    with pytest.raises(DeployFailed, match="^step 1/6 build: " + message):
        command.deploy(request, seams)
    assert aws["s3"].list_buckets()["Buckets"] == []  # nothing was created


def test_the_demo_source_is_the_checkpoint_make_serve_assembles_once(tmp_path: Path) -> None:
    from laya_artifacts.checkpoints.demo import demo_config
    from laya_artifacts.checkpoints.sources import resolve_source

    assembled = tmp_path / "checkpoints" / ("demo-%s" % demo_config()["head_sha256"][:12])
    assembled.mkdir(parents=True)
    (assembled / "rl_agent_config.json").write_text("{}")  # already there: nothing is assembled again
    assert resolve_source("demo", None, tmp_path) == (assembled, "demo", None)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        resolve_source(str(tmp_path / "nowhere"), None, tmp_path)


@pytest.mark.slow
def test_the_real_builder_reuses_the_recorded_corpus_and_builds_into_the_cache(tiny_modernbert: tuple[Path, Path],
                                                                              tmp_path: Path) -> None:
    from laya_artifacts.goldens.record import weights_sha256
    from laya_serverless.artifact.manifest import verify_artifact
    from tests.conftest import GOLDENS

    checkpoint = tiny_modernbert[0]
    corpus = tmp_path / "goldens" / ("tiny-modernbert-%s" % weights_sha256(checkpoint)[:12])
    corpus.mkdir(parents=True)
    shutil.copy(GOLDENS / "tiny-modernbert" / "goldens.json", corpus)  # as if an earlier deploy had recorded it
    said: list[str] = []
    artifact = command.pipeline_builder(tmp_path, said.append)(checkpoint, "tiny-modernbert", None, "cpu-fp32")
    assert verify_artifact(artifact).target == "cpu-fp32" and artifact.parent == tmp_path / "artifacts"
    assert not any("recording the gate corpus" in line for line in said)


# --- step 2: the bucket --------------------------------------------------------------------------------------


def test_an_existing_private_bucket_is_used_and_a_public_one_refused_with_every_reason(aws: dict[str, Any]) -> None:
    s3 = aws["s3"]
    create_bucket(s3, "mine-private", REGION)
    assert ensure_bucket(s3, "mine-private", REGION) is False
    s3.create_bucket(Bucket="mine-open")
    builds = FakeBuilds()
    request = command.Request(checkpoints=("demo",), targets=FP32_ONLY, context={"artifact_bucket": "mine-open"})
    seams = _seams(aws, lambda _a: pytest.fail("cdk must not run"), resolve=builds.resolve, build=builds.build)
    with pytest.raises(DeployFailed, match=r"^step 2/6 storage: bucket mine-open is not private and versioned as the "
                                           r"stack's own: public access is not blocked \(all four settings\); no "
                                           r"default encryption; versioning is not enabled"):
        command.deploy(request, seams)


def test_the_deploy_bucket_gets_the_stack_s_retention_rules_and_keeps_its_own(aws: dict[str, Any]) -> None:
    """The stack takes the bucket as an existing one, so step 2 puts the job-data rules on it, merged by ID."""
    from laya_artifacts.deploy.bucket import lifecycle_rules

    s3 = aws["s3"]
    create_bucket(s3, "mine", REGION)
    theirs = {"ID": "their-logs", "Filter": {"Prefix": "logs/"}, "Status": "Enabled", "Expiration": {"Days": 5}}
    s3.put_bucket_lifecycle_configuration(Bucket="mine", LifecycleConfiguration={"Rules": [theirs]})
    said: list[str] = []
    command.storage_step(s3, None, {"artifact_bucket": "mine", "jobs_retention_days": "7"}, said.append)
    rules = s3.get_bucket_lifecycle_configuration(Bucket="mine")["Rules"]
    by_id = {rule["ID"]: rule for rule in rules}
    assert set(by_id) == {"their-logs", "laya-jobs-expire", "laya-jobs-delete-markers", "laya-abort-multipart"}
    assert by_id["laya-jobs-expire"]["Filter"] == {"Prefix": "laya-artifacts/jobs/"}
    assert by_id["laya-jobs-expire"]["Expiration"] == {"Days": 7}
    assert by_id["laya-abort-multipart"]["AbortIncompleteMultipartUpload"] == {"DaysAfterInitiation": 7}
    assert any("expires after 7 days" in line for line in said)
    said.clear()
    command.storage_step(s3, None, {"artifact_bucket": "mine", "jobs_retention_days": "7"}, said.append)
    assert not any("lifecycle" in line for line in said)  # already in place: nothing rewritten
    command.storage_step(s3, None, {"artifact_bucket": "mine"}, said.append)  # the default, 30 days
    expire = [r for r in s3.get_bucket_lifecycle_configuration(Bucket="mine")["Rules"] if r["ID"] == "laya-jobs-expire"]
    assert expire[0]["Expiration"] == {"Days": 30} and lifecycle_rules("laya-artifacts", 30)[0] == expire[0]
    for bad in ("0", "x", "3651"):
        with pytest.raises(DeployFailed, match=r"-c jobs_retention_days must be days between 1 and 3650"):
            command.storage_step(s3, None, {"artifact_bucket": "mine", "jobs_retention_days": bad}, said.append)


def test_a_bucket_of_another_account_is_refused_with_the_flag_to_use() -> None:
    class Elsewhere:
        def head_bucket(self, Bucket: str) -> None:  # noqa: N803 (boto's spelling)
            error = Exception("An error occurred (403) when calling the HeadBucket operation: Forbidden")
            error.response = {"Error": {"Code": "403"}}  # type: ignore[attr-defined]
            raise error

    with pytest.raises(DeployFailed, match=r"bucket taken exists and this account cannot use it; .*-c artifact_bucket"):
        ensure_bucket(Elsewhere(), "taken", REGION)


# --- steps 4 and 5, and the real CDK runner -----------------------------------------------------------------------


def test_cdk_without_outputs_fails_step_4_and_an_old_outputs_file_never_passes(tmp_path: Path) -> None:
    (tmp_path / "cdk-outputs.json").write_text(json.dumps({"LayaServerless": {"ApiUrl": "https://old"}}))
    with pytest.raises(DeployFailed, match=r"cdk wrote no LayaServerless outputs to"):
        command.deploy_step({"target": "cpu-fp32"}, lambda _a: 0, tmp_path)


def test_the_cdk_runner_runs_the_pinned_cli_in_infra_with_this_python_first(tmp_path: Path) -> None:
    infra = tmp_path / "infra"
    cdk = infra / "node_modules" / ".bin" / "cdk"
    with pytest.raises(DeployFailed, match=r"npm ci --prefix infra"):
        command.cdk_runner(infra)(["deploy"])
    cdk.parent.mkdir(parents=True)
    cdk.write_text('#!/bin/sh\npwd > "$0.log"\ncommand -v python3 >> "$0.log"\nprintf "%s\\n" "$@" >> "$0.log"\n'
                   "exit 3\n")
    cdk.chmod(cdk.stat().st_mode | stat.S_IXUSR)
    assert command.cdk_runner(infra)(["deploy", "-c", "target=cpu-fp32"]) == 3
    where, python, *args = Path(str(cdk) + ".log").read_text().split()
    assert where == str(infra) and Path(python).parent == Path(sys.executable).parent
    assert args == ["deploy", "-c", "target=cpu-fp32"]


def test_the_gate_step_reports_each_int8_artifacts_record(aws: dict[str, Any]) -> None:
    s3 = aws["s3"]
    s3.create_bucket(Bucket="gates")
    store = S3Store("gates", "laya-artifacts", s3)
    store.create("gates/aaa/avx512-vnni.json", b"{}")
    published = {"a/cpu-int8": "aaa", "a/cpu-fp32": "fff", "b/cpu-int8": "bbb"}
    outputs = {"DeployGateFunctionName": "gate-fn"}
    lines = command.gate_step({"target": "cpu-int8"}, published, store, outputs)
    assert lines[0] == "a/cpu-int8: gated on Lambda's CPU (avx512-vnni)"
    assert lines[1].startswith("b/cpu-int8: no gate record, so the API serves its cpu-fp32 artifact")
    assert "--function-name gate-fn" in lines[1] and len(lines) == 2
    off = command.gate_step({"target": "cpu-int8", "deploy_gate": "false"}, published, store, outputs)
    assert off[0].startswith("the deploy gate is off")


# --- the smoke test's check, the CLI, and the names shared with the CDK app ----------------------------------------


def test_an_answer_must_answer_the_questions_asked() -> None:
    good = {"answers": {"team": {"type": "choice", "choice": "tech"}, "urgency": {"type": "score", "score": 2.5},
                        "refund": {"type": "noul", "noul": 0.9}}}
    assert answer_problems(good, SMOKE_QUESTIONS) == []
    bad = {"answers": {"team": {"type": "choice", "choice": "sales"}, "urgency": {"type": "score", "score": 3.5},
                       "refund": {"type": "choice"}, "extra": {}}}
    assert answer_problems(bad, SMOKE_QUESTIONS) == [
        "answers 'extra', which was not asked", "'team' chose 'sales', not one of ['billing', 'tech', 'other']",
        "'urgency' scored 3.5, outside 0..3", "'refund' is not answered as a noul: {'type': 'choice'}"]
    assert answer_problems({"detail": "x"}, SMOKE_QUESTIONS)[0].startswith("no `answers` object")


def test_the_cli_exits_non_zero_with_the_failing_steps_line(aws: dict[str, Any], tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    status = cli(["deploy", "--artifact", str(tmp_path / "nothing"), "--targets", "cpu-fp32", "-c", "prefix=/laya",
                  "--cache", str(tmp_path / "cache")])
    assert status == 2
    assert re.search(r"^\[laya-artifacts\] error: step 1/6 build: .*nothing", capsys.readouterr().err, re.M)
    with pytest.raises(SystemExit):
        cli(["deploy", "-c", "prefix"])
    assert "-c takes KEY=VALUE" in capsys.readouterr().err


def test_the_names_are_the_cdk_apps() -> None:
    from laya_infra import constants

    assert command.STACK_NAME == constants.STACK_NAME
    assert command.DEFAULT_ARTIFACT_PREFIX == constants.DEFAULT_ARTIFACT_PREFIX
    from laya_artifacts.deploy import bucket
    from laya_serverless.jobs.store_keys import JOBS_PREFIX

    assert (bucket.DEFAULT_JOBS_RETENTION_DAYS, bucket.MAX_JOBS_RETENTION_DAYS, bucket.JOBS_NONCURRENT_DAYS,
            bucket.MULTIPART_ABORT_DAYS) == (constants.DEFAULT_JOBS_RETENTION_DAYS, constants.MAX_JOBS_RETENTION_DAYS,
                                             constants.JOBS_NONCURRENT_DAYS, constants.MULTIPART_ABORT_DAYS)
    assert bucket.JOBS_PREFIX == JOBS_PREFIX
    assert command.INFRA_DIR == constants.REPO_ROOT / "infra"


def test_each_checkpoint_passes_the_size_of_its_largest_graph(tmp_path: Path) -> None:
    """`-c graph_mb` names every stored checkpoint (hub ids too): the stack adds up what each needs at INIT."""
    def artifact(name: str, size: int) -> Path:
        folder = tmp_path / name
        folder.mkdir()
        with open(folder / "model.onnx", "wb") as graph:
            graph.truncate(size)   # sparse: only the size is read
        return folder

    sizes = command.graph_sizes({"owner/laya-en": [artifact("en-int8", 2**29), artifact("en-fp32", 1_685_300_964)],
                                 "laya-m": [artifact("m-fp32", 1_287_787_958)], "unbuilt": [tmp_path / "none"]})
    assert sizes == "owner/laya-en=1608,laya-m=1229"


def test_a_compact_graph_passes_what_it_grows_to_at_load(tmp_path: Path) -> None:
    """A cpu-fp32 graph stored in FP16 where exact (the manifest's `precision.storage`) is sized as it loads."""
    def artifact(name: str, size: int, storage: dict[str, int] | None) -> Path:
        folder = tmp_path / name
        folder.mkdir()
        with open(folder / "model.onnx", "wb") as graph:
            graph.truncate(size)
        precision = {"weights": "fp32", **({"storage": storage} if storage else {})}
        (folder / "manifest.json").write_text(json.dumps({"configuration": {"precision": precision}}))
        return folder

    english = artifact("en", 842_896_744, {"bytes_fp16": 842_418_176, "bytes_fp32": 1_684_836_352})
    grows = command.graph_expansions({"laya-en": [english], "laya-old": [artifact("old", 2**29, None)]})
    assert grows == "laya-en=2.00"   # 842.9 MB stored, 1,685.3 MB loaded; the FP32-stored graph grows by nothing
