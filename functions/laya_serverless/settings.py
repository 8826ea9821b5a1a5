"""Configuration, read once at the edge from an environment mapping (docs/protocol.md#environment-variables).

Upstream reads `LAYA_JEV_STRICT`, `LAYA_MAX_TOKEN_BUDGET` and `LAYA_MAX_BATCH_TOKENS` on every
request; a Lambda function's environment cannot change while it runs, so here they are read once
with the rest. Names are constants, shared with the CDK app.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from .artifact.targets import DEFAULT_CPU_TARGET, DEFAULT_CUDA_TARGET
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
TOURNAMENT_GROUP = "LAYA_TOURNAMENT_GROUP"
IDLE_UNLOAD_SECONDS = "LAYA_IDLE_UNLOAD_SECONDS"
HOST, PORT = "LAYA_HOST", "LAYA_PORT"
# The deployment's own: where artifacts live and which checkpoints are served.
STORE = "LAYA_STORE"
DEPLOYED = "LAYA_DEPLOYED"  # comma list of NAME or NAME=STORED_CHECKPOINT, e.g. "english=demo"
TARGET = "LAYA_TARGET"
CACHE_DIR = "LAYA_CACHE_DIR"
# Lambda: graphs stream into memory, never into the cache: a checkpoint's FP32 graph outgrows the 512 MB /tmp
GRAPH_IN_MEMORY = "LAYA_GRAPH_IN_MEMORY"
API_BASE_PATH = "LAYA_API_BASE_PATH"  # a path prefix API Gateway leaves on requests (REST stage, custom domain)
API_KEY_SECRET = "LAYA_API_KEY_SECRET_ARN"  # Lambda: read the bearer key from Secrets Manager at INIT
GPU_ENDPOINT = "LAYA_GPU_ENDPOINT"  # the /gpu proxy function: the SageMaker endpoint it invokes
DEVICE = "LAYA_DEVICE"  # cpu (default) or cuda: where sessions must run; never a silent move to the other
DEFAULT_TARGETS = {CPU: DEFAULT_CPU_TARGET, CUDA: DEFAULT_CUDA_TARGET}
# Operations (docs/operations.md): reading gate, local server timeouts, strict mode's confidence.
READS_PER_CLIENT = "LAYA_MAX_READS_PER_CLIENT"
HEADER_TIMEOUT = "LAYA_HEADER_TIMEOUT"
KEEP_ALIVE_TIMEOUT = "LAYA_KEEP_ALIVE_TIMEOUT"
JEV_CONFIDENCE = "LAYA_JEV_CONFIDENCE"
JEV_CONFIDENCES = ("laya", "jev")  # strict mode's `confidence`: Laya's entropy concentration, or Jev's formula
# Batch jobs (docs/jobs.md): the engine, the per-job caps, and how shards are sized.
JOBS_STATE_MACHINE = "LAYA_JOBS_STATE_MACHINE"  # Lambda: the Step Functions engine; unset = the local engine
JOBS_WORKERS = "LAYA_JOBS_WORKERS"  # local engine: worker processes (0 = no local jobs)
JOBS_MAX_STATES = "LAYA_JOBS_MAX_STATES"
JOBS_MAX_INPUT_BYTES = "LAYA_JOBS_MAX_INPUT_BYTES"
JOBS_TIME_BUDGET = "LAYA_JOBS_TIME_BUDGET"  # seconds of inference one shard is sized for
JOBS_TOKEN_RATE = "LAYA_JOBS_TOKEN_RATE"  # row tokens per second one worker is assumed to process
BATCH_TIME_BUDGET = "LAYA_BATCH_TIME_BUDGET"  # seconds; a /batch planned past this is refused (413 -> /v1/jobs)
BATCH_TOKEN_RATE = "LAYA_BATCH_TOKEN_RATE"  # row tokens per second this function answers /batch at
# Signed artifacts and pinned versions (docs/artifacts.md#signatures, docs/deploy.md#safe-rollout).
ARTIFACT_KEYS = "LAYA_ARTIFACT_KEYS"  # comma list: KMS key ARNs or PEM public-key files; set = signatures required
ARTIFACT_PINS = "LAYA_ARTIFACT_PINS"  # comma list of CHECKPOINT/TARGET=ARTIFACT_ID served instead of the pointer


def _bool(environ: Mapping[str, str], name: str, default: bool) -> bool:
    value = environ.get(name)
    if value is None or not value.strip():
        return default
    return value.strip().lower() in ("1", "true", "yes", "on")


def _positive_int(environ: Mapping[str, str], name: str, default: int) -> int:
    """Upstream's lenient rule for these: anything that is not a positive integer means the default."""
    try:
        value = int(environ.get(name, "").strip())
    except ValueError:
        return default
    return value if value > 0 else default


def _seconds(environ: Mapping[str, str], name: str, default: float) -> float:
    """A positive, finite number of seconds; anything else is refused with the variable's name."""
    text = environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (0 < value < math.inf):
        raise SettingsError("invalid %s %r: must be a positive number of seconds" % (name, text))
    return value


def _choice(environ: Mapping[str, str], name: str, choices: tuple[str, ...]) -> str:
    text = environ.get(name, "").strip().lower() or choices[0]
    if text not in choices:
        raise SettingsError("invalid %s %r: must be one of %s" % (name, environ.get(name), ", ".join(choices)))
    return text
def _positive_float(environ: Mapping[str, str], name: str, default: float) -> float:
    try:
        value = float(environ.get(name, "").strip())
    except ValueError:
        return default
    return value if math.isfinite(value) and value > 0 else default


def _jobs_workers(env: Mapping[str, str]) -> int:
    text = env.get(JOBS_WORKERS, "").strip()
    if not text:
        return 1
    if not (text.isdigit() and int(text) <= 64):
        raise SettingsError("invalid %s %r: must be an integer 0-64" % (JOBS_WORKERS, text))
    return int(text)


def _artifact_keys(environ: Mapping[str, str]) -> tuple[str, ...]:
    return tuple(filter(None, (part.strip() for part in environ.get(ARTIFACT_KEYS, "").split(","))))


def _artifact_pins(environ: Mapping[str, str]) -> dict[str, str]:
    """CHECKPOINT/TARGET=ID pairs (a hub checkpoint keeps its owner/ prefix: the target is after the last /)."""
    pins: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in environ.get(ARTIFACT_PINS, "").split(","))):
        pair, _, artifact_id = part.partition("=")
        checkpoint, _, target = pair.strip().rpartition("/")
        if not (checkpoint and target and re.fullmatch(r"[0-9a-f]{64}", artifact_id.strip())):
            raise SettingsError("invalid %s entry %r: each is CHECKPOINT/TARGET=ARTIFACT_ID (a sha256)"
                                % (ARTIFACT_PINS, part))
        pins[pair.strip()] = artifact_id.strip()
    return pins


def _deployed(text: str) -> dict[str, str]:
    deployed: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, stored = part.partition("=")
        if not name.strip():
            raise SettingsError("invalid %s %r: each entry is NAME or NAME=STORED_CHECKPOINT" % (DEPLOYED, text))
        deployed[name.strip().lower()] = (stored or name).strip()
    return deployed


def _device_and_target(environ: Mapping[str, str]) -> tuple[str, str]:
    """`LAYA_DEVICE` strictly (a typo must not put a GPU deployment on the CPU), and a target that runs there."""
    text = environ.get(DEVICE, "").strip()
    device = text.lower() or CPU
    if device not in DEVICES:
        raise SettingsError("invalid %s %r: must be one of %s" % (DEVICE, text, ", ".join(DEVICES)))
    target = environ.get(TARGET, "").strip() or DEFAULT_TARGETS[device]
    if device_of_target(target) != device:
        raise SettingsError("%s=%s cannot serve %s=%s: that target was gated on %s; set %s=%s or a %s-* target"
                            % (DEVICE, device, TARGET, target, device_of_target(target), DEVICE,
                               device_of_target(target), device))
    return device, target


@dataclass(frozen=True)
class Settings:
    api_key: str | None = None
    root_path: str = ""
    max_concurrent: int = 16
    body_read_timeout: float = 10.0
    max_token_budget: int = DEFAULT_MAX_TOKEN_BUDGET
    max_batch_tokens: int = DEFAULT_MAX_BATCH_TOKENS
    jev_strict: bool = False
    auto_task: bool = False
    default_model: str = "english"  # the default deployment's one checkpoint, as from_environ({}) resolves it
    threads: int | None = None
    tournament_group: int = 0  # off; 2-100 narrows choices with more options than this by elimination
    idle_unload_seconds: float = 0.0  # off; a long-running server unloads its checkpoints after this idle time
    host: str | None = None  # the local server binds 127.0.0.1 unless told otherwise
    port: int = 8000
    store: str = ".laya-store"
    deployed: dict[str, str] = field(default_factory=lambda: {"english": "demo"})
    target: str = DEFAULT_CPU_TARGET
    cache_dir: str | None = None
    graph_in_memory: bool = False
    api_base_path: str = "/"
    api_key_secret: str | None = None
    max_reads_per_client: int = 4
    header_timeout: float = 10.0  # local server: a connection must deliver its request headers within this
    keep_alive_timeout: float = 5.0  # local server: an idle keep-alive connection is closed after this
    jev_confidence: str = "laya"
    device: str = CPU
    jobs_state_machine: str | None = None
    jobs_workers: int = 1
    jobs_max_states: int = 100_000
    jobs_max_input_bytes: int = 64 * 1024 * 1024
    jobs_time_budget: float = 10.0
    jobs_token_rate: int = 500
    batch_time_budget: float = 0.0  # off: upstream-compatible /batch everywhere but where the stack turns it on
    batch_token_rate: int = 500
    artifact_keys: tuple[str, ...] = ()  # none: signatures are not checked
    artifact_pins: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        timeout_text = env.get(BODY_READ_TIMEOUT, "").strip()
        try:
            timeout = float(timeout_text) if timeout_text else 10.0
        except ValueError:
            timeout = 10.0
        if not (0 < timeout < math.inf):
            timeout = 10.0
        port_text = env.get(PORT, "").strip()
        if port_text:
            try:
                port = int(port_text)
            except ValueError:
                port = 0
            if not 1 <= port <= 65535:
                raise SettingsError("invalid %s %r: must be an integer 1-65535" % (PORT, port_text))
        else:
            port = 8000
        threads = _positive_int(env, THREADS, 0) or None
        group = _positive_int(env, TOURNAMENT_GROUP, 0)
        try:
            idle = float(env.get(IDLE_UNLOAD_SECONDS, "").strip() or 0.0)
        except ValueError:
            idle = 0.0
        idle = idle if math.isfinite(idle) and idle > 0 else 0.0
        deployed = _deployed(env.get(DEPLOYED, "")) or {"english": "demo"}
        device, target = _device_and_target(env)
        default_model = (env.get(DEFAULT_MODEL) or "").strip().lower() or (
            "multilingual" if "multilingual" in deployed else next(iter(deployed)))
        return cls(
            api_key=env.get(API_KEY) or None,
            root_path=env.get(ROOT_PATH, ""),
            max_concurrent=_positive_int(env, MAX_CONCURRENT, 16),
            body_read_timeout=timeout,
            max_token_budget=_positive_int(env, MAX_TOKEN_BUDGET, DEFAULT_MAX_TOKEN_BUDGET),
            max_batch_tokens=_positive_int(env, MAX_BATCH_TOKENS, DEFAULT_MAX_BATCH_TOKENS),
            jev_strict=_bool(env, JEV_STRICT, False),
            auto_task=_bool(env, AUTO_TASK, False),
            default_model=default_model,
            threads=threads,
            tournament_group=group if 2 <= group <= MAX_CHOICE_OPTIONS else 0,
            idle_unload_seconds=idle,
            host=env.get(HOST, "").strip() or None,
            port=port,
            store=env.get(STORE, "").strip() or ".laya-store",
            deployed=deployed,
            target=target,
            cache_dir=env.get(CACHE_DIR, "").strip() or None,
            graph_in_memory=_bool(env, GRAPH_IN_MEMORY, False),
            api_base_path=env.get(API_BASE_PATH, "").strip() or "/",
            api_key_secret=env.get(API_KEY_SECRET, "").strip() or None,
            max_reads_per_client=_positive_int(env, READS_PER_CLIENT, 4),
            header_timeout=_seconds(env, HEADER_TIMEOUT, 10.0),
            keep_alive_timeout=_seconds(env, KEEP_ALIVE_TIMEOUT, 5.0),
            jev_confidence=_choice(env, JEV_CONFIDENCE, JEV_CONFIDENCES),
            device=device,
            jobs_state_machine=env.get(JOBS_STATE_MACHINE, "").strip() or None,
            jobs_workers=_jobs_workers(env),
            jobs_max_states=_positive_int(env, JOBS_MAX_STATES, 100_000),
            jobs_max_input_bytes=_positive_int(env, JOBS_MAX_INPUT_BYTES, 64 * 1024 * 1024),
            jobs_time_budget=_positive_float(env, JOBS_TIME_BUDGET, 10.0),
            jobs_token_rate=_positive_int(env, JOBS_TOKEN_RATE, 500),
            batch_time_budget=_positive_float(env, BATCH_TIME_BUDGET, 0.0),
            batch_token_rate=_positive_int(env, BATCH_TOKEN_RATE, 500),
            artifact_keys=_artifact_keys(env),
            artifact_pins=_artifact_pins(env),
        )

