"""The deploy gate in steps (laya_serverless.gate.stepwise, through regate): a replay carried over many invocations
reports exactly what one pass reports, never skips or doubles a case, keeps kernels and runtimes apart, and keeps
the graph out of `/tmp`."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from laya_artifacts.deploy.publish import publish
from laya_serverless.artifact.layout import GRAPH_FILE
from laya_serverless.artifact.manifest import Manifest
from laya_serverless.artifact.platform import cpu_profile, gate_record_key, int8_kernels
from laya_serverless.artifact.store import LocalStore
from laya_serverless.gate import regate, stepwise
from laya_serverless.gate.regate import goldens_sidecar, regate_published
from laya_serverless.gate.replay import run_gate
from laya_serverless.gate.stepwise import CHUNK_CASES, Progress, progress_key

CHECKPOINT, TARGET = "tiny-modernbert", "cpu-fp32"
PAST = -1.0  # a deadline already passed: each step replays exactly one chunk


@pytest.fixture
def published(tiny_fp32: Path, tmp_path: Path) -> tuple[LocalStore, str]:
    regate._opened.clear()
    store = LocalStore(tmp_path / "store")
    return store, publish(tiny_fp32, store)


def _steps_until_done(store: LocalStore, cache: Path, limit: int = 1000) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    said = []
    for _ in range(limit):
        summary = regate_published(store, CHECKPOINT, TARGET, cache, deadline=PAST, clock=lambda: 0.0)
        if "pending" not in summary:
            return said, summary
        said.append(summary)
    raise AssertionError("the replay never ended")


def _progress(store: LocalStore, artifact_id: str) -> Progress:
    found = store.read(progress_key(artifact_id, int8_kernels(cpu_profile())))
    assert found is not None
    progress = Progress.parse(found[0])
    assert progress is not None
    return progress


def test_a_replay_in_one_chunk_steps_reports_exactly_what_one_pass_reports(
        published: tuple[LocalStore, str], tiny_fp32: Path, tmp_path: Path) -> None:
    store, artifact_id = published
    goldens = json.loads(goldens_sidecar(tiny_fp32).read_bytes())
    cases = len(goldens["rows"])
    pending, final = _steps_until_done(store, tmp_path / "cache")
    # one chunk a step, a chunk never crossing from one split into the other
    assert len(pending) + 1 >= math.ceil(cases / CHUNK_CASES) and final["steps"] == len(pending) + 1 > 1
    assert [int(p["pending"].split()[0]) for p in pending] == sorted({int(p["pending"].split()[0]) for p in pending})
    one_pass = run_gate(tiny_fp32, goldens, TARGET, threads=regate.gate_threads().intra_op)  # the gate's threads
    progress = _progress(store, artifact_id)
    stepped = stepwise.final_report(progress, goldens, TARGET)
    assert stepped.as_dict() == one_pass.as_dict()  # every figure, every row's error, the same cases run twice
    assert final["passed"] is True and final["rows"] == one_pass.rows
    record = json.loads(store.read(final["recorded"])[0])  # type: ignore[index]
    assert record["report"]["rows"] == one_pass.rows
    assert regate_published(store, CHECKPOINT, TARGET, tmp_path / "cache")["recorded"] == "already"


class _StaleProgress:
    """The store as a step sees it that read the progress before another step saved: writes go to the real one."""

    def __init__(self, store: LocalStore, key: str, stale: tuple[bytes, str]) -> None:
        self._store, self._key, self._stale = store, key, stale

    def read(self, key: str) -> tuple[bytes, str] | None:
        return self._stale if key == self._key else self._store.read(key)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def test_two_steps_that_race_lose_no_case_and_double_none(published: tuple[LocalStore, str], tiny_fp32: Path,
                                                          tmp_path: Path) -> None:
    store, artifact_id = published
    regate_published(store, CHECKPOINT, TARGET, tmp_path / "cache", deadline=PAST, clock=lambda: 0.0)
    key = progress_key(artifact_id, int8_kernels(cpu_profile()))
    before = store.read(key)
    assert before is not None
    stale: Any = _StaleProgress(store, key, before)
    first = regate_published(stale, CHECKPOINT, TARGET, tmp_path / "cache", deadline=PAST, clock=lambda: 0.0)
    second = regate_published(stale, CHECKPOINT, TARGET, tmp_path / "cache", deadline=PAST, clock=lambda: 0.0)
    assert "replayed" in first["pending"] and "saved its progress first" in second["pending"]
    assert _progress(store, artifact_id).done == 2 * CHUNK_CASES  # the winner's step stands; the loser's is not added
    _, final = _steps_until_done(store, tmp_path / "cache")
    goldens = json.loads(goldens_sidecar(tiny_fp32).read_bytes())
    assert final["rows"] == run_gate(tiny_fp32, goldens, TARGET).rows


def test_another_runtime_or_kernel_class_starts_over_and_a_finished_failure_is_answered_not_rerun(
        published: tuple[LocalStore, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store, artifact_id = published
    regate_published(store, CHECKPOINT, TARGET, tmp_path / "cache", deadline=PAST, clock=lambda: 0.0)
    monkeypatch.setattr(regate, "runtime_versions", lambda: {"onnxruntime": "9.9.9", "numpy": "9"})
    again = regate_published(store, CHECKPOINT, TARGET, tmp_path / "cache", deadline=PAST, clock=lambda: 0.0)
    assert again["steps"] == 1 and _progress(store, artifact_id).runtime["onnxruntime"] == "9.9.9"
    monkeypatch.setattr(regate, "int8_kernels", lambda profile: "x86_64-other")
    elsewhere = regate_published(store, CHECKPOINT, TARGET, tmp_path / "cache", deadline=PAST, clock=lambda: 0.0)
    assert elsewhere["int8_kernels"] == "x86_64-other" and elsewhere["steps"] == 1
    # a finished verdict that failed is kept and answered; the replay is not run again
    progress = Progress.parse(store.read(progress_key(artifact_id, "x86_64-other"))[0])  # type: ignore[index]
    assert progress is not None
    progress.verdict = {"passed": False, "failures": ["kept"]}
    store.swap(progress_key(artifact_id, "x86_64-other"), progress.to_bytes(),
               store.read(progress_key(artifact_id, "x86_64-other"))[1])  # type: ignore[index]
    monkeypatch.setattr(regate, "open_for_gate", lambda *a: pytest.fail("a kept verdict opened the artifact"))
    kept = regate_published(store, CHECKPOINT, TARGET, tmp_path / "cache", deadline=PAST, clock=lambda: 0.0)
    assert kept["passed"] is False and kept["failures"] == ["kept"]
    assert store.read(gate_record_key(artifact_id, "x86_64-other")) is None


def test_unreadable_progress_starts_over(published: tuple[LocalStore, str], tmp_path: Path) -> None:
    store, artifact_id = published
    key = progress_key(artifact_id, int8_kernels(cpu_profile()))
    store.create(key, b"{not json")
    summary = regate_published(store, CHECKPOINT, TARGET, tmp_path / "cache", deadline=PAST, clock=lambda: 0.0)
    assert summary["steps"] == 1 and _progress(store, artifact_id).done == CHUNK_CASES


def test_the_graph_is_held_in_memory_never_under_the_cache(published: tuple[LocalStore, str],
                                                           tmp_path: Path) -> None:
    """A published English graph (843 MB compact, 1.6 GB FP32) does not fit Lambda's 512 MB `/tmp`."""
    store, _ = published
    regate_published(store, CHECKPOINT, TARGET, tmp_path / "cache", deadline=PAST, clock=lambda: 0.0)
    cached = [p.name for p in (tmp_path / "cache").rglob("*") if p.is_file()]
    assert cached and GRAPH_FILE not in cached


def test_a_step_stops_before_its_deadline_once_it_knows_a_chunk_s_time(published: tuple[LocalStore, str],
                                                                       tiny_fp32: Path) -> None:
    """Each read of the clock moves it 5 s, so a chunk takes 5 s: the step looks at 15 s (15 + 1.5 x 5 < 30: one
    more) and at 30 s (past the deadline with the next chunk's time: it stops), two chunks in all."""
    store, artifact_id = published
    goldens = json.loads(goldens_sidecar(tiny_fp32).read_bytes())
    now = [0.0]

    def clock() -> float:
        now[0] += 5.0
        return now[0]

    progress = Progress(artifact=artifact_id, kernels="k", corpus="c", runtime={}, cases=0)
    decider = regate.open_for_gate(store, artifact_id, regate.read_manifest(store, artifact_id), Path(store.root))
    step = stepwise.replay_step(decider, goldens, TARGET, progress, deadline=30.0, clock=clock)
    assert step.done == 2 * CHUNK_CASES and not step.finished and step.replay_seconds == 10.0
    assert stepwise.replay_step(decider, goldens, TARGET, progress, deadline=None).finished


@pytest.mark.parametrize("remaining_ms, expected", [(900_000, 600.0), (300_000, 180.0), (60_000, 0.0)])
def test_a_step_s_time_is_ten_minutes_or_what_the_invocation_leaves(remaining_ms: int, expected: float) -> None:
    context = type("Context", (), {"get_remaining_time_in_millis": lambda self: remaining_ms})()
    assert regate.step_deadline(context, clock=lambda: 100.0) == 100.0 + expected
    assert regate.step_deadline(None) is None  # a local run replays the whole corpus in one call


def test_the_manifest_pins_the_corpus_the_progress_names(published: tuple[LocalStore, str], tiny_fp32: Path,
                                                        tmp_path: Path) -> None:
    store, artifact_id = published
    regate_published(store, CHECKPOINT, TARGET, tmp_path / "cache", deadline=PAST, clock=lambda: 0.0)
    assert _progress(store, artifact_id).corpus == Manifest.load(tiny_fp32).raw["parity"]["goldens_sha256"]
