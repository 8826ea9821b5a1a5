"""The splitter's arithmetic and the job document's compare-and-swap, without a model."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from laya_serverless.artifact.store import LocalStore
from laya_serverless.errors import JobError, NotFound, TooLarge
from laya_serverless.jobs.state import encode, end_status, new_job, read_job, record_shard, update_job
from laya_serverless.jobs.store_keys import is_job_id, job_key, shard_key
from laya_serverless.protocol.plan import MAX_SHARD_STATES, estimated_tokens, head_tokens, shard_bounds
from laya_serverless.settings import JobSettings, Limits, Settings

QUESTIONS = {"team": {"type": "choice", "instructions": "Which team should handle this?",
                      "criteria": {"billing": "payments, invoices", "tech": "bugs"}},
             "churn": {"type": "noul", "instructions": "Will they cancel?"}}


def test_row_tokens_grow_with_the_state_and_stop_at_max_len() -> None:
    short, long = estimated_tokens(["hi", "x" * 4000], QUESTIONS, None, None)
    assert short < long
    assert estimated_tokens(["x" * 4000], QUESTIONS, 64, None) == [128]  # two rows, each capped at max_len
    assert head_tokens(QUESTIONS, 8) == [8, 8]


def test_shards_follow_the_time_budget_and_are_deterministic() -> None:
    jobs = JobSettings(jobs_time_budget=1.0, jobs_token_rate=1000)  # 1,000 row tokens a shard
    tokens = [100] * 95
    bounds = shard_bounds(tokens, 2, None, jobs, Limits())
    assert bounds == [0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 95]
    assert shard_bounds(tokens, 2, None, jobs, Limits()) == bounds
    assert shard_bounds([5000, 10, 10], 2, None, jobs, Limits()) == [0, 1, 3]  # one over-budget state is a shard alone


def test_a_shard_is_whole_passes_of_the_batch_token_plan() -> None:
    # 2 questions x 64-token rows under a 1,024-token pass: 8 states a pass; the time budget allows 10 a shard.
    jobs = JobSettings(jobs_time_budget=1.0, jobs_token_rate=1000)
    bounds = shard_bounds([100] * 40, 2, 64, jobs, Limits(max_batch_tokens=1024))
    assert all((b - a) % 8 == 0 for a, b in zip(bounds, bounds[1:-1], strict=False))
    assert bounds[-1] == 40


def test_shards_never_hold_more_than_the_cap() -> None:
    bounds = shard_bounds([1] * (MAX_SHARD_STATES * 2 + 1), 1, 8, JobSettings(jobs_time_budget=1e6), Limits())
    assert bounds == [0, MAX_SHARD_STATES, 2 * MAX_SHARD_STATES, 2 * MAX_SHARD_STATES + 1]


def test_too_many_shards_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    import laya_serverless.protocol.plan as plan

    monkeypatch.setattr(plan, "MAX_SHARDS", 3)
    with pytest.raises(TooLarge, match="would need 4 shards"):
        shard_bounds([10**6] * 4, 1, None, JobSettings(), Limits())


def test_job_ids_are_safe_key_segments() -> None:
    assert is_job_id("a1b2") and is_job_id("direct-0f3a") and not is_job_id("input")
    assert not any(is_job_id(bad) for bad in ("", "../x", "a/b", "-lead", "x" * 81, "abc\n", "abc\r\n"))
    assert shard_key("abc", 7) == "jobs/abc/shards/000007.json"


def test_recording_is_idempotent_and_exact_under_concurrent_writers(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    store.create(job_key("j1"), encode(new_job("j1", 400, 40)))
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda n: record_shard(store, "j1", n % 40, 9, 1), range(120)))  # each shard three times
    doc, _ = read_job(store, "j1")
    assert (doc["shards_done"], doc["done"], doc["failed"], doc["status"]) == (40, 360, 40, "running")
    assert doc["finished"] == list(range(40)) and end_status(doc) == "partial"


def test_reading_a_missing_or_corrupt_job() -> None:
    store = LocalStore(Path("/nonexistent-laya-store"))
    with pytest.raises(NotFound, match="no job 'nope'"):
        read_job(store, "nope")


def test_a_swap_that_never_lands_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import laya_serverless.jobs.state as state

    store = LocalStore(tmp_path)
    store.create(job_key("j2"), encode(new_job("j2", 1, 1)))
    monkeypatch.setattr(state, "_SWAP_TRIES", 2)
    monkeypatch.setattr(store, "swap", lambda *_args: False)
    with pytest.raises(JobError, match="kept moving"):
        update_job(store, "j2", lambda doc: dict(doc, status="running"))


def test_the_jobs_settings_are_read_once_with_the_rest() -> None:
    from laya_serverless.errors import SettingsError

    parsed = Settings.from_environ({"LAYA_JOBS_WORKERS": "0", "LAYA_JOBS_MAX_STATES": "500", "LAYA_JOBS_TIME_BUDGET":
                                    "37.5", "LAYA_BATCH_TIME_BUDGET": "25", "LAYA_JOBS_TOKEN_RATE": "nope"})
    jobs = parsed.jobs
    assert (jobs.jobs_workers, jobs.jobs_max_states, jobs.jobs_time_budget, parsed.limits.batch_time_budget) == (
        0, 500, 37.5, 25.0)
    assert jobs.jobs_token_rate == 500 and Settings.from_environ({}).limits.batch_time_budget == 0.0
    with pytest.raises(SettingsError, match="invalid LAYA_JOBS_WORKERS 'many'"):
        Settings.from_environ({"LAYA_JOBS_WORKERS": "many"})


def test_the_jobs_public_names_are_pinned() -> None:
    import laya_serverless.jobs as jobs

    assert jobs.__all__ == ["Engine", "JobService", "StepFunctionsEngine", "Worker", "finish"]
    assert all(hasattr(jobs, name) for name in jobs.__all__)


def test_a_job_s_controls_are_typed_once_and_read_back_typed_from_its_spec() -> None:
    """The submission checks the controls; the spec keeps them typed and JSON-safe; a shard reads them back as they
    were resolved (the model's canonical name, the threshold map), with no second pass over the raw fields."""
    import json

    from laya_serverless.protocol.decisions import BatchControls, job_controls
    from laya_serverless.protocol.routing import Registry
    from laya_serverless.settings import Limits, ProtocolSettings

    body = {"questions": {}, "model": "English", "max_len": 128, "head_max_len": 64, "lang": "de",
            "min_confidence": {"choice:3-5": 0.6, "default": 0.5}, "batch_size": 4, "sort_by_length": True}
    typed = job_controls(body, Registry({"english": "english"}), ProtocolSettings(), Limits())
    spec = json.loads(json.dumps(typed.to_spec()))
    assert BatchControls.from_spec(spec) == typed
    assert typed.controls.model == "english" and spec["max_len"] == 128 and "task" not in spec
