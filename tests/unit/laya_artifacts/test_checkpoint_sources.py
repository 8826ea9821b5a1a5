"""A checkpoint reference that exists here is a local checkpoint, even when it reads like a hub id (`owner/name`),
and it leaves `resolve_checkpoint` absolute so that no loader downstream takes it for one."""

from __future__ import annotations

from pathlib import Path

import pytest

from laya_artifacts.checkpoints.sources import resolve_checkpoint


def test_a_relative_owner_name_path_that_exists_is_local_and_absolute(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "acme" / "tiny").mkdir(parents=True)
    (tmp_path / "acme" / "tiny" / "rl_agent_config.json").write_text("{}")
    monkeypatch.chdir(tmp_path)
    path, name, revision = resolve_checkpoint("acme/tiny", None)
    assert (path, name, revision) == (tmp_path / "acme" / "tiny", "tiny", None) and path.is_absolute()


def test_a_local_folder_that_is_not_a_checkpoint_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "acme" / "tiny").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"^acme/tiny is not a Laya checkpoint directory "
                                                r"\(no rl_agent_config.json\)$"):
        resolve_checkpoint("acme/tiny", None)
