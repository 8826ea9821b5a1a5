"""The merger: ends a job. Every shard still without results is given up as error lines (so every
index appears exactly once, as a result or an error), the results are merged in input order into the
job's output, and the status moves to succeeded, partial or failed. Ending twice changes nothing."""

from __future__ import annotations

import logging

from ..artifact.store import ObjectStore
from ..errors import JobError, LayaError
from .results import read_spec, write_output
from .state import TERMINAL, Doc, end_status, expired, fail_job, read_job, update_job
from .store_keys import default_output_key, public_place
from .worker import give_up

_log = logging.getLogger("laya_serverless")
NEVER_ANSWERED = "this shard was never answered (the job engine stopped before it could)"


def finish(store: ObjectStore, job_id: str, reason: str | None = None) -> Doc:
    doc, _ = read_job(store, job_id)
    if doc["status"] in TERMINAL:
        return doc
    try:
        spec = read_spec(store, job_id)
    except JobError as exc:  # retention took the spec: ended, saying why, never `running` for good
        return fail_job(store, job_id, expired(job_id, exc))
    shards = len(spec["bounds"]) - 1
    unfinished = sorted(set(range(shards)) - set(doc["finished"]))
    if unfinished:  # error lines where there are no results; counted either way
        give_up(store, job_id, unfinished, reason or NEVER_ANSWERED)
    key = spec.get("output") or default_output_key(job_id)
    try:
        write_output(store, job_id, spec, key)
    except (OSError, LayaError) as exc:  # ended, saying why: a job that cannot be merged must not run forever
        _log.warning("job %s: its results could not be merged into %s: %s", job_id, key, exc)
        return fail(store, job_id, "its results could not be written to its output %s (%s); the shards' results "
                                   "are kept" % (key, type(exc).__name__))

    def end(current: Doc) -> Doc | None:
        if current["status"] in TERMINAL:
            return None
        return dict(current, status=end_status(current), output=public_place(store, key))

    return update_job(store, job_id, end)


def fail(store: ObjectStore, job_id: str, detail: str) -> Doc:
    """A job that cannot run at all (its engine refused to start it): failed, saying why."""
    return fail_job(store, job_id, detail)
