"""`laya-serverless` registers its subcommands the way `laya-artifacts` does: one `Command` shape, one
`register` (laya_serverless.command)."""

from __future__ import annotations

import re
from pathlib import Path

from laya_serverless.command import Command
from laya_serverless.local_edge import cli, job_commands

ROOT = Path(__file__).resolve().parents[3]


def test_every_subcommand_and_job_subcommand_is_a_command() -> None:
    assert [c.name for c in cli.COMMANDS] == ["serve", "start-api", "invoke", "job"]
    assert [c.name for c in job_commands.JOB_COMMANDS] == ["submit", "status", "results", "run"]
    assert all(isinstance(c, Command) for c in (*cli.COMMANDS, *job_commands.JOB_COMMANDS))
    args = cli.parser().parse_args(["job", "status", "abc"])
    assert args.run is job_commands.JOB_COMMANDS[1].run and args.id == "abc"


def test_only_register_adds_a_subparser_in_the_runtime() -> None:
    package = ROOT / "functions" / "laya_serverless"
    adders = [str(p.relative_to(package)) for p in sorted(package.rglob("*.py"))
              if ".add_parser(" in p.read_text(encoding="utf-8")]
    assert adders == ["command.py"], adders
    assert not re.search(r"def add_\w*commands?\(", (package / "local_edge" / "job_commands.py").read_text())
