"""`laya-artifacts`: every subcommand has one shape (name, help, arguments, run) and is registered one way;
`env` says what a build here depends on."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pytest

from laya_artifacts import cli
from laya_artifacts.build import tool_versions
from laya_artifacts.package.runtime_lock import lock_sha256
from laya_serverless.artifact.platform import cpu_profile, int8_kernels
from laya_serverless.command import Command

ROOT = Path(__file__).resolve().parents[3]
DOCUMENTED = ("build", "env", "goldens", "parity", "publish", "sign", "keygen", "rollback", "verify", "list",
              "import", "deploy", "demo", "package", "aarch64-python", "probe", "bench", "tune", "make-checkpoint")


def test_every_subcommand_is_a_command_each_stage_exports() -> None:
    commands = cli.commands()
    assert all(isinstance(c, Command) for c in commands)
    assert sorted(c.name for c in commands) == sorted(DOCUMENTED)   # each once
    subparsers = next(a for a in cli.parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert sorted(subparsers.choices) == sorted(DOCUMENTED)


def test_commands_are_added_to_a_parser_in_one_place_only() -> None:
    wing = ROOT / "artifacts" / "laya_artifacts"
    adders = [str(p.relative_to(wing)) for p in sorted(wing.rglob("*.py"))
              if re.search(r"\.add_parser\(|def add_command\(", p.read_text(encoding="utf-8"))]
    assert adders == []   # `laya_serverless.command.register` is the one caller of add_parser


def test_env_says_the_tools_the_cpu_its_int8_kernels_onnxruntime_and_the_lock(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["env", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["tools"] == tool_versions() and found["onnxruntime"] == tool_versions()["onnxruntime"]
    assert found["cpu"] == cpu_profile() and found["int8_kernels"] == int8_kernels(cpu_profile())
    assert found["runtime_lock"] == {"lock": "layers/requirements.lock", "sha256": lock_sha256()}
    assert cli.main(["env"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "onnxruntime: %s" % found["onnxruntime"] in lines
    assert "int8 kernels: %s" % found["int8_kernels"] in lines
    assert any(line.endswith("sha256 %s" % lock_sha256()) for line in lines)
