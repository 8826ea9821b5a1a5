"""A command-line subcommand, in one shape for `laya-serverless` and `laya-artifacts` alike (after optimum's
`commands/base.py`): a name, a help line, a function adding its arguments, and `run(args) -> int`."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any


def no_arguments(_parser: argparse.ArgumentParser) -> None:
    """The arguments of a command that takes none."""


@dataclass(frozen=True)
class Command:
    """One subcommand. `description` (optional) is shown as written under `NAME --help`."""

    name: str
    help: str
    arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    description: str | None = None


def register(subparsers: Any, commands: Iterable[Command]) -> None:
    """Each command as a subparser of `subparsers` (an `add_subparsers()` result): the one way they are added."""
    for command in commands:
        extra: dict[str, Any] = {}
        if command.description is not None:
            extra = {"description": command.description, "formatter_class": argparse.RawDescriptionHelpFormatter}
        parser = subparsers.add_parser(command.name, help=command.help, **extra)
        command.arguments(parser)
        parser.set_defaults(run=command.run)


__all__ = ["Command", "no_arguments", "register"]
