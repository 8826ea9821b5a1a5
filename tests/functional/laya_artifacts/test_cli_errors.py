"""The build wing's one error tree, and what a user of a documented command sees of it: one line, never a
traceback, and a non-zero exit."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest

from laya_artifacts import errors
from laya_artifacts.cli import main
from laya_serverless.errors import LayaError


def test_every_build_error_is_one_build_error_and_one_laya_error() -> None:
    classes = [c for _, c in inspect.getmembers(errors, inspect.isclass) if issubclass(c, Exception)]
    assert len(classes) >= 20 and all(issubclass(c, errors.BuildError) for c in classes if c is not LayaError
                                      and c.__module__ == errors.__name__)
    assert sorted(errors.__all__) == sorted(c.__name__ for c in classes if c.__module__ == errors.__name__)
    # classes that were builtins before the tree keep being them: callers catching the builtin still do
    assert issubclass(errors.GateCasesError, ValueError) and issubclass(errors.OutputExists, FileExistsError)
    assert issubclass(errors.CheckpointNotFound, FileNotFoundError) and issubclass(errors.ProbeError, RuntimeError)


@pytest.fixture
def bad(tmp_path: Path) -> Path:
    (tmp_path / "bad.jsonl").write_text(json.dumps({"state": "hi", "questions": {}}) + "\n")
    checkpoint = tmp_path / "checkpoint"   # passes resolution; the build's guards refuse the full --out first
    checkpoint.mkdir()
    (checkpoint / "rl_agent_config.json").write_text("{}")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "model.onnx").write_bytes(b"")
    return tmp_path


@pytest.mark.parametrize(("argv", "says"), [
    (["build", "{t}/checkpoint", "--gate-cases", "{t}/bad.jsonl"], "'questions' is empty"),
    (["build", "{t}/nope"], "local checkpoint {t}/nope does not exist"),
    (["build", "{t}/checkpoint", "--target", "cpu-fp32", "--out", "{t}/full"], "builds never overwrite an artifact"),
    (["build", "{t}/checkpoint", "--candidates", "nope"], "unknown candidate(s) nope"),
    (["goldens", "{t}/checkpoint", "--out", "{t}/g", "--gate-cases", "{t}/bad.jsonl"], "'questions' is empty"),
    (["parity", "{t}/nope", "--goldens", "{t}/g.json"], "decode_config.json is missing"),
    (["verify", "{t}/nope"], "manifest.json is missing"),
    (["publish", "{t}/nope", "--store", "{t}/store"], "manifest.json is missing"),
    (["rollback", "tiny", "cpu-int8", "--store", "{t}/store"], "nothing to roll back"),
])
def test_a_documented_command_refuses_bad_input_in_one_line(bad: Path, argv: list[str], says: str,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert main([a.format(t=bad) for a in argv]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and says.format(t=bad) in err
    assert err.count("[laya-artifacts] error: ") == 1, err
