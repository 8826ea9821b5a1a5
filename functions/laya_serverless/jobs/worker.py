"""The worker: answers shards with the deployment, exactly as `/v1/systemone/batch` answers its states.

A shard's results are written create-only, so answering a shard twice (a replay, a duplicate
delivery, two engines) writes once; the job's document counts each shard once. A caller's mistake
(a 4xx the batch route would answer) becomes error lines at once; a failure of ours is raised as
`ShardFailed` for the engine to retry, and `give_up` turns a shard that failed every time into
error lines, so a poison shard ends the job `partial`, never stuck.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..artifact.store import ObjectStore
from ..errors import InferenceFailed, JobError, NotFound, ShardFailed
from ..protocol.decisions import BatchControls, answer_batch, pass_size, shaped
from ..protocol.deployment import Deployment
from ..protocol.refusals import refusal_from
from ..protocol.routing import Detector, Registry
from ..settings import Limits, ProtocolSettings
from .results import (
    Spec,
    answer_lines,
    count_lines,
    error_lines,
    read_result,
    read_spec,
    shard_range,
    write_errors,
)
from .state import TERMINAL, expired, fail_job, read_job, record_shard
from .store_keys import result_key, shard_key

_log = logging.getLogger("laya_serverless")
ANSWERED, REPLAYED, REFUSED = "answered", "replayed", "refused"


@dataclass
class Outcome:
    """What one `answer` call did, shard by shard (what a Step Functions task returns)."""

    job: str
    answered: list[int] = field(default_factory=list)
    replayed: list[int] = field(default_factory=list)
    refused: list[int] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"job": self.job, "answered": self.answered, "replayed": self.replayed, "refused": self.refused}


class Worker:
    def __init__(self, store: ObjectStore, deployment: Deployment | None, protocol: ProtocolSettings,
                 request_limits: Limits, registry: Registry, detect: Detector, unavailable: str | None = None) -> None:
        self.store, self.deployment = store, deployment
        self.protocol, self.request_limits = protocol, request_limits
        self.registry, self.detect, self.unavailable = registry, detect, unavailable
        self._specs: dict[str, Spec] = {}

    def spec(self, job_id: str) -> Spec:
        if job_id not in self._specs:
            self._specs = {job_id: read_spec(self.store, job_id)}  # one job at a time: keep only the latest
        return self._specs[job_id]

    def answer(self, job_id: str, shards: Sequence[int]) -> Outcome:
        """Answer each shard that has no results yet; raise `ShardFailed` naming those that failed, after trying all."""
        outcome, failures = Outcome(job_id), []
        for shard in shards:
            try:
                getattr(outcome, self.answer_shard(job_id, shard)).append(shard)
            except ShardFailed as exc:
                failures.append("shard %d: %s" % (shard, exc))
        if failures:
            raise ShardFailed("; ".join(failures))
        return outcome

    def answer_shard(self, job_id: str, shard: int) -> str:
        """Answer one shard unless the job already counted it. Decided from the job's document, not by probing
        for the results object: a reader without s3:ListBucket gets 403, not 404, for a missing key. A job whose
        spec or shard expired ends `failed` saying so; a job whose document is gone is not worked on (NotFound)."""
        doc, _ = read_job(self.store, job_id)
        if shard in doc["finished"] or doc["status"] in TERMINAL:
            return REPLAYED
        try:
            spec = self.spec(job_id)
            found = self.store.read(shard_key(job_id, shard))
            if found is None:
                raise JobError("job %r has no shard %d" % (job_id, shard))
        except JobError as exc:
            fail_job(self.store, job_id, expired(job_id, exc))
            return REPLAYED
        states = json.loads(found[0])["states"]
        try:
            data, kind = answer_lines(shard_range(spec, shard).start, self._answer(spec, states)), ANSWERED
        except ShardFailed:
            raise
        except Exception as exc:
            refusal = refusal_from(exc, BatchControls.from_spec(spec["controls"]).controls.model)
            if isinstance(refusal, InferenceFailed):
                raise ShardFailed(refusal.detail) from exc
            data, kind = error_lines(shard_range(spec, shard), refusal.detail), REFUSED
        read_job(self.store, job_id)  # still there: results are never written for a job whose document is gone
        if not self.store.create(result_key(job_id, shard), data):
            # Written before: a duplicate delivery won the race, or a writer died before counting. Its lines stand.
            data, kind = read_result(self.store, job_id, shard) or data, REPLAYED
        record_shard(self.store, job_id, shard, *count_lines(data))
        return kind

    def _answer(self, spec: Spec, states: list[Any]) -> list[dict[str, Any]]:
        if self.deployment is None:
            raise ShardFailed(self.unavailable or "the model artifacts are not available")
        questions, typed = spec["questions"], BatchControls.from_spec(spec["controls"])
        size = pass_size(typed.batch_size, len(states), len(questions), typed.controls.max_len, self.request_limits)
        batch = BatchControls(typed.controls, size, typed.sort_by_length)
        results = answer_batch(self.deployment, self.detect, self.protocol, {"states": states, "questions": questions},
                               batch)
        return [shaped(r, self.protocol.jev_strict, self.protocol.jev_confidence) for r in results]

    def give_up(self, job_id: str, shards: Sequence[int], detail: str) -> list[int]:
        return give_up(self.store, job_id, shards, detail)


def give_up(store: ObjectStore, job_id: str, shards: Sequence[int], detail: str) -> list[int]:
    """Error lines for each of `shards` still without results (its retries are spent); returns those written.
    Needs no model, so it runs even where the artifacts could not be loaded. Nothing is written for a job whose
    document is gone; a job whose spec is gone ends `failed` saying so."""
    try:
        doc, _ = read_job(store, job_id)
    except NotFound:
        _log.warning("job %s: its document is gone (expired or removed); its work stops", job_id)
        return []
    if doc["status"] in TERMINAL:
        return []
    try:
        spec, written = read_spec(store, job_id), []
    except JobError as exc:
        fail_job(store, job_id, expired(job_id, exc))
        return []
    for shard in shards:
        if write_errors(store, job_id, spec, shard, detail):
            written.append(shard)
            _log.warning("job %s: shard %d given up: %s", job_id, shard, detail)
        record_shard(store, job_id, shard, *count_lines(read_result(store, job_id, shard) or b""))
    return written
