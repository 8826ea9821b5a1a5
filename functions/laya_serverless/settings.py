"""Configuration, read once at the edge from an environment mapping (docs/configuration.md).

Every variable is declared once below, as a `Field` on the part of `Settings` whose consumer reads it
(`HttpSettings`, `ProtocolSettings`, `Limits`, `LocalServerSettings`, `DeploymentSettings`,
`JobSettings`): its name, type and bounds, default, whether a bad value is refused or (upstream's rule
for a few) means the default, and a line of doc. The edge builds `Settings` once and hands each
consumer only its part. Upstream reads `LAYA_JEV_STRICT`, `LAYA_MAX_TOKEN_BUDGET` and
`LAYA_MAX_BATCH_TOKENS` on every request; a Lambda function's environment cannot change while it runs,
so here they are read once with the rest. Names are constants, shared with the CDK app.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .artifact.store import DEFAULT_LOCAL_STORE
from .artifact.targets import DEFAULT_CPU_TARGET, DEFAULT_CUDA_TARGET, TARGETS
from .artifact.transfer import DEFAULT_CONCURRENCY, DEFAULT_PART_MB, DownloadParts
from .configuration import (
    Boolean,
    Choice,
    Field,
    Integer,
    Invalid,
    Number,
    Secret,
    Text,
    declared,
    parse_environ,
    unknown_names,
)
from .configuration import setting as _setting
from .core.controls import DEFAULT_MAX_BATCH_TOKENS, DEFAULT_MAX_TOKEN_BUDGET, MAX_CHOICE_OPTIONS
from .core.providers import CPU, CUDA, DEVICES, device_of_target
from .errors import SettingsError

API_KEY = "LAYA_API_KEY"
ROOT_PATH = "LAYA_ROOT_PATH"
MAX_CONCURRENT = "LAYA_MAX_CONCURRENT"
BODY_READ_TIMEOUT = "LAYA_BODY_READ_TIMEOUT"
MAX_TOKEN_BUDGET = "LAYA_MAX_TOKEN_BUDGET"
MAX_BATCH_TOKENS = "LAYA_MAX_BATCH_TOKENS"
JEV_STRICT = "LAYA_JEV_STRICT"
AUTO_TASK = "LAYA_AUTO_TASK"
DEFAULT_MODEL = "LAYA_DEFAULT_MODEL"
THREADS = "LAYA_THREADS"
SPINNING = "LAYA_SPINNING"
TOURNAMENT_GROUP = "LAYA_TOURNAMENT_GROUP"
IDLE_UNLOAD_SECONDS = "LAYA_IDLE_UNLOAD_SECONDS"
HOST, PORT = "LAYA_HOST", "LAYA_PORT"
STORE = "LAYA_STORE"
DEPLOYED = "LAYA_DEPLOYED"
TARGET = "LAYA_TARGET"
CACHE_DIR = "LAYA_CACHE_DIR"
GRAPH_IN_MEMORY = "LAYA_GRAPH_IN_MEMORY"
DOWNLOAD_PART_MB = "LAYA_DOWNLOAD_PART_MB"
DOWNLOAD_CONCURRENCY = "LAYA_DOWNLOAD_CONCURRENCY"
API_BASE_PATH = "LAYA_API_BASE_PATH"
API_KEY_SECRET = "LAYA_API_KEY_SECRET_ARN"
GPU_ENDPOINT = "LAYA_GPU_ENDPOINT"
GPU_INFERENCE_COMPONENT = "LAYA_GPU_INFERENCE_COMPONENT"
DEVICE = "LAYA_DEVICE"
DEFAULT_TARGETS = {CPU: DEFAULT_CPU_TARGET, CUDA: DEFAULT_CUDA_TARGET}
READS_PER_CLIENT = "LAYA_MAX_READS_PER_CLIENT"
HEADER_TIMEOUT = "LAYA_HEADER_TIMEOUT"
KEEP_ALIVE_TIMEOUT = "LAYA_KEEP_ALIVE_TIMEOUT"
JEV_CONFIDENCE = "LAYA_JEV_CONFIDENCE"
JEV_CONFIDENCES = ("laya", "jev")  # strict mode's `confidence`: Laya's entropy concentration, or Jev's formula
JOBS_STATE_MACHINE = "LAYA_JOBS_STATE_MACHINE"
JOBS_WORKERS = "LAYA_JOBS_WORKERS"
JOBS_MAX_STATES = "LAYA_JOBS_MAX_STATES"
JOBS_MAX_INPUT_BYTES = "LAYA_JOBS_MAX_INPUT_BYTES"
JOBS_TIME_BUDGET = "LAYA_JOBS_TIME_BUDGET"
JOBS_TOKEN_RATE = "LAYA_JOBS_TOKEN_RATE"
BATCH_TIME_BUDGET = "LAYA_BATCH_TIME_BUDGET"
BATCH_TOKEN_RATE = "LAYA_BATCH_TOKEN_RATE"
ARTIFACT_KEYS = "LAYA_ARTIFACT_KEYS"
ARTIFACT_PINS = "LAYA_ARTIFACT_PINS"

_MANY = 10**9  # the upper bound of counts upstream leaves unbounded
PREFIX = "LAYA_"  # every variable of this table starts so; an undeclared one is refused at start
# Upstream's variables this deployment replaces (docs/protocol.md): refused with what to set instead.
REPLACED = {name: DEPLOYED for name in ("LAYA_PRELOAD", "LAYA_MODELS", "LAYA_MAX_LOADED", "LAYA_EXTRA_MODELS")}


def _deployed(text: str) -> dict[str, str]:
    deployed: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, stored = part.partition("=")
        if not name.strip():
            raise Invalid("each entry is NAME or NAME=STORED_CHECKPOINT")
        deployed[name.strip().lower()] = (stored or name).strip()
    if not deployed:
        raise Invalid("names no checkpoint (NAME or NAME=STORED_CHECKPOINT, comma-separated)")
    return deployed


def _artifact_keys(text: str) -> tuple[str, ...]:
    return tuple(filter(None, (part.strip() for part in text.split(","))))


def _artifact_pins(text: str) -> dict[str, str]:
    """CHECKPOINT/TARGET=ID pairs (a hub checkpoint keeps its owner/ prefix: the target is after the last /)."""
    pins: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        pair, _, artifact_id = part.partition("=")
        checkpoint, _, target = pair.strip().rpartition("/")
        if not (checkpoint and target and re.fullmatch(r"[0-9a-f]{64}", artifact_id.strip())):
            raise Invalid("entry %r: each is CHECKPOINT/TARGET=ARTIFACT_ID (a sha256)" % part)
        pins[pair.strip()] = artifact_id.strip()
    return pins


def _path(text: str) -> str:
    """A URL path prefix: empty or `/` (none), else /SEGMENT[/SEGMENT...] of URL-safe characters, never . or .."""
    prefix = text.rstrip("/") if text != "/" else text
    segments = prefix.split("/")[1:]
    if prefix in ("", "/") or (prefix.startswith("/") and all(
            re.fullmatch(r"[A-Za-z0-9._~-]+", s) and s not in (".", "..") for s in segments)):
        return prefix
    raise Invalid("must be a path like /laya (segments of letters, digits and ._~-, no . or ..)")


def _store(text: str) -> str:
    if text.startswith("s3://") and not text[len("s3://"):].split("/")[0]:
        raise Invalid("must be s3://BUCKET[/PREFIX] or a folder")
    return text


def _target(text: str) -> str:
    if text not in TARGETS:
        raise Invalid("must be one of %s" % ", ".join(TARGETS))
    return text


def _threads(text: str) -> int | None:
    value = Integer(0, 256)(text)
    return value or None


def _field(env: str | None, parse: Any, default: Any, doc: str, **more: Any) -> Any:
    return _setting(Field(env, parse, default, doc, **more))


@dataclass(frozen=True)
class HttpSettings:
    """The HTTP app and the edges in front of it: who may call, where it is mounted, when it unloads."""

    api_key: str | None = _field(
        API_KEY, Secret(), None, "Bearer key every route but liveness requires; unset: no auth (never logged)",
        raw=True)
    api_key_secret: str | None = _field(
        API_KEY_SECRET, Text("Secrets Manager ARN"), None,
        "Lambda: read the bearer key from this secret at INIT (the key never sits in the environment)")
    idle_unload_seconds: float = _field(
        IDLE_UNLOAD_SECONDS, Number(unit="number of seconds"), 0.0,
        "A long-running server unloads its checkpoints after this idle time (0: never)", tolerant=True)
    root_path: str = _field(ROOT_PATH, Text("path like /laya", _path), "",
                            "ASGI root path (the OpenAPI document's server URL)")
    api_base_path: str = _field(API_BASE_PATH, Text("path like /prod", _path), "/",
                                "A path prefix API Gateway leaves on requests (REST stage, custom domain)")


@dataclass(frozen=True)
class ProtocolSettings:
    """How requests are answered: the Jev contract, task routing, tournament narrowing."""

    jev_strict: bool = _field(JEV_STRICT, Boolean(), False, "Strict Jev contract (docs/protocol.md)",
                              context="jev_strict", example="true")
    jev_confidence: str = _field(JEV_CONFIDENCE, Choice(JEV_CONFIDENCES), "laya",
                                 "Strict mode's `confidence`: Laya's entropy concentration or Jev's formula",
                                 context="jev_confidence", example="jev")
    auto_task: bool = _field(AUTO_TASK, Boolean(), False, "Route by detected task when no model is named")
    tournament_group: int = _field(
        TOURNAMENT_GROUP, Integer(2, MAX_CHOICE_OPTIONS), 0,
        "Choices with more options than this are narrowed by elimination (0: off)", tolerant=True)


@dataclass(frozen=True)
class Limits:
    """What one request, client or session pass may take (admission, budgets, the /batch time budget)."""

    max_concurrent: int = _field(MAX_CONCURRENT, Integer(1, _MANY), 16, "Requests served at once", tolerant=True)
    body_read_timeout: float = _field(BODY_READ_TIMEOUT, Number(unit="number of seconds"), 10.0,
                                      "Seconds a request body may take to arrive", tolerant=True)
    max_token_budget: int = _field(MAX_TOKEN_BUDGET, Integer(1, _MANY), DEFAULT_MAX_TOKEN_BUDGET,
                                   "Tokens one decision may use (upstream's rule)", tolerant=True)
    max_batch_tokens: int = _field(MAX_BATCH_TOKENS, Integer(1, _MANY), DEFAULT_MAX_BATCH_TOKENS,
                                   "Tokens one session pass may hold (upstream's rule)", tolerant=True)
    max_reads_per_client: int = _field(READS_PER_CLIENT, Integer(1, _MANY), 4,
                                       "Bodies one client may be sending at once", tolerant=True)
    batch_time_budget: float = _field(
        BATCH_TIME_BUDGET, Number(unit="number of seconds"), 0.0,
        "A /batch planned past this many seconds is refused with 413 pointing at /v1/jobs (0: off)", tolerant=True)
    batch_token_rate: int = _field(BATCH_TOKEN_RATE, Integer(1, _MANY), 500,
                                   "Row tokens a second this function answers /batch at", tolerant=True)


@dataclass(frozen=True)
class LocalServerSettings:
    """The local server of `serve` and `start-api` (uvicorn): its address and connection deadlines."""

    host: str | None = _field(HOST, Text("address"), None, "Bind address of `serve`/`start-api`",
                              shown_default="127.0.0.1")
    port: int = _field(PORT, Integer(1, 65535), 8000, "Port of `serve`/`start-api`")
    header_timeout: float = _field(HEADER_TIMEOUT, Number(unit="number of seconds"), 10.0,
                                   "Local server: seconds a connection has to deliver its request headers")
    keep_alive_timeout: float = _field(KEEP_ALIVE_TIMEOUT, Number(unit="number of seconds"), 5.0,
                                       "Local server: an idle keep-alive connection is closed after this")


@dataclass(frozen=True)
class DeploymentSettings:
    """Where artifacts live, which checkpoints are served, where and how (`assembly`)."""

    store: str = _field(STORE, Text("s3://BUCKET[/PREFIX] or a folder", _store), DEFAULT_LOCAL_STORE,
                        "The artifact store")
    deployed: dict[str, str] = _field(
        DEPLOYED, Text("NAME[=STORED],...", _deployed), {"english": "demo"},
        "Served names and the stored checkpoint each reads, e.g. english=demo,multilingual=laya-m",
        context="deployed", example="english=demo", shown_default="english=demo")
    default_model: str = _field(
        DEFAULT_MODEL, Text("a deployed name", str.lower), None,
        "The checkpoint a request without `model` gets; must be deployed",
        shown_default="multilingual if deployed, else the first deployed name")
    device: str = _field(DEVICE, Choice(DEVICES), CPU, "Where sessions must run; never a silent move to the other")
    target: str = _field(TARGET, Text(" | ".join(TARGETS), _target), DEFAULT_CPU_TARGET,
                         "The compute target served; cpu-int8 serves the checkpoint's cpu-fp32 where no int8 "
                         "artifact is published or its gate never ran on this CPU (`/health` says why)",
                         context="target", example="cpu-int8",
                         shown_default="cpu-int8 (cuda-fp16 with LAYA_DEVICE=cuda)")
    cache_dir: str | None = _field(CACHE_DIR, Text("folder"), None, "Where verified artifacts are kept",
                                   shown_default="a private per-user folder")
    graph_in_memory: bool = _field(GRAPH_IN_MEMORY, Boolean(), False,
                                   "Graphs stream into memory, never into the cache (Lambda: /tmp is 512 MB)")
    download_part_mb: int = _field(DOWNLOAD_PART_MB, Integer(1, 1024), DEFAULT_PART_MB,
                                   "S3 downloads: MiB per ranged GET; a larger object is fetched in parts")
    download_concurrency: int = _field(DOWNLOAD_CONCURRENCY, Integer(1, 64), DEFAULT_CONCURRENCY,
                                       "S3 downloads: ranged GETs at once (1: one stream)")
    threads: int | None = _field(THREADS, Text("integer 0-256", _threads), None,
                                 "ONNX Runtime intra-op threads (unset or 0: sized to the CPU share)")
    spinning: bool = _field(SPINNING, Boolean(), False,
                            "ONNX Runtime's idle threads spin (off: under a CPU quota spinning burns granted time)")
    # Signed artifacts and pinned versions (docs/artifacts.md#signatures, docs/deploy.md#safe-rollout-and-rollback)
    artifact_keys: tuple[str, ...] = _field(
        ARTIFACT_KEYS, Text("KMS key ARN or PEM public-key file,...", _artifact_keys), (),
        "Trusted artifact signing keys; set, every served artifact needs a valid signature by one of them",
        shown_default="none: signatures not checked")
    artifact_pins: dict[str, str] = _field(
        ARTIFACT_PINS, Text("CHECKPOINT/TARGET=ARTIFACT_ID,...", _artifact_pins), {},
        "Serve these artifacts instead of following the store's pointers (a function version's own)",
        shown_default="none: the pointers")

    @property
    def download_parts(self) -> DownloadParts:
        return DownloadParts(self.download_part_mb, self.download_concurrency)

    def __post_init__(self) -> None:
        if not self.default_model:   # the deployment's own default, as `from_environ({})` resolves it
            chosen = "multilingual" if "multilingual" in self.deployed else next(iter(self.deployed))
            object.__setattr__(self, "default_model", chosen)


@dataclass(frozen=True)
class JobSettings:
    """Batch jobs (docs/jobs.md): the engine, and how large a job and its shards may be."""

    jobs_state_machine: str | None = _field(JOBS_STATE_MACHINE, Text("Step Functions ARN"), None,
                                            "Lambda: the Step Functions engine; unset: the local engine")
    jobs_workers: int = _field(JOBS_WORKERS, Integer(0, 64), 1,
                               "Local engine: worker processes (0: no local jobs; at most this machine's CPUs)")
    jobs_max_states: int = _field(JOBS_MAX_STATES, Integer(1, _MANY), 100_000, "States one job may hold",
                                  tolerant=True)
    jobs_max_input_bytes: int = _field(JOBS_MAX_INPUT_BYTES, Integer(1, _MANY), 64 * 1024 * 1024,
                                       "Bytes of one job's input file", tolerant=True)
    jobs_time_budget: float = _field(JOBS_TIME_BUDGET, Number(unit="number of seconds"), 10.0,
                                     "Seconds of inference one shard is sized for", tolerant=True)
    jobs_token_rate: int = _field(JOBS_TOKEN_RATE, Integer(1, _MANY), 500,
                                  "Row tokens a second one worker is assumed to process", tolerant=True)

    @property
    def local_processes(self) -> int:
        """Processes on this machine that run inference and share its CPU quota: with the local engine, its
        worker pool; with Step Functions, the jobs run in their own function."""
        return self.jobs_workers if self.jobs_state_machine is None else 1


@dataclass(frozen=True)
class Settings:
    """Every part, built once at the edge (`from_environ`); the edge hands each consumer its part."""
    http: HttpSettings = field(default_factory=HttpSettings)
    protocol: ProtocolSettings = field(default_factory=ProtocolSettings)
    limits: Limits = field(default_factory=Limits)
    local_server: LocalServerSettings = field(default_factory=LocalServerSettings)
    deployment: DeploymentSettings = field(default_factory=DeploymentSettings)
    jobs: JobSettings = field(default_factory=JobSettings)

    @classmethod
    def of(cls, **values: Any) -> Settings:
        """Settings from flat field names (`Settings.of(store=..., jobs_workers=0)`), each routed to its part;
        a name no part declares is refused."""
        unknown = sorted(set(values) - set(fields()))
        if unknown:
            raise TypeError("no such setting: %s" % ", ".join(unknown))
        return cls(**{name: part(**{key: value for key, value in values.items() if key in declared(part)})
                      for name, part in _parts().items()})

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        refuse_undeclared(env)
        values: dict[str, Any] = {}
        for part in _parts().values():
            values.update(parse_environ(part, env, SettingsError))
        if values["api_key"] is not None and values["api_key_secret"] is not None:
            raise SettingsError("%s and %s are both set: name the key once (the secret's ARN on Lambda), not two "
                                "keys of which one would silently win" % (API_KEY, API_KEY_SECRET))
        if not (env.get(TARGET) or "").strip():
            values["target"] = DEFAULT_TARGETS[values["device"]]
        if device_of_target(values["target"]) != values["device"]:
            device, target = values["device"], values["target"]
            raise SettingsError("%s=%s cannot serve %s=%s: that target was gated on %s; set %s=%s or a %s-* target"
                                % (DEVICE, device, TARGET, target, device_of_target(target), DEVICE,
                                   device_of_target(target), device))
        _check_deployment_pins(values, env)
        _check_workers(values, env)
        chosen = values["default_model"]
        if chosen is not None and chosen not in values["deployed"]:
            raise SettingsError("invalid %s %r: must be one of the deployed names (%s: %s)"
                                % (DEFAULT_MODEL, env.get(DEFAULT_MODEL), DEPLOYED, ", ".join(values["deployed"])))
        return cls.of(**values)


def _check_deployment_pins(values: dict[str, Any], env: Mapping[str, str]) -> None:
    """A pin of a checkpoint this deployment does not serve would be ignored: refused, naming what is deployed."""
    stored = set(values["deployed"].values())
    stray = sorted(pin for pin in values["artifact_pins"] if pin.rpartition("/")[0] not in stored)
    if stray:
        raise SettingsError("invalid %s: %s pins a checkpoint that is not deployed (%s: %s)"
                            % (ARTIFACT_PINS, ", ".join(stray), DEPLOYED, ", ".join(sorted(stored))))


def _check_workers(values: dict[str, Any], env: Mapping[str, str]) -> None:
    """Each local jobs worker holds its own copy of every model: never more processes than this machine's CPUs."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if values["jobs_state_machine"] is None and values["jobs_workers"] > cpus:
        raise SettingsError("invalid %s %r: this machine has %d CPUs; at most %d worker processes"
                            % (JOBS_WORKERS, env.get(JOBS_WORKERS), cpus, cpus))


def _parts() -> dict[str, type]:
    """Settings' parts by attribute name, in declaration order (each part's class is its field's factory)."""
    return {part.name: part.default_factory for part in dataclasses.fields(Settings)}  # type: ignore[misc]


# Variables read by the stack's two small functions, which do not ship this package.
OTHER_FUNCTIONS = (
    Field(GPU_ENDPOINT, Text("SageMaker endpoint name"), None,
          "The /gpu proxy function: the SageMaker endpoint it invokes"),
    Field(GPU_INFERENCE_COMPONENT, Text("SageMaker inference component name"), None,
          "The /gpu proxy function: the inference component it names (-c gpu_min_instances=0)"),
)


def refuse_undeclared(environ: Mapping[str, str]) -> None:
    """Refuse `LAYA_*` names the table does not declare (a typo would otherwise start with the default: no auth,
    no signature checks), naming the nearest declared one, and upstream's names with what replaces them."""
    given = [name for name in environ if name.startswith(PREFIX)]
    replaced = sorted(name for name in given if name in REPLACED)
    if replaced:
        raise SettingsError("%s: not read here; set %s instead (docs/protocol.md)"
                            % (", ".join(replaced), REPLACED[replaced[0]]))
    known = [f.env for f in (*fields().values(), *OTHER_FUNCTIONS) if f.env]
    unknown = unknown_names(given, known)
    if unknown:
        raise SettingsError("unknown setting %s: every %s* variable is declared in docs/configuration.md; unset it"
                            % (", ".join(unknown), PREFIX))


def fields() -> dict[str, Field]:
    """Every runtime setting of every part, by attribute name (docs/configuration.md is generated from it)."""
    return {name: declared_field for part in _parts().values() for name, declared_field in declared(part).items()}
