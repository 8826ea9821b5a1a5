"""A job's state: one JSON document per job (`jobs/<id>/job.json`), only ever moved by compare-and-swap.

Recording a shard is idempotent: the document keeps the set of finished shards, so a replayed or
duplicated shard changes nothing. Status: queued -> running -> succeeded | partial | failed.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from ..artifact.store import ObjectStore
from ..errors import JobError, NotFound
from .store_keys import is_job_id, job_key

QUEUED, RUNNING, SUCCEEDED, PARTIAL, FAILED = "queued", "running", "succeeded", "partial", "failed"
TERMINAL = (SUCCEEDED, PARTIAL, FAILED)
PUBLIC_FIELDS = ("id", "status", "states", "done", "failed", "shards_total", "shards_done", "created_at",
                 "updated_at", "output")
_SWAP_TRIES = 200

Doc = dict[str, Any]


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def encode(document: Any) -> bytes:
    """The one JSON spelling of everything a job stores. NaN and the infinities are kept as sent: the decision
    routes (and upstream's server) accept them in a state, so a job does too, and stores them the same way."""
    return json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def new_job(job_id: str, states: int, shards: int) -> Doc:
    stamp = now()
    return {"id": job_id, "status": QUEUED, "states": states, "done": 0, "failed": 0, "shards_total": shards,
            "shards_done": 0, "created_at": stamp, "updated_at": stamp, "output": None, "finished": []}


_COUNTS = ("states", "done", "failed", "shards_total", "shards_done")


def _whole(doc: Any, job_id: str) -> bool:
    """Whether a parsed document has every field this module reads, of the type it reads."""
    return (isinstance(doc, dict) and doc.get("id") == job_id and doc.get("status") in (QUEUED, RUNNING, *TERMINAL)
            and all(isinstance(doc.get(k), int) and not isinstance(doc.get(k), bool) for k in _COUNTS)
            and all(isinstance(doc.get(k), str) for k in ("created_at", "updated_at"))
            and isinstance(doc.get("finished"), list) and all(isinstance(n, int) for n in doc["finished"])
            and (doc.get("output") is None or isinstance(doc["output"], str)))


def read_job(store: ObjectStore, job_id: str) -> tuple[Doc, str]:
    """The job's document and its version; NotFound for an id this store never saw, JobError for a document
    that does not parse or lacks what a job document holds (edited, truncated, written by something else)."""
    found = store.read(job_key(job_id)) if is_job_id(job_id) else None
    if found is None:
        raise NotFound("no job %r" % job_id)
    try:
        doc = json.loads(found[0])
    except ValueError as exc:
        raise JobError("the document of job %r is corrupt" % job_id) from exc
    if not _whole(doc, job_id):
        raise JobError("the document of job %r is incomplete or corrupt" % job_id)
    return doc, found[1]


def damaged(job_id: str, why: JobError) -> Doc:
    """What GET /v1/jobs/{id} answers for a job whose stored parts cannot be read: failed, saying why."""
    return {"id": job_id, "status": FAILED, "states": 0, "done": 0, "failed": 0, "shards_total": 0,
            "shards_done": 0, "created_at": None, "updated_at": None, "output": None,
            "detail": "%s; it cannot be run or read" % why}


def update_job(store: ObjectStore, job_id: str, change: Callable[[Doc], Doc | None]) -> Doc:
    """Apply `change` (None: nothing to do) by compare-and-swap, retrying with jitter when another writer won."""
    for attempt in range(_SWAP_TRIES):
        doc, version = read_job(store, job_id)
        changed = change(json.loads(json.dumps(doc)))
        if changed is None:
            return doc
        changed["updated_at"] = now()
        if store.swap(job_key(job_id), encode(changed), version):
            return changed
        time.sleep(random.uniform(0, min(0.5, 0.01 * 2 ** min(attempt, 6))))
    raise JobError("the document of job %r kept moving under %d writers' tries" % (job_id, _SWAP_TRIES))


def record_shard(store: ObjectStore, job_id: str, shard: int, answered: int, failed: int) -> Doc:
    """Count shard `shard` once: `answered` states with a result and `failed` with an error line."""

    def add(doc: Doc) -> Doc | None:
        if shard in doc["finished"] or doc["status"] in TERMINAL:
            return None
        doc["finished"] = sorted([*doc["finished"], shard])
        doc["shards_done"] = len(doc["finished"])
        doc["done"] += answered
        doc["failed"] += failed
        doc["status"] = RUNNING
        return doc

    return update_job(store, job_id, add)


def fail_job(store: ObjectStore, job_id: str, detail: str) -> Doc:
    """End a job `failed`, saying why (nothing when it has ended already)."""
    return update_job(store, job_id, lambda doc: None if doc["status"] in TERMINAL
                      else dict(doc, status=FAILED, detail=detail))


def expired(job_id: str, why: Exception) -> str:
    """What a job whose spec or shards are gone says: the retention rule (docs/jobs.md#retention)."""
    return ("%s: the job's stored parts expired (jobs_retention_days) or were removed while it ran; it cannot finish"
            % why)


def mark_running(store: ObjectStore, job_id: str) -> Doc:
    return update_job(store, job_id, lambda doc: dict(doc, status=RUNNING) if doc["status"] == QUEUED else None)


def end_status(doc: Doc) -> str:
    if doc["failed"] == 0:
        return SUCCEEDED
    return FAILED if doc["done"] == 0 else PARTIAL


def public(doc: Doc) -> Doc:
    """What GET /v1/jobs/{id} answers: the contract's fields, plus `detail` when the job says why it failed."""
    view = {name: doc[name] for name in PUBLIC_FIELDS}
    if doc.get("detail"):
        view["detail"] = doc["detail"]
    return view
