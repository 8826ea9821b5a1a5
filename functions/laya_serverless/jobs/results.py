"""A job's results: one JSONL object per shard, written once, read back in input order.

Each line is `{"index": i, "result": <the element /v1/systemone/batch returns for state i>}` or
`{"index": i, "error": {"detail": "..."}}`. Writes are create-only: the first writer of a shard's
results wins and every later one (a replay, a duplicate delivery, a sweep) is a no-op.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ..artifact.store import ObjectStore
from ..errors import JobError
from .state import encode
from .store_keys import result_key, spec_key

Spec = dict[str, Any]


def read_spec(store: ObjectStore, job_id: str) -> Spec:
    """The job's spec; JobError when it is missing, does not parse, or its shard bounds are not bounds."""
    found = store.read(spec_key(job_id))
    if found is None:
        raise JobError("job %r has no spec" % job_id)
    try:
        spec = json.loads(found[0])
    except ValueError as exc:
        raise JobError("the spec of job %r is corrupt" % job_id) from exc
    bounds = spec.get("bounds") if isinstance(spec, dict) else None
    if not (isinstance(spec, dict) and isinstance(spec.get("questions"), dict)
            and isinstance(spec.get("controls"), dict) and isinstance(bounds, list) and len(bounds) >= 2
            and bounds[0] == 0
            and all(isinstance(b, int) and not isinstance(b, bool) for b in bounds)
            and all(a < b for a, b in zip(bounds, bounds[1:], strict=False))):
        raise JobError("the spec of job %r is incomplete or corrupt" % job_id)
    return spec


def shard_range(spec: Spec, shard: int) -> range:
    bounds = spec["bounds"]
    if not 0 <= shard < len(bounds) - 1:
        raise JobError("job has no shard %d (it has %d)" % (shard, len(bounds) - 1))
    return range(bounds[shard], bounds[shard + 1])


def answer_lines(start: int, results: Sequence[dict[str, Any]]) -> bytes:
    return b"".join(encode({"index": start + k, "result": r}) + b"\n" for k, r in enumerate(results))


def error_lines(indices: range, detail: str) -> bytes:
    return b"".join(encode({"index": i, "error": {"detail": detail}}) + b"\n" for i in indices)


def write_errors(store: ObjectStore, job_id: str, spec: Spec, shard: int, detail: str) -> bool:
    """Error lines for every state of `shard`, unless its results already exist; True when these were written."""
    return store.create(result_key(job_id, shard), error_lines(shard_range(spec, shard), detail))


def read_result(store: ObjectStore, job_id: str, shard: int) -> bytes | None:
    found = store.read(result_key(job_id, shard))
    return None if found is None else found[0]


def count_lines(data: bytes) -> tuple[int, int]:
    """(answered, failed) lines of one shard's results."""
    lines = [json.loads(line) for line in data.splitlines()]
    failed = sum(1 for line in lines if "error" in line)
    return len(lines) - failed, failed


MISSING_RESULTS = "this shard's results are missing from the store"
DAMAGED_RESULTS = "this shard's results in the store are damaged"


def _indices(data: bytes) -> list[Any] | None:
    try:
        return [json.loads(line)["index"] for line in data.splitlines()]
    except (ValueError, TypeError, KeyError):
        return None


def iter_results(store: ObjectStore, job_id: str, spec: Spec) -> Iterator[bytes]:
    """Every shard's lines in input order; each shard is checked to hold exactly its indices, once. A shard
    whose results are missing or damaged (removed or edited in the store) reads as error lines for its
    indices: a stream already started must end whole, one line an index, never cut."""
    for shard in range(len(spec["bounds"]) - 1):
        data = read_result(store, job_id, shard)
        if data is None or _indices(data) != list(shard_range(spec, shard)):
            yield error_lines(shard_range(spec, shard), MISSING_RESULTS if data is None else DAMAGED_RESULTS)
            continue
        yield data


def write_output(store: ObjectStore, job_id: str, spec: Spec, key: str) -> None:
    """The merged results as one object at `key`, streamed through a temporary file (Lambda: /tmp)."""
    with tempfile.TemporaryDirectory(prefix="laya-job-") as folder:
        path = Path(folder) / "output.jsonl"
        with open(path, "wb") as handle:
            for chunk in iter_results(store, job_id, spec):
                handle.write(chunk)
        store.upload(key, path)
