"""`laya-artifacts package` (`make layer`, `make synth`) reuses a package whose inputs did not change: the lock,
pyproject, the recipe, the runtime package and the Python; any change to one of them builds again."""

from __future__ import annotations

from pathlib import Path

import pytest

from laya_artifacts.package import lambda_package


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    built: list[str] = []

    def build(arch: str, out: Path, _python: str | None) -> int:
        (out / arch).mkdir(parents=True, exist_ok=True)
        built.append(arch)
        return 0

    monkeypatch.setattr(lambda_package, "build", build)
    return built


def test_unchanged_inputs_reuse_the_package_and_rebuild_forces_a_build(tmp_path: Path, builds: list[str],
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    assert lambda_package.build_once("x86_64", tmp_path, "/usr/bin/python3.12") == 0
    assert lambda_package.build_once("x86_64", tmp_path, "/usr/bin/python3.12") == 0
    assert builds == ["x86_64"] and "reusing %s: built from the same inputs" % (tmp_path / "x86_64") in \
        capsys.readouterr().out
    assert lambda_package.build_once("x86_64", tmp_path, "/usr/bin/python3.12", rebuild=True) == 0
    assert builds == ["x86_64", "x86_64"]


def test_another_python_or_a_failed_build_is_not_reused(tmp_path: Path, builds: list[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    lambda_package.build_once("x86_64", tmp_path, "/usr/bin/python3.12")
    lambda_package.build_once("x86_64", tmp_path, "/opt/python3.12")
    assert builds == ["x86_64", "x86_64"]
    monkeypatch.setattr(lambda_package, "build", lambda *_a: 1)
    (tmp_path / "x86_64" / lambda_package.STAMP_FILE).unlink()
    assert lambda_package.build_once("x86_64", tmp_path, "/usr/bin/python3.12") == 1
    assert not (tmp_path / "x86_64" / lambda_package.STAMP_FILE).exists()


def test_a_change_to_the_runtime_package_changes_the_digest(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    (root / "functions" / "laya_serverless").mkdir(parents=True)
    (root / "pyproject.toml").write_text("[project]\n")
    module = root / "functions" / "laya_serverless" / "m.py"
    module.write_text("A = 1\n")
    before = lambda_package.inputs_digest("x86_64", None, root)
    module.write_text("A = 2\n")
    assert lambda_package.inputs_digest("x86_64", None, root) != before
