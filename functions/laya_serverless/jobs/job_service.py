"""Jobs as the routes and the direct invocation see them: submit (check, split, store, start), status, results.

The engine is injected: the local one (a worker pool on this machine) or Step Functions. Submitting
writes, in order, the spec (with the states' digest: one id names one body), the shards, the item manifest
and then the job document, each create-only, so a job that can be read always has all its parts, a
replayed submission of the same job (an async invocation retried by Lambda) writes nothing new and starts
the same engine run, and another body under that id is a 409 before it writes anything.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from ..artifact.store import ObjectStore
from ..errors import Conflict, InvalidRequest, JobError, LayaError, MalformedRequest, NotReady
from ..protocol import strict
from ..protocol.plan import estimated_tokens, shard_bounds
from ..protocol.routing import Registry
from ..settings import JobSettings, Limits, ProtocolSettings
from .merge import fail
from .results import iter_results, read_spec
from .spec import job_request
from .state import FAILED, TERMINAL, Doc, damaged, encode, new_job, public, read_job
from .store_keys import (
    OUTPUT_PREFIX,
    default_output_key,
    default_output_owner,
    idempotency_key_of,
    job_key,
    manifest_key,
    new_job_id,
    output_claim_key,
    shard_key,
    spec_key,
)

_WRITERS = 16  # parallel shard writes: S3 PUTs are ~20-50 ms each


def claim_output(store: ObjectStore, job_id: str, output: str) -> None:
    """Make `output` this job's alone, before anything of the job is written: it must not be another job's
    default output, exist (as an object, a folder of them, or under one), or be claimed by another job.
    A replayed submission of the same job finds its own claim and goes on."""
    owner = default_output_owner(output)
    if owner is not None and owner != job_id and store.read(job_key(owner)) is not None:
        raise InvalidRequest("output %r is job %r's own output; name another key" % (output, owner),
                             location=("output",))
    claim = store.read(output_claim_key(output))
    if claim is not None:
        if claim[0] == job_id.encode("utf-8"):
            return
        raise Conflict("output %r is already the output of another job; name another key" % output)
    parents = ["/".join(output.split("/")[:n]) for n in range(len(OUTPUT_PREFIX.split("/")), output.count("/") + 1)]
    if any(store.read(key) is not None for key in [output, *parents]) or store.list(output + "/"):
        raise InvalidRequest("output %r already exists in the store (or a file is in its way); outputs are "
                             "never overwritten, name a new key" % output, location=("output",))
    if not store.create(output_claim_key(output), job_id.encode("utf-8")):
        raise Conflict("output %r was just claimed by another job; name another key" % output)


IDEMPOTENCY_WINDOW_S = 24 * 3600  # what job APIs promise (Stripe, AWS): the same key within 24 h is the same job
_IDEMPOTENCY_KEY = re.compile(r"[\x21-\x7e]{1,255}")  # printable ASCII, no spaces


def check_idempotency_key(key: str) -> None:
    if not _IDEMPOTENCY_KEY.fullmatch(key):
        raise MalformedRequest("the Idempotency-Key header must be 1 to 255 printable ASCII characters, no spaces",
                               location=("header", "idempotency-key"))


def claim_idempotency(store: ObjectStore, key: str, body_sha256: str, job_id: str) -> str:
    """The job id `key` names: `job_id` when the key is new (or its record older than the window), the earlier
    job's when the same body came with it before; a different body with the same key is a 409."""
    record_key = idempotency_key_of(key)
    fresh = encode({"job": job_id, "body_sha256": body_sha256, "created": time.time()})
    for _ in range(3):
        found = store.read(record_key)
        if found is None:
            if store.create(record_key, fresh):
                return job_id
            continue
        try:
            record = json.loads(found[0])
            earlier, digest, created = str(record["job"]), str(record["body_sha256"]), float(record["created"])
        except (ValueError, KeyError, TypeError):
            earlier, digest, created = "", "", 0.0   # a damaged record is treated as expired
        if time.time() - created > IDEMPOTENCY_WINDOW_S:
            if store.swap(record_key, fresh, found[1]):
                return job_id
            continue
        if digest != body_sha256:
            raise Conflict("this Idempotency-Key was used for another request within 24 h (job %r); use a new "
                           "key for a new job" % earlier)
        return earlier
    raise Conflict("this Idempotency-Key is being used by concurrent requests; try again")


class Engine(Protocol):
    def start(self, job_id: str) -> None:
        """Have every shard of the stored job answered, then the job ended (`merge.finish`)."""

    def open(self) -> None: ...

    def close(self) -> None: ...


class JobService:
    def __init__(self, store: ObjectStore, engine: Engine, jobs: JobSettings, protocol: ProtocolSettings,
                 request_limits: Limits) -> None:
        self.store, self.engine = store, engine
        self.jobs, self.protocol, self.request_limits = jobs, protocol, request_limits

    def submit(self, body: Any, registry: Registry, deployed: Sequence[str], job_id: str | None = None,
               idempotency_key: str | None = None, deciders: Mapping[str, Any] | None = None) -> Doc:
        """Check and store a job, start it; `{"id", "status", "states", "shards"}` (202 on the route). With an
        `idempotency_key` the same body within 24 h answers the same job (nothing is stored twice); with the
        deployment's `deciders`, budgets /batch refuses are refused here too."""
        if idempotency_key is not None:
            check_idempotency_key(idempotency_key)
        body = strict.prepared(body) if self.protocol.jev_strict else body   # as /batch prepares it
        request = job_request(body, self.store, registry, deployed, self.jobs, self.protocol,
                              self.request_limits, deciders)
        job_id = job_id or new_job_id()
        if idempotency_key is not None:  # after validation: a refused body claims no key
            job_id = claim_idempotency(self.store, idempotency_key, hashlib.sha256(encode(body)).hexdigest(), job_id)
        controls = request.batch.controls
        tokens = estimated_tokens(request.states, request.questions, controls.max_len, controls.head_max_len)
        bounds = shard_bounds(tokens, len(request.questions), controls.max_len, self.jobs, self.request_limits)
        # The states' digest is part of the spec, so one id names one body: the spec is the job's identity.
        spec = {"id": job_id, "questions": request.questions, "controls": request.batch.to_spec(), "bounds": bounds,
                "output": request.output or default_output_key(job_id),
                "states_sha256": hashlib.sha256(encode(request.states)).hexdigest()}
        self._check_same_job(job_id, spec)   # before the output claim: another body under this id claims nothing
        if request.output is not None:
            claim_output(self.store, job_id, request.output)
        # The spec is written create-only before the shards: of concurrent submissions under one id, only those
        # whose spec is the stored one write shards or start the engine.
        if not self.store.create(spec_key(job_id), encode(spec)):
            self._check_same_job(job_id, spec)
        shards = len(bounds) - 1
        with ThreadPoolExecutor(max_workers=min(_WRITERS, shards)) as pool:
            list(pool.map(lambda n: self.store.create(shard_key(job_id, n), encode(
                {"job": job_id, "shard": n, "start": bounds[n], "states": request.states[bounds[n]:bounds[n + 1]]})),
                range(shards)))
        self.store.create(manifest_key(job_id), encode([{"shard": n} for n in range(shards)]))
        self.store.create(job_key(job_id), encode(new_job(job_id, len(request.states), shards)))
        doc, _ = read_job(self.store, job_id)
        if doc["status"] not in TERMINAL:
            try:
                self.engine.start(job_id)
            except LayaError as exc:
                fail(self.store, job_id, "the job engine could not start this job: %s" % exc)
                raise NotReady("the job engine could not start this job; try again later") from exc
        return {"id": job_id, "status": doc["status"], "states": doc["states"], "shards": doc["shards_total"]}

    def _check_same_job(self, job_id: str, spec: Doc) -> None:
        """A 409 when `job_id` already names a job with another body (other states, questions, controls or output)."""
        found = self.store.read(spec_key(job_id))
        if found is not None and found[0] != encode(spec):
            raise Conflict("job %r already exists with another request (other states, questions, controls or "
                           "output); name a new id for a new job" % job_id)

    def status(self, job_id: str) -> Doc:
        try:
            return public(read_job(self.store, job_id)[0])
        except JobError as exc:   # reported for this job, never a 500
            return damaged(job_id, exc)

    def results(self, job_id: str) -> Iterator[bytes]:
        """The job's result lines in input order, once it has ended (409 before; 404 for an unknown id)."""
        try:
            doc, _ = read_job(self.store, job_id)
            spec = read_spec(self.store, job_id)
        except JobError as exc:
            raise Conflict("job %r has no results to read: %s" % (job_id, exc)) from None
        if doc["status"] == FAILED and doc["shards_done"] < doc["shards_total"]:
            raise Conflict("job %r failed without results: %s" % (job_id, doc.get("detail") or "see its status"))
        if doc["status"] not in TERMINAL:
            raise Conflict("job %r is %s (%d of %d shards done); its results are ready once its status is "
                           "succeeded, partial or failed" % (job_id, doc["status"], doc["shards_done"],
                                                              doc["shards_total"]))
        return iter_results(self.store, job_id, spec)

    def open(self) -> None:
        self.engine.open()

    def close(self) -> None:
        self.engine.close()
