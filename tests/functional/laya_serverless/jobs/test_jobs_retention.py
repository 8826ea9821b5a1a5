"""Retention never strands a job (issue 56): a running job whose spec or shards expire ends `failed` saying why,
and no work is done, nor any result written, for a job whose document is gone."""

from __future__ import annotations

from pathlib import Path

import pytest

from laya_serverless.artifact.store import LocalStore
from laya_serverless.errors import NotFound
from laya_serverless.jobs.merge import finish
from laya_serverless.jobs.state import RUNNING, mark_running, read_job
from laya_serverless.jobs.store_keys import job_key, result_key, shard_key, spec_key
from laya_serverless.jobs.worker import give_up
from laya_serverless.protocol.routing import Registry
from tests.functional.laya_serverless.jobs.jobs_support import QUESTIONS, job_service, make_worker, states


class Idle:
    def start(self, job_id: str) -> None: ...

    def open(self) -> None: ...

    def close(self) -> None: ...


def _running(tmp_path: Path) -> tuple[LocalStore, str]:
    store = LocalStore(tmp_path / "store")
    accepted = job_service(store, Idle()).submit({"states": states(3), "questions": QUESTIONS, "lang": "en"},
                                                 Registry(), ["english"])
    mark_running(store, accepted["id"])
    return store, accepted["id"]


def _expire(store: LocalStore, key: str) -> None:
    (store.root / key).unlink()


def test_a_running_job_whose_spec_expired_ends_failed_saying_why(tmp_path: Path) -> None:
    store, job_id = _running(tmp_path)
    _expire(store, spec_key(job_id))
    assert make_worker(store.root).answer_shard(job_id, 0) == "replayed"   # nothing answered, nothing written
    doc, _ = read_job(store, job_id)
    assert doc["status"] == "failed" and "has no spec" in doc["detail"] and "jobs_retention_days" in doc["detail"]
    assert store.read(result_key(job_id, 0)) is None


@pytest.mark.parametrize("ending", ["finish", "give_up"])
def test_merging_or_giving_up_without_a_spec_fails_the_job_instead_of_raising(tmp_path: Path, ending: str) -> None:
    """Both used to raise "has no spec" and leave the job `running` for good."""
    store, job_id = _running(tmp_path)
    _expire(store, spec_key(job_id))
    if ending == "finish":
        assert finish(store, job_id)["status"] == "failed"
    else:
        assert give_up(store, job_id, [0], "retries spent") == []
    assert read_job(store, job_id)[0]["status"] == "failed"


def test_a_running_job_whose_shard_expired_ends_failed(tmp_path: Path) -> None:
    store, job_id = _running(tmp_path)
    _expire(store, shard_key(job_id, 0))
    make_worker(store.root).answer_shard(job_id, 0)
    doc, _ = read_job(store, job_id)
    assert doc["status"] == "failed" and "has no shard 0" in doc["detail"]


def test_no_work_and_no_result_for_a_job_whose_document_is_gone(tmp_path: Path) -> None:
    store, job_id = _running(tmp_path)
    assert read_job(store, job_id)[0]["status"] == RUNNING
    _expire(store, job_key(job_id))
    with pytest.raises(NotFound):
        make_worker(store.root).answer_shard(job_id, 0)
    assert give_up(store, job_id, [0, 1], "retries spent") == []   # used to re-create result files
    assert store.list("jobs/%s/results/" % job_id) == [] and store.read(result_key(job_id, 0)) is None
