"""The deploy-time gate (laya_serverless.gate.regate): replay a published artifact's own corpus where it serves."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from laya_artifacts.deploy.publish import publish
from laya_serverless import ArtifactError
from laya_serverless.artifact.manifest import Manifest
from laya_serverless.artifact.platform import cpu_profile, gate_record_key, int8_kernels
from laya_serverless.artifact.store import LocalStore, pointer_key
from laya_serverless.gate import regate
from laya_serverless.gate.regate import goldens_key, goldens_sidecar, handler, regate_published
from laya_serverless.gate.stepwise import CHUNK_CASES, ordered_cases
from tests.provider_framework import run_custom_resource


def _event(store: Path, request: str = "Create", strict: bool = False, **pair: str) -> dict[str, Any]:
    pair = pair or {"checkpoint": "tiny-modernbert", "target": "cpu-int8"}
    return {"RequestType": request, "ResourceProperties": {"Store": str(store), "Artifacts": [pair],
                                                           "Strict": str(strict).lower()}}


def test_publishing_uploads_the_goldens_the_manifest_pins(tiny_int8: Path, tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    publish(tiny_int8, store)
    expected = Manifest.load(tiny_int8).raw["parity"]["goldens_sha256"]
    found = store.read(goldens_key(expected))
    assert found is not None and found[0] == goldens_sidecar(tiny_int8).read_bytes()
    assert "rows" in json.loads(found[0])


@pytest.mark.int8
def test_the_gate_replays_on_this_cpu_records_once_and_the_runtime_can_read_it(tiny_int8: Path,
                                                                               tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    artifact_id = publish(tiny_int8, store)
    first = regate_published(store, "tiny-modernbert", "cpu-int8", tmp_path / "cache")
    assert first["passed"] and first["rows"] > 0 and first["artifact"] == artifact_id, json.dumps(first)
    key = gate_record_key(artifact_id, int8_kernels(cpu_profile()))
    assert first["recorded"] == key
    record = json.loads(store.read(key)[0])  # type: ignore[index]
    assert record["artifact"] == artifact_id and record["report"]["passed"]
    again = regate_published(store, "tiny-modernbert", "cpu-int8", tmp_path / "cache")
    assert again["recorded"] == "already"  # create-only: a proof is never rewritten


def test_a_corpus_edited_in_the_store_is_refused(tiny_int8: Path, tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    publish(tiny_int8, store)
    key = goldens_key(Manifest.load(tiny_int8).raw["parity"]["goldens_sha256"])
    path = tmp_path / "store" / key
    goldens = json.loads(path.read_bytes())
    goldens["rows"] = goldens["rows"][:1]  # an easier corpus would pass anything
    path.write_text(json.dumps(goldens))
    with pytest.raises(ArtifactError, match="does not hash to its name"):
        regate_published(store, "tiny-modernbert", "cpu-int8", tmp_path / "cache")


def test_the_custom_resource_reports_each_pair_and_fails_the_deploy_only_when_strict(tiny_int8: Path,
                                                                                     tmp_path: Path) -> None:
    store_dir = tmp_path / "store"
    publish(tiny_int8, LocalStore(store_dir))
    started = handler(_event(store_dir), None)  # onEvent only names the resource: the replay is isComplete's
    assert started == {"PhysicalResourceId": started["PhysicalResourceId"], "Data": {"LayaGateStep": "Create"}}
    response, polls = run_custom_resource(handler, _event(store_dir))
    assert response["Data"]["Passed"] == "true" and polls == 1  # no Lambda context: one call replays it all
    assert json.loads(response["Data"]["Results"])[0]["passed"] is True
    missing, _ = run_custom_resource(handler, _event(store_dir, checkpoint="never-published", target="cpu-int8"))
    assert missing["Data"]["Passed"] == "false" and "never-published" in missing["Data"]["Results"]
    with pytest.raises(ArtifactError, match="rolled back"):
        run_custom_resource(handler, _event(store_dir, strict=True, checkpoint="never-published", target="cpu-int8"))
    deleted, polls = run_custom_resource(handler, dict(_event(store_dir, "Delete"), PhysicalResourceId="gate-1"))
    assert deleted["PhysicalResourceId"] == "gate-1" and polls == 1  # the waiter runs on Delete too: it must end


class _Invocation:
    """A Lambda context whose invocation always has 2 minutes left: all of it margin, so one chunk a step."""

    def get_remaining_time_in_millis(self) -> int:
        return 120_000


def test_a_replay_longer_than_a_step_goes_on_over_the_provider_s_polls(tiny_fp32: Path, tmp_path: Path) -> None:
    regate._opened.clear()
    store_dir = tmp_path / "store"
    artifact_id = publish(tiny_fp32, LocalStore(store_dir))
    request = _event(store_dir, checkpoint="tiny-modernbert", target="cpu-fp32")
    response, polls = run_custom_resource(handler, request, _Invocation())
    [result] = json.loads(response["Data"]["Results"])
    splits = Counter(split for split, _, _ in ordered_cases(json.loads(goldens_sidecar(tiny_fp32).read_bytes())))
    chunks = sum(math.ceil(n / CHUNK_CASES) for n in splits.values())  # a chunk never spans two splits
    assert response["Data"]["Passed"] == "true" and polls == result["steps"] == chunks > 1
    assert result["recorded"] == gate_record_key(artifact_id, int8_kernels(cpu_profile()))


def test_a_pinned_artifact_is_the_one_gated_whatever_the_pointer_says(tiny_fp32: Path, tmp_path: Path) -> None:
    store_dir, key = tmp_path / "store", pointer_key("tiny-modernbert", "cpu-fp32")
    store = LocalStore(store_dir)
    pinned = publish(tiny_fp32, store)
    assert store.swap(key, json.dumps({"artifact": "c" * 64}).encode(), store.read(key)[1])  # type: ignore[index]
    request = _event(store_dir, checkpoint="tiny-modernbert", target="cpu-fp32")
    request["ResourceProperties"]["Artifacts"][0]["artifact"] = pinned
    response, _ = run_custom_resource(handler, request)
    [result] = json.loads(response["Data"]["Results"])
    assert result["artifact"] == pinned and result["passed"] is True


@pytest.mark.parametrize("garbage", [b"", b"not json", b'{"passed": false}'])
def test_a_gate_record_that_proves_nothing_is_never_answered_already(tiny_int8: Path, tmp_path: Path,
                                                                     garbage: bytes) -> None:
    store = LocalStore(tmp_path / "store")
    artifact_id = publish(tiny_int8, store)
    key = gate_record_key(artifact_id, int8_kernels(cpu_profile()))
    store.create(key, garbage)
    summary = regate_published(store, "tiny-modernbert", "cpu-int8", tmp_path / "cache")
    assert summary["passed"] is False and "recorded" not in summary
    assert "gate record was ignored" in summary["failures"][0] and key in summary["failures"][0]
    assert store.read(key)[0] == garbage  # type: ignore[index]  (create-only: left for a person to remove)


@pytest.mark.parametrize("event, message", [
    (None, "RequestType one of"), ([], "RequestType one of"), ({}, "RequestType one of"),
    ({"RequestType": "Explode", "ResourceProperties": {"Store": "s"}}, "RequestType one of"),
    ({"RequestType": "Create"}, "Store must name"),
    ({"RequestType": "Create", "ResourceProperties": []}, "Store must name"),
    ({"RequestType": "Create", "ResourceProperties": {"Store": 7}}, "Store must name"),
    ({"RequestType": "Create", "ResourceProperties": {"Store": "s"}}, "nothing to gate is not a pass"),
    ({"RequestType": "Update", "ResourceProperties": {"Store": "s", "Artifacts": []}}, "non-empty list"),
    ({"RequestType": "Create", "ResourceProperties": {"Store": "s", "Artifacts": ["demo"]}}, "non-empty list"),
    ({"RequestType": "Create", "ResourceProperties": {"Store": "s", "Artifacts": [{"checkpoint": 1}]}},
     "non-empty list"),
    ({"RequestType": "Create", "ResourceProperties": {"Store": "s", "Artifacts": [
        {"checkpoint": "demo", "target": "cpu-int8", "artifact": "../../pointers"}]}}, "a pinned id"),
])
def test_a_malformed_custom_resource_event_fails_naming_what_is_wrong(event: Any, message: str) -> None:
    """Never a KeyError or TypeError, and never `Passed: "true"` for a request that gates nothing."""
    with pytest.raises(ArtifactError, match=message):
        handler(event, None)  # type: ignore[arg-type]


def test_the_physical_id_never_carries_the_store_s_name(tmp_path: Path) -> None:
    deleted = handler({"RequestType": "Delete", "ResourceProperties": {"Store": "s3://secret-bucket/p"}}, None)
    assert deleted["PhysicalResourceId"].startswith("laya-deploy-gate-")
    assert "secret-bucket" not in deleted["PhysicalResourceId"]


def test_a_pass_on_a_gpu_is_recorded_under_the_gpu_s_class_where_the_container_reads_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    from laya_serverless.artifact.gpu import gpu_key, unproven_on_this_gpu
    from laya_serverless.gate import regate

    l4 = {"gpu": {"name": "NVIDIA L4"}, "gpu_count": 1, "onnxruntime": "1.32.0"}
    monkeypatch.setattr(regate, "gpu_profile", lambda: l4)
    store, artifact_id = LocalStore(tmp_path), "c" * 64
    report = SimpleNamespace(target="cuda-fp16", passed=True, rows=40, max_probability_error=0.004,
                             max_action_error=0.001)
    assert regate.record_gate(store, artifact_id, report) == gate_record_key(artifact_id, gpu_key(l4))  # type: ignore[arg-type]
    built_elsewhere = Manifest({"configuration": {"target": "cuda-fp16", "cuda": {
        "build_gpu": {"gpu": {"name": "NVIDIA A10G"}, "onnxruntime": "1.32.0"}}}, "files": {}})
    assert unproven_on_this_gpu(built_elsewhere, artifact_id, store, l4) is None


def test_the_default_int8_target_over_a_checkpoint_with_only_fp32_published_passes_as_skipped(
        tiny_fp32: Path, tmp_path: Path) -> None:
    """The stack's default target follows the runtime's rule: no int8 published, its cpu-fp32 serves, no re-gate."""
    publish(tiny_fp32, LocalStore(tmp_path / "store"))
    response, _ = run_custom_resource(handler, _event(tmp_path / "store", strict=True))
    result = json.loads(response["Data"]["Results"])[0]
    assert response["Data"]["Passed"] == "true"
    assert result["skipped"] == "no cpu-int8 artifact is published; its cpu-fp32 serves"
