"""The deployment's settings, read from CDK context (`-c key=value`) and checked before anything is built."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from laya_serverless import settings as runtime
from laya_serverless.configuration import (
    Boolean,
    Choice,
    Field,
    Integer,
    Invalid,
    Number,
    Pattern,
    Text,
    declared,
    setting,
    unknown_names,
)
from laya_serverless.errors import SettingsError

from . import constants as c
from . import sizing

_PREFIX = re.compile(r"^(/[A-Za-z0-9._~-]+)*$")
_ARTIFACT_PREFIX = re.compile(r"^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$")

# Context the CDK CLI itself may pass (cdk.json's acknowledgements), never a setting of this app.
_CDK_KEYS = ("acknowledged-issue-numbers",)
_KMS_KEY_ARN = r"arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key/[A-Za-z0-9-]+"


def _pins(text: str) -> str:
    """`LAYA_ARTIFACT_PINS` as the runtime reads it (refused here, at synth, the same way); kept as text."""
    runtime.fields()["artifact_pins"].parse(text)
    return text


class ConfigError(ValueError):
    """A context value cannot be used; the message names the `-c` flag to fix."""


def _flag(key: str, example: str) -> str:
    return "-c %s=%s" % (key, example)


def _read(field: Field, raw: Any) -> Any:
    """A context value through its field's parser; a refusal names the flag and a value that works."""
    try:
        return field.read(str(raw))
    except Invalid as exc:
        example = exc.suggestion or field.example
        raise ConfigError("context %r %s, got %r (use %s)" % (field.context, exc, raw,
                                                               _flag(str(field.context), str(example)))) from None


def refuse_unknown_context(given: Iterable[str], known: Iterable[str]) -> None:
    """Refuse `-c` keys the app does not declare, in one line naming the nearest declared key. CDK's own keys
    (feature flags `@aws-cdk/...`, `aws:cdk:...`, lookups `kind:account=...`) are not the user's and pass."""
    unknown = unknown_names((k for k in given if not (k.startswith("@") or ":" in k or k in _CDK_KEYS)), known)
    if unknown:
        raise ConfigError("unknown context %s: every -c key is declared in docs/configuration.md"
                          % ", ".join(unknown))


def _prefix(text: str) -> str:
    prefix = text.rstrip("/")
    prefix = "/" + prefix if prefix and not prefix.startswith("/") else prefix
    if not _PREFIX.match(prefix):
        raise Invalid("must be a path like /laya")
    return prefix


def _artifact_prefix(text: str) -> str:
    prefix = text.strip("/")
    if not _ARTIFACT_PREFIX.match(prefix):
        raise Invalid("must be a key prefix like laya-artifacts")
    return prefix


def _deployed_text(text: str) -> str:
    try:
        runtime.Settings.from_environ({runtime.DEPLOYED: text})
    except SettingsError as exc:
        raise Invalid("is refused: %s" % exc) from None
    return text


def _lambda_target(text: str) -> str:
    target = runtime.fields()["target"].parse(text)
    if str(target).startswith("cuda-"):   # Lambda has no GPU: the endpoint has its own flag
        raise Invalid("needs a GPU, and the API function runs on Lambda (use -c gpu=true -c gpu_target=%s for the "
                      "GPU endpoint)" % target)
    return str(target)


def _instance_types(text: str) -> tuple[str, ...]:
    types = tuple(t.strip() for t in text.split(",") if t.strip())
    if not types or not all(re.fullmatch(r"[a-z0-9-]+\.[a-z0-9]+", t) for t in types):
        raise Invalid("must be a comma list of EC2 instance types like c7i.xlarge")
    return types


def _expansion(text: str) -> float:
    value = Number(0, 4, "factor")(text)
    if value < 1:
        raise Invalid("must be a factor from 1 to 4")
    return value


def _c(key: str, parse: Any, default: Any, doc: str, example: str, env: str | None = None, **more: Any) -> Any:
    return setting(Field(env, parse, default, doc, context=key, example=example, **more))


def _linked(name: str, parse: Any = None) -> Any:
    """A stack flag that becomes a runtime variable: declared by the runtime's own field (docs list it there)."""
    field = runtime.fields()[name]
    if parse is not None:
        field = replace(field, parse=Text(field.parse.describe(), parse))
    default = c.DEFAULT_DEPLOYED if name == "deployed" else field.default
    return setting(replace(field, default=default))

@dataclass(frozen=True)
class DeployConfig:
    arch: str = _c("arch", Choice(c.ARCHITECTURES, True), c.DEFAULT_ARCH, "Lambda architecture", "arm64")
    memory_mb: int = _c("memory", Integer(c.MIN_MEMORY_MB, c.MAX_MEMORY_MB), c.DEFAULT_MEMORY_MB,
                        "API function memory (MB); at least what its checkpoints need at INIT (`graph_mb`)", "3008")
    timeout_s: int = _c("timeout", Integer(3, c.MAX_TIMEOUT_S), c.DEFAULT_TIMEOUT_S, "API function timeout (s)", "29")
    prefix: str = _c("prefix", Text("a path like /laya", _prefix), c.DEFAULT_PREFIX, "Path prefix of every route",
                     "/laya")
    stage: str = _c("stage", Pattern(r"[A-Za-z0-9_-]{1,128}", "letters, digits, - or _"), c.DEFAULT_STAGE,
                    "REST API stage name", "prod")
    artifact_bucket: str | None = _c(
        "artifact_bucket", Pattern(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]", "a valid bucket name"), None,
        "An existing artifact bucket (unset: the stack creates one)", "my-laya-artifacts")
    artifact_prefix: str = _c("artifact_prefix", Text("a key prefix", _artifact_prefix), c.DEFAULT_ARTIFACT_PREFIX,
                              "Key prefix of the store in the bucket", "laya-artifacts")
    deployed: str = _linked("deployed", _deployed_text)
    target: str = _linked("target", _lambda_target)
    auth: bool = _c("auth", Boolean(), True, "Bearer auth through the TOKEN authorizer", "true")
    api_key_secret: str | None = _c("api_key_secret", Text("secret name or ARN"), None,
                                    "An existing Secrets Manager secret (unset: the stack creates one)", "laya-key")
    reserved_concurrency: int | None = _c("reserved_concurrency", Integer(1, 10_000), None,
                                          "Reserved concurrency of the API function", "10")
    throttle_rate: int = _c("throttle_rate", Integer(1, 10_000), c.DEFAULT_THROTTLE_RATE,
                            "Stage throttle: requests a second", "50")
    throttle_burst: int = _c("throttle_burst", Integer(1, 5_000), c.DEFAULT_THROTTLE_BURST, "Stage throttle: burst",
                             "100")
    duration_alarm_ms: int = _c("duration_alarm_ms", Integer(1, 900_000), c.DEFAULT_DURATION_ALARM_MS,
                                "Alarm on p99 duration above this", "10000")
    init_alarm_ms: int = _c("init_alarm_ms", Integer(1, 900_000), c.DEFAULT_INIT_ALARM_MS,
                            "Alarm on INIT duration above this", "5000")
    alarm_email: str | None = _c("alarm_email", Text("e-mail address"), None, "Alarms' SNS subscription",
                                 "ops@example.com")
    jev_strict: bool = _linked("jev_strict")
    jev_confidence: str = _linked("jev_confidence")
    asset_dir: Path = _c("asset_dir", Text("folder", lambda text: Path(text).resolve()), c.DEFAULT_ASSET_DIR,
                         "The built Lambda package (laya-artifacts package)", "build/lambda",
                         shown_default="build/lambda in the checkout")
    snapstart: bool = _c("snapstart", Boolean(), True, "SnapStart on the API function's published versions",
                         "false")
    provisioned_concurrency: int | None = _c(
        "provisioned_concurrency", Integer(1, 10_000), None,
        "Instances kept initialized instead of SnapStart", "2")
    jobs: bool = _c("jobs", Boolean(), True, "/v1/jobs, the jobs function and its Step Functions engine", "true")
    jobs_memory_mb: int = _c("jobs_memory", Integer(c.MIN_MEMORY_MB, c.MAX_MEMORY_MB), c.DEFAULT_JOBS_MEMORY_MB,
                             "Jobs function memory (MB)", "3008")
    jobs_timeout_s: int = _c("jobs_timeout", Integer(30, c.MAX_JOBS_TIMEOUT_S), c.DEFAULT_JOBS_TIMEOUT_S,
                             "Jobs function timeout (s)", "300")
    jobs_concurrency: int = _c("jobs_concurrency", Integer(1, 10_000), c.DEFAULT_JOBS_CONCURRENCY,
                               "Distributed Map child executions at once", "10")
    token_rate: int = _c("token_rate", Integer(1, 10_000_000), c.TOKEN_RATE_PER_VCPU,
                         "Row tokens a second one vCPU answers (`laya-artifacts bench jobs` prints it)", "500")
    deploy_gate: bool = _c("deploy_gate", Boolean(), True, "Re-gate int8 artifacts on the function's own CPU",
                           "true")
    deploy_gate_strict: bool = _c("deploy_gate_strict", Boolean(), False,
                                  "A failing deploy gate rolls the deployment back", "true")
    graph_mb: dict[str, float] | None = _c(
        "graph_mb", Text("STORED=MiB,... or MiB", sizing.per_checkpoint(Number(0, c.MAX_MEMORY_MB, "MiB"), "graph")),
        None, "Each deployed checkpoint's graph (MiB, as stored; one number: each at most that); sizes the functions' "
        "memory, and the deploy command passes it", "laya-en=1608,laya-m=1229",
        shown_default="unset (the demo's 101 MiB is known)")
    expands_at_load: dict[str, float] | None = _c(
        "expands_at_load", Text("STORED=FACTOR,... or FACTOR", sizing.per_checkpoint(_expansion, "expansion")),
        None, "How much larger a graph is once loaded (2: stored FP16, served FP32)", "laya-en=2",
        shown_default="1")
    init_peak_mb: dict[str, float] | None = _c(
        "init_peak_mb", Text("STORED=MB,... or MB", sizing.per_checkpoint(Number(0, c.MAX_MEMORY_MB, "MB"), "peak")),
        None, "A checkpoint's INIT peak measured for its artifact; used instead of the rule from `graph_mb`",
        "laya-en=3500", shown_default="unset: the rule")
    signing: bool = _c("signing", Boolean(), False,
                       "Artifacts must be signed: the stack's KMS key (or signing_key) is trusted (docs/artifacts.md)",
                       "true")
    signing_key: str | None = _c("signing_key", Pattern(_KMS_KEY_ARN, "a KMS key ARN"), None,
                                 "An existing KMS signing key to trust (implies signing; the deploy command's)",
                                 "arn:aws:kms:eu-west-1:123456789012:key/<id>")
    rollout: str = _c("rollout", Choice(c.ROLLOUTS, case_sensitive=True), c.DEFAULT_ROLLOUT,
                      "How CodeDeploy moves the live alias to a new version (docs/deploy.md)", "all-at-once")
    artifact_pins: str | None = _c("artifact_pins", Text("CHECKPOINT/TARGET=ID,...", _pins), None,
                                   "The artifacts a version serves (LAYA_ARTIFACT_PINS); the deploy command passes it",
                                   "demo/cpu-int8=<artifact id>")
    jobs_retention_days: int = _c("jobs_retention_days", Integer(1, c.MAX_JOBS_RETENTION_DAYS),
                                  c.DEFAULT_JOBS_RETENTION_DAYS, "Days after which job data (the bucket's "
                                  "`<artifact_prefix>/jobs/`) expires; the stack's own bucket", "30")
    compute: str = _c("compute", Choice(c.COMPUTES, True), c.COMPUTE_LAMBDA,
                      "Where the API function runs: Lambda's own fleet, or managed-instances (a capacity provider of "
                      "pinned EC2 families; docs/deploy.md)", c.COMPUTE_MANAGED)
    instance_types: tuple[str, ...] = _c(
        "instance_types", Text("comma list of EC2 types", _instance_types), (),
        "Managed instances: the EC2 types allowed, of families whose int8 class the gate covers",
        "c7i.xlarge,m7i.xlarge", shown_default="c7i.xlarge,m7i.xlarge (arm64: c7g.xlarge,m7g.xlarge)")
    mi_concurrency: int | None = _c("mi_concurrency", Integer(1, c.MI_MAX_CONCURRENCY), None,
                                    "Managed instances: processes (model copies) per execution environment",
                                    "2", shown_default="as many as fit in memory")

    @property
    def function_asset(self) -> Path:
        return self.asset_dir / self.arch / "function"

    @property
    def layer_asset(self) -> Path:
        return self.asset_dir / self.arch / "layer"

    @property
    def threads(self) -> int:
        """Whole vCPUs this memory setting buys (at least one): what token rates are planned on. The function
        sizes its own threads to its CPU quota (functions/laya_serverless/core/cpu_share.py): no LAYA_THREADS."""
        return max(1, min(6, int(self.memory_mb * c.VCPU_PER_MB)))

    @property
    def managed_threads(self) -> int:
        """Managed instances: intra-op threads per process, the environment's vCPUs shared between its processes
        (the runtime's own rule reads Lambda's memory and knows nothing of the processes beside it)."""
        return max(1, int(managed_vcpus(self.memory_mb)) // (self.mi_concurrency or 1))

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
        values: dict[str, Any] = {}
        for name, field in declared(cls).items():
            raw = get(field.context)
            if raw is not None and (str(raw) != "" or field.default is None):
                values[name] = _read(field, raw) if str(raw) != "" else None
        values.update(_warm_start(values))
        values.update(_signing(values))
        values.update(_sized_for_graphs(values))
        values.update(_managed_instances(values))
        config = cls(**values)
        config.check_assets()
        return config

    def check_assets(self) -> None:
        for path in (self.function_asset, self.layer_asset):
            if not path.is_dir():
                raise ConfigError(
                    "%s is missing: build the Lambda package first with "
                    "`laya-artifacts package --arch %s` (or point %s at a built one)"
                    % (path, self.arch, _flag("asset_dir", "build/lambda")))


def _warm_start(values: dict[str, Any]) -> dict[str, Any]:
    """SnapStart (the default) or provisioned concurrency: Lambda allows one or the other on a version."""
    count = values.get("provisioned_concurrency")
    if count is None:
        return {}
    if values.get("snapstart"):
        raise ConfigError("context 'provisioned_concurrency' and 'snapstart' exclude each other: Lambda does not "
                          "run SnapStart on provisioned instances (use %s to keep %d instances warm, or drop %s)"
                          % (_flag("snapstart", "false"), count, _flag("provisioned_concurrency", str(count))))
    return {"snapstart": False}


def _signing(values: dict[str, Any]) -> dict[str, Any]:
    """An existing key (`-c signing_key`) turns signing on; it cannot be named with signing off."""
    if values.get("signing_key") is None:
        return {}
    if values.get("signing") is False:
        raise ConfigError("context 'signing_key' names a key and 'signing' is false (drop %s)"
                          % _flag("signing", "false"))
    return {"signing": True}


def _sized_for_graphs(values: dict[str, Any]) -> dict[str, Any]:
    """The API and jobs functions each hold every deployed checkpoint: their memory is the sum of those checkpoints'
    INIT peaks plus headroom (`sizing`) where not given, and a given one that is smaller is refused at synth."""
    needed, held = sizing.needed_mb(values, ConfigError)
    sized: dict[str, Any] = {}
    for key, field_name, default in (("memory", "memory_mb", c.DEFAULT_MEMORY_MB),
                                     ("jobs_memory", "jobs_memory_mb", c.DEFAULT_JOBS_MEMORY_MB)):
        given = values.get(field_name)
        if given is not None and given < needed:
            raise ConfigError("context %r is %d MB, but the checkpoints it holds need %d MB at INIT (%s, +%d%% "
                              "headroom; docs/deploy.md#memory): use %s"
                              % (key, given, needed, " + ".join(one.describe() for one in held),
                                 round(c.INIT_HEADROOM * 100), _flag(key, str(needed))))
        sized[field_name] = given if given is not None else max(default, needed)
    return sized


def managed_vcpus(memory_mb: int) -> float:
    """The vCPUs of a managed-instances execution environment of `memory_mb`."""
    return memory_mb / 1024 / c.MI_MEMORY_GIB_PER_VCPU


def _covered_types(types: tuple[str, ...], arch: str, target: str) -> None:
    """Each type of a known family, of the function's architecture and, for int8, of a class the gate covers."""
    example = ",".join(c.DEFAULT_INSTANCE_TYPES[arch])
    for name in types:
        kernels = c.INSTANCE_INT8_CLASSES.get(name.partition(".")[0])
        if kernels is None:
            raise ConfigError("context 'instance_types': %r is not a type of a known C/M/R family (%s) (use %s)"
                              % (name, ", ".join(sorted(c.INSTANCE_INT8_CLASSES)), _flag("instance_types", example)))
        if (kernels in c.ARM_INT8_CLASSES) != (arch == "arm64"):
            other = "x86_64" if arch == "arm64" else "arm64"
            raise ConfigError("context 'instance_types': %s is not an %s type (use %s, or -c arch=%s)"
                              % (name, arch, _flag("instance_types", example), other))
        if "int8" in target and kernels not in c.GATE_COVERED_INT8_CLASSES:
            covered = sorted(f for f, k in c.INSTANCE_INT8_CLASSES.items() if k in c.GATE_COVERED_INT8_CLASSES)
            raise ConfigError("context 'instance_types': %s runs int8 on the %s class, which the gate does not cover "
                              "(covered: %s; families %s) (use %s, or -c target=cpu-fp32)"
                              % (name, kernels, ", ".join(c.GATE_COVERED_INT8_CLASSES), ", ".join(covered),
                                 _flag("instance_types", ",".join(c.DEFAULT_INSTANCE_TYPES["x86_64"]))))


def _managed_instances(values: dict[str, Any]) -> dict[str, Any]:
    """`-c compute=managed-instances`: instance types pinned to families whose int8 class the gate covers, and as
    many processes per environment as copies of the model fit in its memory (Python runs one per request)."""
    if values.get("compute", c.COMPUTE_LAMBDA) != c.COMPUTE_MANAGED:
        for key in ("instance_types", "mi_concurrency"):
            if values.get(key) is not None:
                raise ConfigError("context %r applies to managed instances only (use %s)"
                                  % (key, _flag("compute", c.COMPUTE_MANAGED)))
        return {}
    if values.get("snapstart") or values.get("provisioned_concurrency"):
        raise ConfigError("managed instances start their environments ahead of traffic and run neither SnapStart nor "
                          "provisioned concurrency (use %s, or drop -c provisioned_concurrency)"
                          % _flag("snapstart", "false"))
    arch = values.get("arch", c.DEFAULT_ARCH)
    types = values.get("instance_types") or c.DEFAULT_INSTANCE_TYPES[arch]
    _covered_types(types, arch, values.get("target", c.DEFAULT_TARGET))
    memory_mb = values.get("memory_mb", c.DEFAULT_MEMORY_MB)
    per_copy, _ = sizing.needed_mb(values, ConfigError)   # each process loads every deployed checkpoint
    fit = min(c.MI_MAX_CONCURRENCY, memory_mb // per_copy)
    concurrency = values.get("mi_concurrency") or fit
    if concurrency > fit:
        raise ConfigError("context 'mi_concurrency' is %d, but only %d copies of the deployed checkpoints (%d MB "
                          "each at INIT) fit in %d MB (use %s, or a larger -c memory)"
                          % (concurrency, fit, per_copy, memory_mb, _flag("mi_concurrency", str(fit))))
    return {"instance_types": tuple(types), "mi_concurrency": concurrency, "snapstart": False}
