"""One artifact served by the API function as the synthesized stack declares it, under emulated Lambda limits:
the built package under the real runtime interface client (Python 3.12, read-only code, a 512 MB tmpfs `/tmp`:
tests/cloud/lambda_runtime.py), the template's environment and memory size as a hard memory-cgroup limit, the
CPU share of that memory size as a CFS quota (1,769 MB = one vCPU), and the artifact fetched from a moto S3
server. Prints one JSON line per round: INIT (start to ready), the after-restore hooks (SnapStart), the first
answer, the memory cgroup's peak, whether it was killed, and the bytes the artifact fetch moved.

    python scripts/lambda_emulation.py ARTIFACT_DIR [--context KEY=VALUE ...] [--snapstart] [--rounds 3]
                                       [--memory MB] [--no-quota] [--store-dir DIR]

The package must be built first (`laya-artifacts package`); root, namespaces and a memory cgroup are needed
(as for the tests/cloud tier). `--memory` overrides the template's size, to find the smallest that holds.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "infra")]

import boto3  # noqa: E402

from laya_artifacts.deploy.publish import publish  # noqa: E402
from laya_artifacts.tune.quota import close_quota, open_quota  # noqa: E402
from laya_serverless.artifact.layout import MANIFEST_FILE  # noqa: E402
from laya_serverless.artifact.store import open_store  # noqa: E402
from tests.cloud import lambda_runtime as lr  # noqa: E402
from tests.cloud.conftest import BUCKET, REGION, bucket_ids, function_with_handler, resolve  # noqa: E402
from tests.functional.threaded_server import free_port  # noqa: E402

API_HANDLER = "laya_serverless.lambda_edge.api_handler.handler"
PACKAGE = lr.BUILD / "x86_64"   # checked fresh once, at the start: rounds keep the package they started with
EVENT = ROOT / "tests" / "events" / "rest-v1-systemone-base64-base-path.json"


def synthesized(context: dict[str, str]) -> dict[str, Any]:
    from app import build_app
    from laya_infra.constants import STACK_NAME

    out = Path(tempfile.mkdtemp(prefix="cdk.out-"))
    build_app({"asset_dir": str(ROOT / "build" / "lambda"), "prefix": "/laya", **context}, outdir=str(out)).synth()
    template: dict[str, Any] = json.loads((out / ("%s.template.json" % STACK_NAME)).read_text())
    shutil.rmtree(out, ignore_errors=True)
    return template


def relabelled(artifact: Path, checkpoint: str, out: Path) -> Path:
    """The artifact under the checkpoint name the stack deploys (its manifest changes, so its id does too)."""
    shutil.copytree(artifact, out)
    manifest = json.loads((out / MANIFEST_FILE).read_text())
    manifest["configuration"]["checkpoint"]["name"] = checkpoint
    (out / MANIFEST_FILE).write_text(json.dumps(manifest))
    return out


class QuotaAndMemory(lr.MemoryLimit):
    """The function's memory as a hard limit and its memory size's CPU share as a CFS quota, entered together."""

    def __init__(self, megabytes: int, quota: bool) -> None:
        super().__init__(megabytes)
        self.quota = open_quota(megabytes, "laya-emulation-%d" % megabytes) if quota else None

    def enter_command(self) -> str:
        tasks = self.quota.tasks_file() if self.quota is not None else None
        return super().enter_command() + ("echo $$ > %s && " % tasks if tasks is not None else "")

    def close(self) -> None:
        super().close()
        if self.quota is not None:
            close_quota(self.quota)


def deploy(template: dict[str, Any], artifact: Path, endpoint: str, work: Path,
           store_dir: Path | None = None) -> tuple[dict[str, str], int, int]:
    """Publish `artifact` to the stack's bucket on moto's server, or to `store_dir` (a local store the function then
    reads instead: INIT without the network); (the function's environment, memory, bytes)."""
    s3 = boto3.client("s3", region_name=REGION, endpoint_url=endpoint)
    s3.create_bucket(Bucket=BUCKET)
    function = function_with_handler(template, API_HANDLER)
    raw = function["Environment"]["Variables"]
    environ = {k: str(resolve(v, bucket_ids(template))) for k, v in raw.items() if k != "LAYA_API_KEY_SECRET_ARN"}
    if store_dir is not None:   # jobs need the S3 store; they play no part in INIT
        environ["LAYA_STORE"] = str(store_dir)
        environ.pop("LAYA_JOBS_STATE_MACHINE", None)
    stored = environ["LAYA_DEPLOYED"].split(",")[0].partition("=")[2] or environ["LAYA_DEPLOYED"].split(",")[0]
    publish(relabelled(artifact, stored, work / "published"), open_store(environ["LAYA_STORE"], s3_client=s3))
    fetched = sum(p.stat().st_size for p in artifact.rglob("*") if p.is_file())
    environ.update(AWS_LAMBDA_FUNCTION_NAME="LayaServerless-Api", AWS_ACCESS_KEY_ID="testing",
                   AWS_SECRET_ACCESS_KEY="testing", AWS_ENDPOINT_URL=endpoint)
    return environ, int(function["MemorySize"]), fetched


def one_round(environ: dict[str, str], memory_mb: int, snapstart: bool, quota: bool, log: Path) -> dict[str, Any]:
    limits = QuotaAndMemory(memory_mb, quota)
    env = lr.start(PACKAGE, API_HANDLER, environ, limits, log, snapstart=snapstart)
    try:
        figures: dict[str, Any] = {"memory_mb": memory_mb, "snapstart": snapstart,
                                   "quota": limits.quota.mode if limits.quota is not None else "off"}
        figures["init_s"] = round(env.init_seconds(snapstart=snapstart), 2)
        if snapstart:
            restored = time.monotonic()
            env.api.restore()
            figures["after_restore_s"] = round(env.api.wait_for("/invocation/next", 600, env.process) - restored, 3)
        asked = time.monotonic()
        kind, payload = env.api.invoke(json.loads(EVENT.read_text()), timeout=600)
        figures["first_answer_s"] = round(time.monotonic() - asked, 2)
        figures["status"] = payload.get("statusCode") if kind == "response" else kind
        figures["peak_mb"] = round(limits.peak_mb())
        figures["oom_killed"] = limits.oom_killed()
        return figures
    except AssertionError as exc:
        return {"memory_mb": memory_mb, "failed": str(exc)[:300], "oom_killed": limits.oom_killed(),
                "peak_mb": round(limits.peak_mb())}
    finally:
        env.stop()
        limits.close()


def parser() -> argparse.ArgumentParser:
    """This script's arguments (tests/unit/test_docs_commands.py parses the docs' command lines with it)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("artifact", type=Path)
    parser.add_argument("--context", action="append", default=[], metavar="KEY=VALUE", help="CDK context, as -c")
    parser.add_argument("--snapstart", action="store_true", help="play SnapStart's order: INIT, restore, invoke")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--memory", type=int, help="the memory limit (MB) instead of the template's")
    parser.add_argument("--no-quota", action="store_true", help="no CFS quota (2 cores, as a busy machine allows)")
    parser.add_argument("--store-dir", type=Path, help="publish to this local folder (outside /tmp) and serve from it "
                        "instead of moto's S3: INIT less the network, which moto on the same cores overstates")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    lr.built("x86_64")   # the package is the source as it is now (else: run `laya-artifacts package`)
    why_not = lr.can_sandbox()
    if why_not:
        print("cannot emulate Lambda here: %s" % why_not, file=sys.stderr)
        return 2
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = "http://127.0.0.1:%d" % port
    for name, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                        ("AWS_DEFAULT_REGION", REGION)):   # moto's server: any credentials, this process's publish
        os.environ[name] = value
    work = Path(tempfile.mkdtemp(prefix="lambda-emulation-"))
    try:
        context = dict(item.split("=", 1) for item in args.context)
        environ, memory_mb, fetched = deploy(synthesized(context), args.artifact, endpoint, work, args.store_dir)
        memory_mb = args.memory or memory_mb
        for index in range(args.rounds):
            figures = one_round(environ, memory_mb, args.snapstart, not args.no_quota, work / ("f%d.log" % index))
            print(json.dumps({"round": index, "artifact_bytes": fetched, **figures}), flush=True)
    finally:
        urllib.request.urlopen(urllib.request.Request(endpoint + "/moto-api/reset", method="POST")).close()
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
