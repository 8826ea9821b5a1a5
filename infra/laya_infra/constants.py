"""Names, sizes and defaults of the deployment, in one place."""

from __future__ import annotations

from pathlib import Path

from laya_serverless.artifact import targets

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_ASSET_DIR = REPO_ROOT / "build" / "lambda"          # `laya-artifacts package` writes <arch>/{layer,function}
AUTHORIZER_DIR = REPO_ROOT / "functions" / "gateway_authorizer"

STACK_NAME = "LayaServerless"
PYTHON_RUNTIME = "python3.12"                              # the layer is built and smoke-tested for 3.12
# The runtime of the functions that run the package, per architecture: the arm64 package is built for 3.13, the
# aarch64 CPython its probe runs under emulation (laya_artifacts.package.lambda_package.PYTHON_VERSIONS; docs/deploy.md,
# "arm64").
# The stdlib-only functions (authorizer, GPU proxy) keep PYTHON_RUNTIME.
PACKAGE_RUNTIMES = {"x86_64": PYTHON_RUNTIME, "arm64": "python3.13"}
HANDLER = "laya_serverless.lambda_edge.api_handler.handler"
AUTHORIZER_HANDLER = "authorizer.handler"

ARCHITECTURES = ("x86_64", "arm64")
DEFAULT_ARCH = "x86_64"
DEFAULT_MEMORY_MB = 2048
# A function's memory (laya_infra.sizing, docs/deploy.md#memory): the sum of its checkpoints' INIT peaks + headroom.
# One checkpoint's peak when none is recorded: 2.68 MB per MiB of graph (as loaded) + 100 MB, from the INIT peaks
# measured 2026-12-06 in a memory cgroup (2-core AMD EPYC, avx2 avx512_vnni): mmBERT-base shape 3,390 MB for a
# 1,228 MiB graph, the worst ratio seen; ModernBERT-large 3.5 GB for 1,607 MiB; the tiny checkpoint 80-87 MB.
INIT_MB_PER_GRAPH_MB, INIT_RUNTIME_MB = 2.68, 100
INIT_HEADROOM = 0.10                                       # over the summed peaks: run-to-run spread (OOM at +4%)
MIN_MEMORY_MB, MAX_MEMORY_MB = 512, 10240
DEFAULT_TIMEOUT_S = 29                                     # REST API integrations end at 29 s by default
MAX_TIMEOUT_S = 29
AUTHORIZER_MEMORY_MB = 256
AUTHORIZER_TIMEOUT_S = 5
AUTHORIZER_CACHE_S = 300
VCPU_PER_MB = 1 / 1769                                     # Lambda grants one vCPU per 1,769 MB

DEFAULT_PREFIX = ""
DEFAULT_STAGE = "prod"
DEFAULT_ARTIFACT_PREFIX = "laya-artifacts"
DEFAULT_DEPLOYED = "english=demo"
DEFAULT_TARGET = targets.DEFAULT_CPU_TARGET
LAMBDA_CACHE_DIR = "/tmp/laya-artifacts"                   # the only writable place on Lambda

DEFAULT_THROTTLE_RATE = 50                                 # requests per second, steady
DEFAULT_THROTTLE_BURST = 100
LOG_RETENTION = "ONE_MONTH"                               # a logs.RetentionDays member: 30 days

# Alarm thresholds (context can override the duration ones).
DEFAULT_DURATION_ALARM_MS = 10_000
DEFAULT_INIT_ALARM_MS = 5_000
METRIC_NAMESPACE = "LayaServerless"
METRIC_SERVICE = "laya-serverless"                         # the `service` dimension Powertools gives EMF metrics
API_5XX_RATE_ALARM = 0.01                                  # share of gateway answers, per minute (rollback)
API_4XX_RATE_ALARM = 0.25                                  # share of gateway answers, 3 periods of 5 minutes
INIT_METRIC = "InitDurationMs"

# The gateway invokes this alias of the API function: a published version (SnapStart or provisioned).
ALIAS_NAME = "live"
# Safe rollout (docs/deploy.md#safe-rollout): CodeDeploy shifts the live alias to a new version this way, and
# rolls back on the alarms of degraded serving.
ROLLOUTS = ("canary", "linear", "all-at-once")
DEFAULT_ROLLOUT = "canary"
# How long a new version takes traffic before it is all of it (canary: 10% for 5 minutes; linear: 10% a minute).
ROLLOUT_WINDOW_MINUTES = {"canary": 5, "linear": 10, "all-at-once": 0}
# The rollback alarms fit in the shortest window: 1-minute periods, firing on 2 bad minutes of 3, so they can fire
# within 3 minutes of the first bad answer, and one timeout (one bad minute) never rolls a release back.
ROLLBACK_PERIOD_MINUTES, ROLLBACK_EVALUATION_PERIODS, ROLLBACK_DATAPOINTS = 1, 3, 2
# Artifact signing (docs/artifacts.md#signatures): the stack's KMS key, when it creates one.
SIGNING_KEY_ALIAS = "alias/laya-serverless-artifact-signing"
# Async invocations (an S3 or EventBridge event pointed at a function by mistake): no retry, short age,
# then the failure record goes to the dead-letter queue.
ASYNC_RETRY_ATTEMPTS = 0
ASYNC_MAX_EVENT_AGE_S = 3600
DLQ_RETENTION_DAYS = 14
# Batch jobs (docs/jobs.md): the jobs function, its Step Functions engine and the shard sizing it is told.
JOBS_HANDLER = "laya_serverless.lambda_edge.jobs_handler.handler"
DEFAULT_JOBS_MEMORY_MB = 2048
DEFAULT_JOBS_TIMEOUT_S = 300
MAX_JOBS_TIMEOUT_S = 900                                   # Lambda's own limit
DEFAULT_JOBS_CONCURRENCY = 10                              # Distributed Map child executions at once
JOBS_BUDGET_SHARE = 0.5                                    # of the timeout, one shard is planned to use
JOBS_TASK_RETRIES = 2                                      # Step Functions retries of a worker batch (3 tries)
JOBS_ASYNC_RETRIES = 2                                     # Lambda's retries of a direct async submission
JOBS_EVENT_AGE_S = 6 * 3600                                # an async submission older than this goes to the DLQ
JOBS_DLQ_RETENTION_DAYS = 14
DEFAULT_JOBS_RETENTION_DAYS = 30                           # jobs/ objects (inputs, shards, outputs) expire after
MAX_JOBS_RETENTION_DAYS = 3650
JOBS_NONCURRENT_DAYS = 1                                   # the versioned bucket's expired job versions, after
MULTIPART_ABORT_DAYS = 7                                   # an unfinished multipart upload is aborted after
JOB_ROUTES = (("POST", "v1/jobs"), ("GET", "v1/jobs/{id}"), ("GET", "v1/jobs/{id}/results"))
# The splitter's row tokens a second one vCPU answers: the demo's FP32 graph measured at 512 on this project's
# machine, rounded down (docs/jobs.md); `-c token_rate=` sets a checkpoint's own
# (`laya-artifacts bench jobs` prints it).
TOKEN_RATE_PER_VCPU = 500
SYNC_BUDGET_MARGIN_S = 4                                   # of the API timeout: kept for fetch, decode, answer

# Paths inside the prefix, as the protocol names them.
DECISION_PATHS = ("v1/systemone", "v1/systemone/batch")
MODELS_PATH = "v1/models"                                  # GET, behind the authorizer like the decision routes
HEALTH_PATH = "health"
DOCS_PATHS = ("docs", "redoc", "openapi.json")             # only when auth is off: the app hides them with a key

UNAUTHORIZED_BODY = '{"detail":"invalid or missing bearer token"}'

# The GPU endpoint (-c gpu=true): a SageMaker real-time endpoint serving layers/gpu/Dockerfile.
GPU_DOCKERFILE = "layers/gpu/Dockerfile"                   # built from the repository root at deploy
GPU_IMAGE_CONTEXT = ("*", "!functions/laya_serverless", "!layers/gpu", "**/__pycache__", "**/*.pyc")
GPU_PROXY_DIR = REPO_ROOT / "functions" / "gpu_proxy"
GPU_PROXY_HANDLER = "proxy.handler"
GPU_PATH = "gpu"                                           # the GPU routes: <prefix>/gpu/v1/systemone, ...
GPU_ROUTES = (("POST", "v1/systemone"), ("POST", "v1/systemone/batch"), ("GET", "health"))
GPU_TARGETS = targets.CUDA_TARGETS
DEFAULT_GPU_TARGET = targets.DEFAULT_CUDA_TARGET
DEFAULT_GPU_INSTANCE_TYPE = "ml.g5.xlarge"                 # one NVIDIA A10G (24 GB), 4 vCPUs
GPU_INSTANCE_FAMILIES = ("g4dn", "g5", "g6", "g6e", "p3", "p4d", "p4de", "p5", "p5e")
DEFAULT_GPU_MIN_INSTANCES, DEFAULT_GPU_MAX_INSTANCES = 1, 2
MAX_GPU_INSTANCES = 20
DEFAULT_GPU_INVOCATIONS_PER_INSTANCE = 600                 # target tracking: invocations per instance per minute
# NVIDIA 550 / CUDA 12.4: runs the image's CUDA 12.8 build; pinned, so a driver change is a deploy, not a surprise.
GPU_AMI_VERSION = "al2-ami-sagemaker-inference-gpu-3-1"
GPU_VARIANT = "AllTraffic"
GPU_STARTUP_TIMEOUT_S = 600                                # image pull + artifact download + CUDA session start
GPU_PROXY_MEMORY_MB = 256
GPU_CACHE_DIR = "/tmp/laya-artifacts"

# Lambda Managed Instances (-c compute=managed-instances): the API function on EC2 instances of pinned families.
COMPUTE_LAMBDA, COMPUTE_MANAGED = "lambda", "managed-instances"
COMPUTES = (COMPUTE_LAMBDA, COMPUTE_MANAGED)
# C/M/R families by the int8 kernel class ONNX Runtime picks on their CPUs (laya_serverless.artifact.platform).
INSTANCE_INT8_CLASSES = {
    "c8i": "amx-int8", "m8i": "amx-int8", "r8i": "amx-int8",              # Intel Granite Rapids
    "c7i": "amx-int8", "m7i": "amx-int8", "r7i": "amx-int8",              # Intel Sapphire Rapids
    "c6i": "avx512-vnni", "m6i": "avx512-vnni", "r6i": "avx512-vnni",     # Intel Ice Lake
    "c8a": "avx512-vnni", "m8a": "avx512-vnni", "r8a": "avx512-vnni",     # AMD Zen 5
    "c7a": "avx512-vnni", "m7a": "avx512-vnni", "r7a": "avx512-vnni",     # AMD Zen 4
    "c6a": "avx2", "m6a": "avx2", "r6a": "avx2",                          # AMD Zen 3: no VNNI
    "c8g": "arm64-i8mm", "m8g": "arm64-i8mm", "r8g": "arm64-i8mm",        # Graviton4
    "c7g": "arm64-i8mm", "m7g": "arm64-i8mm", "r7g": "arm64-i8mm",        # Graviton3
    "c6g": "arm64-dotprod", "m6g": "arm64-dotprod", "r6g": "arm64-dotprod",  # Graviton2
}
ARM_INT8_CLASSES = ("arm64-i8mm", "arm64-dotprod")
# The int8 classes the gate covers (docs/artifacts-gate.md): the build's own (AVX-512 VNNI or AMX machines) and AVX2,
# proven under emulation; the recipe computes the same integers on every x86 class. No Arm class is gated here.
GATE_COVERED_INT8_CLASSES = ("amx-int8", "avx512-vnni", "avx2")
DEFAULT_INSTANCE_TYPES = {"x86_64": ("c7i.xlarge", "m7i.xlarge"), "arm64": ("c7g.xlarge", "m7g.xlarge")}
DEMO_CHECKPOINT = "demo"
DEMO_GRAPH_MB = 101                   # the demo's cpu-fp32 graph (100.7 MiB, 2026-12-04): its size without graph_mb
MI_MEMORY_GIB_PER_VCPU = 2.0          # the execution environment's memory per vCPU (Lambda's default and minimum)
MI_MAX_CONCURRENCY = 64               # processes per execution environment we allow (Python: one per request)
MI_MAX_VCPUS = 32                     # the capacity provider's ceiling; Lambda's own default is 400
