"""The docs agree with the tree: every relative link and `#anchor` resolves, and every `make` target and
CLI subcommand a page names exists."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_CODE = re.compile(r"`([^`\n]+)`|```[^\n]*\n(.*?)```", re.S)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.strip().lower()
    return re.sub(r"\s", "-", re.sub(r"[^\w\s-]", "", text))


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    return {_slug(m.group(1)) for m in re.finditer(r"^#+\s+(.+)$", text, re.M)}


def _code(page: Path) -> str:
    return "\n".join(a or b for a, b in _CODE.findall(page.read_text(encoding="utf-8")))


def _subcommands(parser: argparse.ArgumentParser) -> set[str]:
    found: set[str] = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found |= {name} | {"%s %s" % (name, s) for s in _subcommands(sub)}
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_and_anchor_resolves(page: Path) -> None:
    broken = []
    for target in _LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(target)
        elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
            broken.append(target)
    assert broken == [], "%s links to what is not there" % page.name


def test_every_make_target_a_page_names_exists() -> None:
    targets = set(re.findall(r"^([\w.-]+):", (ROOT / "Makefile").read_text(encoding="utf-8"), re.M))
    named = {(page.name, t) for page in PAGES for t in re.findall(r"\bmake ([a-z][\w-]*)", _code(page))}
    assert ("README.md", "serve") in named and ("README.md", "test") in named
    assert sorted((p, t) for p, t in named if t not in targets) == []


def test_every_cli_subcommand_a_page_names_exists() -> None:
    from laya_artifacts.cli import parser as artifacts_parser
    from laya_serverless.cli import parser as serverless_parser

    known = {"laya-artifacts": _subcommands(artifacts_parser()), "laya-serverless": _subcommands(serverless_parser())}
    missing, seen = [], 0
    for page in PAGES:
        for tool, words in re.findall(r"\b(laya-artifacts|laya-serverless) ((?:[a-z][\w-]* ?){1,2})", _code(page)):
            first, seen = words.split()[0], seen + 1
            if first not in known[tool]:
                missing.append((page.name, tool, first))
    assert seen >= 10 and missing == []


def test_the_slugs_are_githubs() -> None:
    assert _slug("Measured on the trained demo") == "measured-on-the-trained-demo"
    assert _slug("`make deploy`: one command") == "make-deploy-one-command"
