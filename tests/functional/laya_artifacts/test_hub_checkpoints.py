"""Checkpoints by Hugging Face id and revision, offline: a hub cache laid out as huggingface_hub keeps it
(`models--ORG--NAME/refs/<name>` holding a commit, `snapshots/<commit>/...`), filled with the tiny test
checkpoint, read with `HF_HUB_OFFLINE=1` and `HF_HUB_CACHE` pointing at it. `build` and `deploy` honour
`--revision`, and without one `main` is resolved and recorded as its commit."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from laya_artifacts.checkpoints.sources import resolve_checkpoint, resolve_source
from laya_artifacts.cli import main as cli
from laya_artifacts.deploy import command
from laya_artifacts.errors import DeployFailed
from tests.conftest import tiny_choice_slice, write_goldens_file

HUB_ID = "laya-test/tiny"
MAIN, V1 = "a" * 40, "b" * 40  # two commits: main, and the tag v1


@pytest.fixture
def hub_cache(tmp_path: Path, tiny_modernbert: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> Path:
    from huggingface_hub import constants

    cache = tmp_path / "hub"
    repo = cache / "models--laya-test--tiny"
    for commit, ref in ((MAIN, "main"), (V1, "v1")):
        shutil.copytree(tiny_modernbert[0], repo / "snapshots" / commit)
        (repo / "refs").mkdir(parents=True, exist_ok=True)
        (repo / "refs" / ref).write_text(commit)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    # huggingface_hub read both at import (transformers imported it already in this process)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    return repo


@pytest.mark.parametrize(("revision", "commit"), [(None, MAIN), ("main", MAIN), ("v1", V1), (V1, V1)])
def test_a_hub_id_resolves_offline_to_the_commit_of_its_revision(hub_cache: Path, revision: str | None,
                                                                 commit: str) -> None:
    said: list[str] = []
    directory, name, resolved = resolve_checkpoint(HUB_ID, revision, said.append)
    assert (directory, name, resolved) == (hub_cache / "snapshots" / commit, HUB_ID, commit)
    assert (directory / "rl_agent_config.json").is_file()
    if revision != commit:
        assert said[-1] == "%s resolved to commit %s" % (revision or "main", commit)


def test_an_unknown_revision_is_refused_by_build(hub_cache: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(["build", HUB_ID, "--revision", "nope", "--target", "cpu-fp32", "--out", str(tmp_path / "a")]) == 2
    assert "cannot resolve checkpoint laya-test/tiny" in capsys.readouterr().err
    assert not (tmp_path / "a").exists()


def test_a_revision_for_a_local_directory_or_the_demo_is_refused(tiny_modernbert: tuple[Path, Path],
                                                                  tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"--revision v1 names a Hugging Face revision; .* is a local directory"):
        resolve_checkpoint(str(tiny_modernbert[0]), "v1")
    with pytest.raises(ValueError, match=r"--revision v1 names a Hugging Face revision; the demo has none"):
        resolve_source("demo", "v1", tmp_path)


class Recorded(Exception):
    pass


class SomeAccount:
    """STS for credentials that work: deploy checks them before it builds."""

    def get_caller_identity(self) -> dict[str, str]:
        return {"Account": "123456789012"}


def _deploy_until_the_build(request: command.Request) -> list[tuple[Path, str, str | None, str]]:
    """deploy() with the real resolver and a builder that records its call and stops the command there."""
    calls: list[tuple[Path, str, str | None, str]] = []

    def build(checkpoint: Path, name: str, revision: str | None, target: str) -> Path:
        calls.append((checkpoint, name, revision, target))
        raise Recorded("stopped after recording the build")

    seams = command.Seams(s3=None, sts=SomeAccount(), secrets=None, run_cdk=lambda _a: 1, build=build)
    with pytest.raises(DeployFailed, match=r"^step 1/6 build: stopped after recording the build"):
        command.deploy(request, seams)
    return calls


@pytest.mark.parametrize(("revision", "commit"), [(None, MAIN), ("v1", V1)])
def test_deploy_builds_the_hub_checkpoint_at_its_revision_s_commit(hub_cache: Path, tmp_path: Path,
                                                                    revision: str | None, commit: str) -> None:
    request = command.Request(checkpoints=(HUB_ID,), targets=("cpu-fp32",), cache=tmp_path, revision=revision)
    [(checkpoint, name, recorded, target)] = _deploy_until_the_build(request)
    assert (checkpoint, name, recorded, target) == (hub_cache / "snapshots" / commit, HUB_ID, commit, "cpu-fp32")


def test_deploy_refuses_one_revision_for_several_checkpoints(tmp_path: Path) -> None:
    request = command.Request(checkpoints=(HUB_ID, "demo"), revision="v1", cache=tmp_path)
    seams = command.Seams(s3=None, sts=SomeAccount(), secrets=None, run_cdk=lambda _a: 1)
    with pytest.raises(DeployFailed, match=r"step 1/6 build: --revision pins one Hugging Face checkpoint: name "
                                           r"exactly one --checkpoint"):
        command.deploy(request, seams)


def test_the_cli_passes_deploy_s_revision(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}

    def fake_deploy(request: command.Request, _seams: Any, _progress: Any) -> Any:
        seen["request"] = request
        raise DeployFailed("stop")

    monkeypatch.setattr(command, "deploy", fake_deploy)
    monkeypatch.setattr(command, "aws_seams", lambda: None)
    assert cli(["deploy", "--checkpoint", HUB_ID, "--revision", "v1"]) == 2
    assert seen["request"].revision == "v1" and seen["request"].checkpoints == (HUB_ID,)


@pytest.mark.slow
def test_build_from_the_hub_records_the_resolved_commit_in_the_manifest(hub_cache: Path, tmp_path: Path) -> None:
    goldens = write_goldens_file(tiny_choice_slice(), tmp_path)
    out = tmp_path / "artifact"
    assert cli(["build", HUB_ID, "--revision", "v1", "--target", "cpu-fp32", "--goldens", str(goldens),
                "--out", str(out)]) == 0
    checkpoint = json.loads((out / "manifest.json").read_text())["configuration"]["checkpoint"]
    assert checkpoint["name"] == HUB_ID and checkpoint["revision"] == V1
    assert checkpoint["source"] == str(hub_cache / "snapshots" / V1)
