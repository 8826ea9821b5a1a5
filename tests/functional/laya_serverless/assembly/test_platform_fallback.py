"""A deployment whose int8 artifact was gated on other int8 kernels, or has none published, serves the
checkpoint's FP32 artifact instead and says so; with no FP32 artifact it is not ready rather than unproven."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from laya_artifacts.deploy.publish import publish
from laya_serverless.artifact.layout import MANIFEST_FILE
from laya_serverless.artifact.platform import cpu_profile, int8_kernels
from laya_serverless.artifact.store import LocalStore
from laya_serverless.http.service import build_service
from laya_serverless.settings import Settings

pytestmark = pytest.mark.slow
QUESTIONS = {"churn": {"type": "noul", "instructions": "Will they leave?"}}
ELSEWHERE = {"machine": "x86_64", "model": "a CPU of another kernel class", "isa": ["avx2", "avx512_vnni",
                                                                                    "amx_int8"]}


def _as_int8_gated_elsewhere(fp32: Path, out: Path) -> Path:
    """The FP32 artifact relabelled as an int8 one gated on a CPU of other int8 kernels than this one's."""
    shutil.copytree(fp32, out)
    manifest = json.loads((out / MANIFEST_FILE).read_text())
    elsewhere = ELSEWHERE if int8_kernels(cpu_profile()) != "amx-int8" else {"machine": "x86_64", "isa": ["avx2"]}
    manifest["configuration"].update(target="cpu-int8", precision={"weights": "int8"}, build_cpu=elsewhere)
    (out / MANIFEST_FILE).write_text(json.dumps(manifest))
    return out


def _settings(store: Path, tmp_path: Path) -> Settings:
    return Settings.from_environ({"LAYA_STORE": str(store), "LAYA_DEPLOYED": "multilingual=tiny-modernbert",
                                  "LAYA_CACHE_DIR": str(tmp_path / "cache"), "LAYA_TARGET": "cpu-int8"})


def test_the_fp32_artifact_answers_and_health_says_why(tiny_fp32: Path, tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    publish(tiny_fp32, store)
    publish(_as_int8_gated_elsewhere(tiny_fp32, tmp_path / "int8"), store)
    app = TestClient(build_service(_settings(tmp_path / "store", tmp_path)))
    health = app.get("/health").json()
    assert health["loaded"] == ["multilingual"]
    fallback = health["target_fallbacks"]["multilingual"]
    assert fallback["served"] == "cpu-fp32" and "never on this CPU" in fallback["reason"]
    assert app.post("/v1/systemone", json={"state": "x", "questions": QUESTIONS}).status_code == 200


@pytest.mark.parametrize("equivalent", [True, False], ids=["proven", "not-proven"])
def test_an_int8_artifact_proven_for_this_cpu_class_at_build_serves_as_int8(tiny_fp32: Path, tmp_path: Path,
                                                                          equivalent: bool) -> None:
    """Built on other int8 kernels, with the build's emulated check recording this CPU's class: int8 serves here
    without a re-gate, and /health names the class; a check that did not hold leaves the FP32 fallback."""
    store = LocalStore(tmp_path / "store")
    publish(tiny_fp32, store)
    int8 = _as_int8_gated_elsewhere(tiny_fp32, tmp_path / "int8")
    manifest = json.loads((int8 / MANIFEST_FILE).read_text())
    here = int8_kernels(cpu_profile())
    manifest["configuration"]["int8_classes"] = {here: {
        "proof": "equivalence", "kernels": here, "rows": 9, "equivalent": equivalent,
        "max_probability_difference": 6e-8 if equivalent else 3e-3, "tolerance": 1e-5}}
    (int8 / MANIFEST_FILE).write_text(json.dumps(manifest))
    publish(int8, store)
    health = TestClient(build_service(_settings(tmp_path / "store", tmp_path))).get("/health").json()
    assert health["int8_kernels"] == here
    assert ("target_fallbacks" not in health) is equivalent, health


def test_without_an_fp32_artifact_the_deployment_is_not_ready(tiny_fp32: Path, tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    publish(_as_int8_gated_elsewhere(tiny_fp32, tmp_path / "int8"), store)
    app = TestClient(build_service(_settings(tmp_path / "store", tmp_path)))
    assert app.get("/health").json()["ready"] is False
    assert app.post("/v1/systemone", json={"state": "x", "questions": QUESTIONS}).status_code == 503


def test_with_no_int8_published_the_default_target_serves_fp32_and_says_so(tiny_fp32: Path, tmp_path: Path) -> None:
    """What the quickstart leaves (cpu-fp32 alone) is served under the default target, not refused."""
    publish(tiny_fp32, LocalStore(tmp_path / "store"))
    settings = Settings.from_environ({"LAYA_STORE": str(tmp_path / "store"), "LAYA_DEPLOYED": "english=tiny-modernbert",
                                      "LAYA_CACHE_DIR": str(tmp_path / "cache")})
    assert settings.deployment.target == "cpu-int8"
    app = TestClient(build_service(settings))
    health = app.get("/health").json()
    assert health["loaded"] == ["english"]
    assert health["target_fallbacks"]["english"] == {
        "served": "cpu-fp32", "reason": "no cpu-int8 artifact is published for tiny-modernbert"}
    answered = app.post("/v1/systemone", json={"state": "x", "questions": QUESTIONS})
    assert answered.status_code == 200
    assert answered.json()["routing"]["repo"] == "tiny-modernbert"  # what serves, not upstream's bundle
