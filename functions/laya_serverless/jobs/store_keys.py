"""Where a job lives in the store, in one place (runtime, engines and the CDK grants all use these keys).

    jobs/input/...                    what callers upload: JSONL, one state per line
    jobs/output/<id>.jsonl            merged results, in input order (or the `output` a caller named)
    jobs/<id>/job.json                the job's state, moved by compare-and-swap
    jobs/<id>/spec.json               questions, controls and shard bounds; written once
    jobs/<id>/shards/<n>.json         the states of shard n; written once
    jobs/<id>/results/<n>.jsonl       the answers of shard n; create-only, so a replay is a no-op
    jobs/<id>/manifest.json           the Step Functions item list: [{"shard": n}, ...]
    jobs/<id>/map/                    Step Functions' own result manifest (ResultWriter)
"""

from __future__ import annotations

import hashlib
import re
import uuid

from ..artifact.store import ObjectStore
from ..errors import InvalidRequest

JOBS_PREFIX = "jobs/"
INPUT_PREFIX = "jobs/input/"
OUTPUT_PREFIX = "jobs/output/"
CLAIMS_PREFIX = "jobs/claims/"
IDEMPOTENCY_PREFIX = "jobs/idempotency/"
RESERVED_IDS = ("input", "output", "claims", "idempotency")
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,79}")  # also a valid Step Functions execution name
_KEY_SEGMENT = re.compile(r"[A-Za-z0-9._=+@,-]{1,255}")  # a file name on every store (255 bytes, ASCII here)
_MAX_KEY = 1024  # S3's limit on a key, bytes


def new_job_id() -> str:
    return uuid.uuid4().hex


def is_job_id(text: str) -> bool:
    return bool(_ID.fullmatch(text)) and text not in RESERVED_IDS


def job_key(job_id: str) -> str:
    return "jobs/%s/job.json" % job_id


def spec_key(job_id: str) -> str:
    return "jobs/%s/spec.json" % job_id


def shard_key(job_id: str, shard: int) -> str:
    return "jobs/%s/shards/%06d.json" % (job_id, shard)


def result_key(job_id: str, shard: int) -> str:
    return "jobs/%s/results/%06d.jsonl" % (job_id, shard)


def manifest_key(job_id: str) -> str:
    return "jobs/%s/manifest.json" % job_id


def map_results_prefix(job_id: str) -> str:
    return "jobs/%s/map" % job_id


def default_output_key(job_id: str) -> str:
    return "%s%s.jsonl" % (OUTPUT_PREFIX, job_id)


def output_claim_key(output_key: str) -> str:
    """Where the job that named `output_key` as its output is recorded (create-only: one job per output)."""
    return "%s%s.json" % (CLAIMS_PREFIX, hashlib.sha256(output_key.encode("utf-8")).hexdigest())


def idempotency_key_of(key: str) -> str:
    """Where the job an `Idempotency-Key` started is recorded (hashed: the key is the client's text)."""
    return "%s%s.json" % (IDEMPOTENCY_PREFIX, hashlib.sha256(key.encode("utf-8")).hexdigest())


def default_output_owner(output_key: str) -> str | None:
    """The job whose default output `output_key` is, or None."""
    name = output_key[len(OUTPUT_PREFIX):] if output_key.startswith(OUTPUT_PREFIX) else ""
    stem, dot, ext = name.rpartition(".")
    return stem if dot and ext == "jsonl" and is_job_id(stem) else None


def uri_of(store: ObjectStore, key: str) -> str:
    return "%s/%s" % (store.uri.rstrip("/"), key)


def public_place(store: ObjectStore, key: str) -> str:
    """Where `key` is, as a client may be told: its S3 URI (what `aws s3 cp` takes), or for a local store the key
    inside it (the server's own folders are not a client's business; LAYA_STORE names the folder)."""
    return uri_of(store, key) if store.uri.startswith("s3://") else key


def key_in(store: ObjectStore, name: str, where: str, field: str) -> str:
    """The store key that `name` (a key relative to the store, or a URI/path inside it) points at, which must
    lie under `where`; anything else is refused, so a job can only read and write its own prefixes."""
    root = store.uri.rstrip("/") + "/"
    key = name[len(root):] if name.startswith(root) else name
    segments = key.split("/")
    fits = (key.startswith(where) and len(where) < len(key) <= _MAX_KEY
            and all(_KEY_SEGMENT.fullmatch(part) and part not in (".", "..") for part in segments))
    if not fits:
        raise InvalidRequest("%s %r is outside this deployment's job %s prefix %s; put the file under it"
                             % (field, name, where.rstrip("/").rpartition("/")[2], public_place(store, where)),
                             location=(field,))
    return key


def shard_failure(attempts: int, why: str) -> str:
    """What a given-up shard's error lines say, on every engine: the tries spent and our own reason."""
    return "this shard failed %d times: %s" % (attempts, why)
