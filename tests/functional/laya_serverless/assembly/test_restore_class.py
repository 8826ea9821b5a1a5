"""After a SnapStart restore the CPU class is read again: restored on a class the int8 artifact's gate did not
cover, the checkpoint's cpu-fp32 serves (and back, on a class it covers), counted in /health and a metric;
with nothing this class may serve, the instance answers 503. The restore's CPU is simulated by the injected
class reader; the artifacts and sessions are real."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from laya_artifacts.deploy.publish import publish
from laya_serverless import observe
from laya_serverless.artifact.layout import MANIFEST_FILE
from laya_serverless.artifact.store import LocalStore
from laya_serverless.assembly.loader import assemble_deployment
from laya_serverless.http.app import build_app, create_app
from laya_serverless.http.serving import Serving
from laya_serverless.lambda_edge import snapstart
from laya_serverless.protocol.deployment import Deployment, ServedOn
from laya_serverless.protocol.detect import analyse
from laya_serverless.protocol.routing import Registry
from laya_serverless.settings import Settings
from tests.functional.laya_serverless.http.test_app_fast import fake_decider

QUESTIONS = {"churn": {"type": "noul", "instructions": "Will they leave?"}}
VNNI = {"machine": "x86_64", "model": "a VNNI CPU", "isa": ["avx2", "avx512f", "avx512bw", "avx512_vnni"]}
AVX2 = {"machine": "x86_64", "model": "an AVX2 CPU", "isa": ["avx2"]}


class _Metrics:
    def __init__(self) -> None:
        self.recorded: list[tuple[str, float]] = []

    def span(self, name: str, started: float, ended: float, failed: bool) -> None:
        return None

    def metric(self, name: str, value: float, unit: str) -> None:
        self.recorded.append((name, value))


@pytest.fixture
def metrics() -> Any:
    recorder = _Metrics()
    observe.install(recorder)
    yield recorder
    observe.install(None)


def _int8_gated_on_vnni(fp32: Path, out: Path) -> Path:
    """The FP32 artifact relabelled as an int8 one whose gate ran on VNNI kernels only."""
    shutil.copytree(fp32, out)
    manifest = json.loads((out / MANIFEST_FILE).read_text())
    manifest["configuration"].update(target="cpu-int8", precision={"weights": "int8"}, build_cpu=VNNI)
    (out / MANIFEST_FILE).write_text(json.dumps(manifest))
    return out


def _served(tmp_path: Path, store: Path, cpu: dict[str, Any]) -> tuple[Serving, Settings, TestClient]:
    settings = Settings.from_environ({"LAYA_STORE": str(store), "LAYA_DEPLOYED": "multilingual=tiny-modernbert",
                                      "LAYA_CACHE_DIR": str(tmp_path / "cache"), "LAYA_TARGET": "cpu-int8"})
    assembled = assemble_deployment(settings.deployment, cpu=lambda: cpu)
    serve = Serving(settings, assembled.deployment, assembled.registry, analyse, assembled.unavailable, True)
    return serve, settings, TestClient(build_app(serve))


def _answers(client: TestClient) -> int:
    return client.post("/v1/systemone", json={"state": "x", "questions": QUESTIONS}).status_code


@pytest.mark.slow
def test_restored_on_another_class_the_fp32_artifact_serves_and_back(tiny_fp32: Path, tmp_path: Path,
                                                                    metrics: _Metrics) -> None:
    store = LocalStore(tmp_path / "store")
    publish(tiny_fp32, store)
    publish(_int8_gated_on_vnni(tiny_fp32, tmp_path / "int8"), store)
    serve, settings, client = _served(tmp_path, tmp_path / "store", VNNI)  # INIT (the snapshot) on VNNI
    health = client.get("/health").json()
    assert health["int8_kernels"] == "avx512-vnni" and "target_fallbacks" not in health
    assert health["class_switches"] == [] and health["cpu_share"]["spinning"] is False

    snapstart.refresh(serve, settings, cpu=lambda: AVX2)  # restored on an AVX2 CPU
    health = client.get("/health").json()
    assert health["int8_kernels"] == "avx2"
    assert health["target_fallbacks"]["multilingual"]["served"] == "cpu-fp32"
    [switch] = health["class_switches"]
    assert (switch["from_class"], switch["to_class"], switch["from_target"], switch["to_target"]) == (
        "avx512-vnni", "avx2", "cpu-int8", "cpu-fp32")
    assert ("ClassSwitches", 1.0) in metrics.recorded
    assert _answers(client) == 200

    snapstart.refresh(serve, settings, cpu=lambda: AVX2)  # the same class again: nothing to switch
    assert len(client.get("/health").json()["class_switches"]) == 1

    snapstart.refresh(serve, settings, cpu=lambda: VNNI)  # a class the int8 gate covers: int8 again
    health = client.get("/health").json()
    assert "target_fallbacks" not in health and health["class_switches"][-1]["to_target"] == "cpu-int8"
    assert [name for name, _ in metrics.recorded].count("ClassSwitches") == 2
    assert _answers(client) == 200


@pytest.mark.slow
def test_restored_where_nothing_may_serve_the_instance_refuses(tiny_fp32: Path, tmp_path: Path,
                                                              metrics: _Metrics) -> None:
    store = LocalStore(tmp_path / "store")
    publish(_int8_gated_on_vnni(tiny_fp32, tmp_path / "int8"), store)  # no cpu-fp32 to fall back on
    serve, settings, client = _served(tmp_path, tmp_path / "store", VNNI)
    assert _answers(client) == 200
    snapstart.refresh(serve, settings, cpu=lambda: AVX2)
    assert client.get("/health").json()["ready"] is False
    response = client.post("/v1/systemone", json={"state": "x", "questions": QUESTIONS})
    assert response.status_code == 503 and "restored on a CPU" in response.json()["detail"]
    assert ("RefusedArtifacts", 1.0) in metrics.recorded


@pytest.mark.slow
def test_a_restore_never_fetches_past_its_budget_it_withdraws_saying_why(tiny_fp32: Path, tmp_path: Path,
                                                                        metrics: _Metrics) -> None:
    """A published checkpoint's graph cannot be fetched and opened within a restore's 10 s: past the budget the
    switch is not made, nothing is fetched, and the instance answers 503 (its log names the artifact and budget)."""
    store = LocalStore(tmp_path / "store")
    publish(tiny_fp32, store)
    publish(_int8_gated_on_vnni(tiny_fp32, tmp_path / "int8"), store)
    serve, settings, client = _served(tmp_path, tmp_path / "store", VNNI)
    cached = sorted((tmp_path / "cache").rglob("*"))
    snapstart.recheck(serve, settings.deployment, cpu=lambda: AVX2, fetch_budget=1)
    assert sorted((tmp_path / "cache").rglob("*")) == cached   # no graph moved
    assert client.get("/health").json()["ready"] is False
    response = client.post("/v1/systemone", json={"state": "x", "questions": QUESTIONS})
    assert response.status_code == 503 and "restored on a CPU" in response.json()["detail"]
    assert ("RefusedArtifacts", 1.0) in metrics.recorded and ("ClassSwitches", 1.0) not in metrics.recorded


def test_a_restore_that_cannot_choose_again_withdraws_the_deployment(tmp_path: Path, metrics: _Metrics) -> None:
    """The store no longer holds what INIT served (or cannot be read): never keep the unchecked int8 serving."""
    settings = Settings.of(store=str(tmp_path / "empty"), deployed={"english": "demo"})
    deployment = Deployment({"english": fake_decider([1.0, 0.0])}, Registry(), "english",
                            served_on=ServedOn("avx512-vnni", {"english": ("demo", "a" * 64, "cpu-int8")}))
    serve = Serving(settings, deployment, Registry(), analyse, None, True)
    snapstart.recheck(serve, settings.deployment, cpu=lambda: AVX2)
    assert serve.deployment is None and serve.unavailable == snapstart.RESTORED_ELSEWHERE


def test_a_restore_on_the_same_class_changes_nothing(tmp_path: Path, metrics: _Metrics) -> None:
    settings = Settings.of(store=str(tmp_path / "empty"))
    deployment = Deployment({"english": fake_decider([1.0, 0.0])}, Registry(), "english",
                            served_on=ServedOn("avx2", {"english": ("demo", "a" * 64, "cpu-int8")}))
    serve = Serving(settings, deployment, Registry(), analyse, None, True)
    snapstart.recheck(serve, settings.deployment, cpu=lambda: AVX2)
    assert serve.deployment is deployment and deployment.served_on is not None
    assert deployment.served_on.class_switches == [] and metrics.recorded == []


def test_a_deployment_assembled_by_hand_reports_this_cpus_class_only() -> None:
    health = TestClient(create_app({"english": fake_decider([1.0, 0.0])}, Settings.of())).get("/health").json()
    assert "int8_kernels" in health and "class_switches" not in health and "cpu_share" not in health
