"""The deployment's settings, read from CDK context (`-c key=value`) and checked before anything is built."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from laya_serverless import settings as env

from . import constants as c

_PREFIX = re.compile(r"^(/[A-Za-z0-9._~-]+)*$")
_STAGE = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_ARTIFACT_PREFIX = re.compile(r"^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$")

KEYS = ("arch", "memory", "timeout", "prefix", "stage", "artifact_bucket", "artifact_prefix", "deployed",
        "target", "auth", "api_key_secret", "reserved_concurrency", "throttle_rate", "throttle_burst",
        "duration_alarm_ms", "init_alarm_ms", "alarm_email", "jev_strict", "jev_confidence", "asset_dir",
        "snapstart", "provisioned_concurrency", "jobs", "jobs_memory", "jobs_timeout", "jobs_concurrency",
        "token_rate", "deploy_gate", "deploy_gate_strict", "graph_mb", "signing", "signing_key", "rollout",
        "artifact_pins")


class ConfigError(ValueError):
    """A context value cannot be used; the message names the `-c` flag to fix."""


def _choice(raw: object, key: str, choices: tuple[str, ...]) -> str:
    if str(raw) not in choices:
        raise ConfigError("context %r must be one of %s, got %r (use %s)" % (key, ", ".join(choices), raw,
                                                                         _flag(key, choices[-1])))
    return str(raw)


def _flag(key: str, example: str) -> str:
    return "-c %s=%s" % (key, example)


def _int(raw: Any, key: str, lo: int, hi: int, example: str) -> int:
    try:
        value = int(str(raw))
    except ValueError:
        raise ConfigError("context %r must be an integer, got %r (use %s)" % (key, raw, _flag(key, example))) from None
    if not lo <= value <= hi:
        raise ConfigError("context %r must be between %d and %d, got %d (use %s)"
                          % (key, lo, hi, value, _flag(key, example)))
    return value


def _bool(raw: Any, key: str) -> bool:
    text = str(raw).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    raise ConfigError("context %r must be true or false, got %r (use %s)" % (key, raw, _flag(key, "true")))


@dataclass(frozen=True)
class DeployConfig:
    arch: str = c.DEFAULT_ARCH
    memory_mb: int = c.DEFAULT_MEMORY_MB
    timeout_s: int = c.DEFAULT_TIMEOUT_S
    prefix: str = c.DEFAULT_PREFIX
    stage: str = c.DEFAULT_STAGE
    artifact_bucket: str | None = None            # an existing bucket; None creates one
    artifact_prefix: str = c.DEFAULT_ARTIFACT_PREFIX
    deployed: str = c.DEFAULT_DEPLOYED
    target: str = c.DEFAULT_TARGET
    auth: bool = True
    api_key_secret: str | None = None             # an existing secret's name or ARN; None creates one
    reserved_concurrency: int | None = None
    throttle_rate: int = c.DEFAULT_THROTTLE_RATE
    throttle_burst: int = c.DEFAULT_THROTTLE_BURST
    duration_alarm_ms: int = c.DEFAULT_DURATION_ALARM_MS
    init_alarm_ms: int = c.DEFAULT_INIT_ALARM_MS
    alarm_email: str | None = None
    jev_strict: bool = False
    jev_confidence: str = "laya"  # strict mode's confidence: Laya's, or Jev's formula (jevcompat 14/14)
    asset_dir: Path = c.DEFAULT_ASSET_DIR
    snapstart: bool = True                        # SnapStart on the API function's published versions
    provisioned_concurrency: int | None = None    # the alternative: instances kept initialized (no SnapStart)
    jobs: bool = True                              # /v1/jobs, the jobs function and its Step Functions engine
    jobs_memory_mb: int = c.DEFAULT_JOBS_MEMORY_MB
    jobs_timeout_s: int = c.DEFAULT_JOBS_TIMEOUT_S
    jobs_concurrency: int = c.DEFAULT_JOBS_CONCURRENCY
    token_rate: int = c.TOKEN_RATE_PER_VCPU        # row tokens a second one vCPU answers (scripts/bench_jobs.py)
    deploy_gate: bool = True                       # re-gate int8 artifacts on the function's own CPU at deploy
    deploy_gate_strict: bool = False               # a failing deploy gate rolls the deployment back
    signing: bool = False                          # artifacts must be signed (a KMS key: the stack's or signing_key)
    signing_key: str | None = None                 # an existing KMS key's ARN (the deploy command's); None creates one
    rollout: str = c.DEFAULT_ROLLOUT               # how CodeDeploy moves the live alias to a new version
    artifact_pins: str = ""                        # CHECKPOINT/TARGET=ID,...: LAYA_ARTIFACT_PINS of a version

    @property
    def function_asset(self) -> Path:
        return self.asset_dir / self.arch / "function"

    @property
    def layer_asset(self) -> Path:
        return self.asset_dir / self.arch / "layer"

    @property
    def threads(self) -> int:
        """Intra-op threads sized to the vCPUs this memory setting buys (at least one)."""
        return max(1, min(6, int(self.memory_mb * c.VCPU_PER_MB)))

    @property
    def jobs_threads(self) -> int:
        return max(1, min(6, int(self.jobs_memory_mb * c.VCPU_PER_MB)))

    @property
    def checkpoints(self) -> list[str]:
        """Stored checkpoint names the function reads pointers for (the right side of NAME=STORED)."""
        names = []
        for part in filter(None, (p.strip() for p in self.deployed.split(","))):
            stored = part.partition("=")[2].strip() or part
            if stored not in names:
                names.append(stored)
        return names

    @classmethod
    def from_context(cls, get: Any) -> DeployConfig:
        """`get(key)` returns the context value or None (`app.node.try_get_context`)."""
        raw = {key: get(key) for key in KEYS}
        values: dict[str, Any] = {}
        if raw["arch"] is not None:
            if raw["arch"] not in c.ARCHITECTURES:
                raise ConfigError("context 'arch' must be one of %s, got %r (use %s)"
                                  % (", ".join(c.ARCHITECTURES), raw["arch"], _flag("arch", "arm64")))
            values["arch"] = raw["arch"]
        if raw["memory"] is not None:
            values["memory_mb"] = _int(raw["memory"], "memory", c.MIN_MEMORY_MB, c.MAX_MEMORY_MB, "3008")
        if raw["timeout"] is not None:
            values["timeout_s"] = _int(raw["timeout"], "timeout", 3, c.MAX_TIMEOUT_S, "29")
        if raw["prefix"] is not None:
            prefix = str(raw["prefix"]).rstrip("/")
            if prefix and not prefix.startswith("/"):
                prefix = "/" + prefix
            if not _PREFIX.match(prefix):
                raise ConfigError("context 'prefix' must be a path like /laya, got %r (use %s)"
                                  % (raw["prefix"], _flag("prefix", "/laya")))
            values["prefix"] = prefix
        if raw["stage"] is not None:
            if not _STAGE.match(str(raw["stage"])):
                raise ConfigError("context 'stage' must be letters, digits, - or _, got %r (use %s)"
                                  % (raw["stage"], _flag("stage", "prod")))
            values["stage"] = str(raw["stage"])
        if raw["artifact_bucket"]:
            if not _BUCKET.match(str(raw["artifact_bucket"])):
                raise ConfigError("context 'artifact_bucket' is not a valid bucket name: %r (use %s)"
                                  % (raw["artifact_bucket"], _flag("artifact_bucket", "my-laya-artifacts")))
            values["artifact_bucket"] = str(raw["artifact_bucket"])
        if raw["artifact_prefix"] is not None:
            prefix = str(raw["artifact_prefix"]).strip("/")
            if not _ARTIFACT_PREFIX.match(prefix):
                raise ConfigError("context 'artifact_prefix' must be a key prefix like laya-artifacts, got %r (use %s)"
                                  % (raw["artifact_prefix"], _flag("artifact_prefix", "laya-artifacts")))
            values["artifact_prefix"] = prefix
        if raw["deployed"] is not None:
            values["deployed"] = str(raw["deployed"])
        if raw["target"] is not None:
            values["target"] = str(raw["target"])
            if values["target"].startswith("cuda-"):   # Lambda has no GPU: the endpoint has its own flag
                raise ConfigError("context 'target' %r needs a GPU, and the API function runs on Lambda (use %s, "
                                  "and -c gpu=true -c gpu_target=%s for the GPU endpoint)"
                                  % (values["target"], _flag("target", "cpu-int8"), values["target"]))
        if raw["auth"] is not None:
            values["auth"] = _bool(raw["auth"], "auth")
        if raw["api_key_secret"]:
            values["api_key_secret"] = str(raw["api_key_secret"])
        if raw["reserved_concurrency"] is not None:
            values["reserved_concurrency"] = _int(raw["reserved_concurrency"], "reserved_concurrency", 1, 10_000, "10")
        if raw["throttle_rate"] is not None:
            values["throttle_rate"] = _int(raw["throttle_rate"], "throttle_rate", 1, 10_000, "50")
        if raw["throttle_burst"] is not None:
            values["throttle_burst"] = _int(raw["throttle_burst"], "throttle_burst", 1, 5_000, "100")
        if raw["duration_alarm_ms"] is not None:
            values["duration_alarm_ms"] = _int(raw["duration_alarm_ms"], "duration_alarm_ms", 1, 900_000, "10000")
        if raw["init_alarm_ms"] is not None:
            values["init_alarm_ms"] = _int(raw["init_alarm_ms"], "init_alarm_ms", 1, 900_000, "5000")
        if raw["alarm_email"]:
            values["alarm_email"] = str(raw["alarm_email"])
        if raw["jev_strict"] is not None:
            values["jev_strict"] = _bool(raw["jev_strict"], "jev_strict")
        if raw["jev_confidence"] is not None:
            values["jev_confidence"] = _choice(raw["jev_confidence"], "jev_confidence", env.JEV_CONFIDENCES)
        if raw["asset_dir"]:
            values["asset_dir"] = Path(str(raw["asset_dir"])).resolve()
        values.update(_warm_start(raw))
        values.update(_jobs_values(raw))
        values.update(_sized_for_graphs(raw, values))
        for key in ("deploy_gate", "deploy_gate_strict"):
            if raw[key] is not None:
                values[key] = _bool(raw[key], key)
        values.update(_rollout_values(raw))
        config = cls(**values)
        config.check_deployed()
        config.check_assets()
        return config

    def check_deployed(self) -> None:
        from laya_serverless.errors import SettingsError
        from laya_serverless.settings import Settings

        try:
            Settings.from_environ({"LAYA_DEPLOYED": self.deployed})
        except SettingsError as exc:
            raise ConfigError("context 'deployed': %s (use %s)" % (exc, _flag("deployed", "english=demo"))) from None

    def check_assets(self) -> None:
        for path in (self.function_asset, self.layer_asset):
            if not path.is_dir():
                raise ConfigError(
                    "%s is missing: build the Lambda package first with "
                    "`python layers/build_layer.py --arch %s` (or point %s at a built one)"
                    % (path, self.arch, _flag("asset_dir", "build/lambda")))


def _warm_start(raw: dict[str, Any]) -> dict[str, Any]:
    """SnapStart (the default) or provisioned concurrency: Lambda allows one or the other on a version."""
    snapstart = _bool(raw["snapstart"], "snapstart") if raw["snapstart"] is not None else None
    if raw["provisioned_concurrency"] is None:
        return {} if snapstart is None else {"snapstart": snapstart}
    count = _int(raw["provisioned_concurrency"], "provisioned_concurrency", 1, 10_000, "2")
    if snapstart:
        raise ConfigError("context 'provisioned_concurrency' and 'snapstart' exclude each other: Lambda does not "
                          "run SnapStart on provisioned instances (use %s to keep %d instances warm, or drop %s)"
                          % (_flag("snapstart", "false"), count, _flag("provisioned_concurrency", str(count))))
    return {"snapstart": False, "provisioned_concurrency": count}
def memory_for_graph(graph_mb: int) -> int:
    """The function memory (MB, a multiple of 64) a graph of `graph_mb` MiB needs at INIT: the graph in memory
    (it never touches /tmp) while onnxruntime builds its session, and the runtime around them."""
    needed = c.INIT_GRAPH_COPIES * graph_mb + c.INIT_BASE_MB
    return -(-needed // 64) * 64


def _sized_for_graphs(raw: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """`-c graph_mb` (the largest deployed graph; the deploy command passes it): the API and jobs functions'
    memory derived from it where not given, and a given one that is too small refused at synth."""
    if raw["graph_mb"] is None:
        return {}
    graph_mb = _int(raw["graph_mb"], "graph_mb", 1, 4096, "626")
    needed = memory_for_graph(graph_mb)
    sized: dict[str, Any] = {}
    for key, field_name, default in (("memory", "memory_mb", c.DEFAULT_MEMORY_MB),
                                     ("jobs_memory", "jobs_memory_mb", c.DEFAULT_JOBS_MEMORY_MB)):
        given = values.get(field_name)
        if given is not None and given < needed:
            raise ConfigError("context %r is %d MB, but a %d MiB graph needs %d MB at INIT (the graph in memory "
                              "while onnxruntime builds its session; docs/deploy.md): use %s"
                              % (key, given, graph_mb, needed, _flag(key, str(needed))))
        sized[field_name] = given if given is not None else max(default, needed)
    return sized


def _jobs_values(raw: dict[str, Any]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    if raw["jobs"] is not None:
        values["jobs"] = _bool(raw["jobs"], "jobs")
    if raw["jobs_memory"] is not None:
        values["jobs_memory_mb"] = _int(raw["jobs_memory"], "jobs_memory", c.MIN_MEMORY_MB, c.MAX_MEMORY_MB, "3008")
    if raw["jobs_timeout"] is not None:
        values["jobs_timeout_s"] = _int(raw["jobs_timeout"], "jobs_timeout", 30, c.MAX_JOBS_TIMEOUT_S, "300")
    if raw["jobs_concurrency"] is not None:
        values["jobs_concurrency"] = _int(raw["jobs_concurrency"], "jobs_concurrency", 1, 10_000, "10")
    if raw["token_rate"] is not None:
        values["token_rate"] = _int(raw["token_rate"], "token_rate", 1, 10_000_000, "500")
    return values


_KMS_KEY_ARN = re.compile(r"^arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key/[A-Za-z0-9-]+$")


def _rollout_values(raw: dict[str, Any]) -> dict[str, Any]:
    """Signing (`-c signing=true`, or `-c signing_key=ARN` for an existing key), the rollout, the pinned artifacts."""
    from laya_serverless.errors import SettingsError
    from laya_serverless.settings import ARTIFACT_PINS, Settings

    values: dict[str, Any] = {}
    if raw["signing"] is not None:
        values["signing"] = _bool(raw["signing"], "signing")
    if raw["signing_key"]:
        if not _KMS_KEY_ARN.match(str(raw["signing_key"])):
            raise ConfigError("context 'signing_key' must be a KMS key ARN, got %r (use %s)" % (
                raw["signing_key"], _flag("signing_key", "arn:aws:kms:eu-west-1:123456789012:key/<id>")))
        if values.get("signing") is False:
            raise ConfigError("context 'signing_key' names a key and 'signing' is false (drop %s)"
                              % _flag("signing", "false"))
        values.update(signing=True, signing_key=str(raw["signing_key"]))
    if raw["rollout"] is not None:
        values["rollout"] = _choice(raw["rollout"], "rollout", c.ROLLOUTS)
    if raw["artifact_pins"]:
        try:
            Settings.from_environ({ARTIFACT_PINS: str(raw["artifact_pins"])})
        except SettingsError as exc:
            raise ConfigError("context 'artifact_pins': %s (use %s)" % (
                exc, _flag("artifact_pins", "demo/cpu-int8=<artifact id>"))) from None
        values["artifact_pins"] = str(raw["artifact_pins"])
    return values
