"""The command lines the docs show (README.md and docs/*.md), as a reader would type them.

A command is a simple command (split at `&&`, `||`, `;`, ` | ` and a trailing `&`) of a fenced code block's
line, continued lines and multi-line quotes joined, or of an inline code span that is a whole command, whose
first word, after `VAR=value` assignments and `sudo`, `time`, `nice -n N`, is one of `TOOLS`. A line
`# AWS-only: <why>` in a fenced block marks every command below it in that block as needing an AWS account.
tests/unit/test_docs_commands.py classifies and checks them; functional tests run some of them.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from tests.paths import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
AWS_MARK = "# AWS-only:"
# The tools whose command lines the docs must keep working; installers (pip, npm) and shell plumbing (cd, cp, ls)
# are not among them: their arguments are the package index's and the shell's, not this project's.
TOOLS = (
    "make",
    "laya-artifacts",
    "laya-serverless",
    "pytest",
    "script",
    "python-module",
    "curl",
    "cdk",
    "aws",
    "sam",
    "docker",
    "jevcompat",
)
_WRAPPERS = ("sudo", "time", "/usr/bin/time", "nice", "env", "exec")  # run the command after them
_ELISION = ("...", "…")


@dataclass(frozen=True)
class DocCommand:
    page: str  # relative to the checkout: README.md, docs/jobs.md
    line: int  # where the command starts
    text: str  # as written, comments dropped, whitespace collapsed, `.venv/bin/` dropped from the tool
    tool: str  # one of TOOLS
    argv: tuple[str, ...]  # the tool's words after assignments and wrappers (pytest's without `python -m`)
    env: dict[str, str] = field(default_factory=dict, compare=False)
    fenced: bool = True
    marked: bool = False  # below an `# AWS-only:` line of its block

    @property
    def where(self) -> str:
        return "%s:%d" % (self.page, self.line)


def _split(text: str) -> tuple[list[str], bool]:
    """`text`'s simple commands, comments dropped, and whether it is still open: inside a quote or `$(...)`,
    or ended by a backslash that continues it on the next line."""
    segments: list[str] = []
    current: list[str] = []
    quote: str | None = None
    depth = i = 0
    while i < len(text):
        ch = text[i]
        if quote:
            current.append(ch)
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
            current.append(ch)
        elif ch == "\\":
            if text[i + 1 : i + 2] in ("\n", ""):
                if not text[i + 1 :].strip():
                    segments.append("".join(current))
                    return [s.strip() for s in segments if s.strip()], True
                current.append(" ")
            else:
                current.append(text[i : i + 2])
            i += 1
        elif text.startswith("$(", i):
            depth += 1
            current.append("$(")
            i += 1
        elif ch == ")" and depth:
            depth -= 1
            current.append(ch)
        elif ch == "#" and (not current or current[-1][-1:] in (" ", "\t", "\n")):
            while i < len(text) and text[i] != "\n":
                i += 1
            continue
        elif depth == 0 and (separator := _separator(text, i)):
            segments.append("".join(current))
            current = []
            i += len(separator)
            continue
        else:
            current.append(ch)
        i += 1
    segments.append("".join(current))
    return [s.strip() for s in segments if s.strip()], quote is not None or depth > 0


def _separator(text: str, i: int) -> str:
    """The command separator at `text[i]`, if any. A `|` between words with no space (`cpu-int8|cpu-fp32`) is a
    synopsis's alternatives, not a pipe; a `&` after `>` is a redirection."""
    for separator in ("&&", "||", ";", "\n"):
        if text.startswith(separator, i):
            return separator
    before, after = text[i - 1 : i], text[i + 1 : i + 2]
    if text[i] == "|" and before in (" ", "") and after in (" ", ""):
        return "|"
    if text[i] == "&" and before in (" ", "") and after in (" ", "\n", ""):
        return "&"
    return ""


def _tokens(segment: str) -> list[str]:
    segment = re.sub(r"<([A-Za-z][\w .:-]*)>", lambda m: re.sub(r"\W", "_", m.group(1)).upper(), segment)
    inner = re.fullmatch(r"\w+=\$\((.*)\)", segment, re.S)  # URL=$(aws ...): the command is the inner one
    if inner:
        segment = inner.group(1)
    try:
        words = shlex.split(segment)
    except ValueError:
        words = segment.split()
    while words and (re.fullmatch(r"\w+\(\)", words[0]) or words[0] in ("{", "}")):
        words = words[1:]  # a shell function's definition: its body is the command
    kept: list[str] = []
    skip = False
    for word in words:
        if skip:
            skip = False
        elif word in (">", ">>", "<", "&>"):
            skip = True
        elif not re.fullmatch(r"\d*>>?&?\d*|\}", word):
            kept.append(word)
    return kept


def _tool(words: list[str]) -> tuple[str, list[str]] | None:
    """The tool a command line runs, and its words from the tool on (None: not one of TOOLS)."""
    if not words:
        return None
    base = words[0].rsplit("/", 1)[-1]
    if base in (
        "laya-artifacts",
        "laya-serverless",
        "make",
        "curl",
        "cdk",
        "aws",
        "sam",
        "docker",
        "jevcompat",
        "pytest",
    ):
        return base, [base, *words[1:]]
    if base == "npx" and words[1:2] == ["cdk"]:
        return "cdk", words[1:]
    if re.fullmatch(r"python[\d.]*", base):
        rest = words[1:]
        if rest[:2] == ["-m", "pytest"]:
            return "pytest", ["pytest", *rest[2:]]
        if rest[:1] == ["-m"] and len(rest) > 1 and rest[1].startswith("laya_"):
            return "python-module", rest[1:]
        if rest and re.fullmatch(r"[\w-][\w./-]*/[\w-]+\.py", rest[0]):
            return "script", rest
        return None  # `python -c`: inline code; `-m pip`, `-m venv`: installers; a one-off script outside the checkout
    if base in ("bash", "sh") and len(words) > 1:
        return "script", words[1:]
    if re.search(r"(^|/)scripts/[\w-]+\.(py|sh)$|(^|/)\.ci/run$", words[0]):
        return "script", words
    return None


def parse(segment: str, page: str, line: int, fenced: bool = True, marked: bool = False) -> DocCommand | None:
    """One simple command as a DocCommand, or None when it runs none of TOOLS."""
    words = _tokens(segment)
    env: dict[str, str] = {}
    while words and re.fullmatch(r"[A-Za-z_]\w*=.*", words[0], re.S):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    while words and words[0] in _WRAPPERS:  # and their options: `/usr/bin/time -v`, `nice -n 10`
        wrapper = words.pop(0)
        while words and (re.fullmatch(r"-[vn]\d*", words[0]) or (wrapper == "nice" and words[0].isdigit())):
            words.pop(0)
    found = _tool(words)
    if found is None:
        return None
    tool, argv = found
    text = re.sub(r"\s+", " ", segment).strip()
    text = re.sub(r"(^|\s)\.venv/bin/(laya-\w+|python)", r"\1\2", text)
    return DocCommand(page, line, text, tool, tuple(argv), env, fenced, marked)


def _relative(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


def fenced_commands(text: str, page: str) -> list[DocCommand]:
    """The commands of a page's fenced code blocks (python and json blocks hold none)."""
    found: list[DocCommand] = []
    inside, language, marked, start, buffer = False, "", False, 0, ""
    for number, line in enumerate(text.split("\n"), 1):
        if line.lstrip().startswith("```"):
            inside, language, marked, buffer = not inside, line.strip()[3:].strip(), False, ""
            continue
        if not inside or language in ("python", "json"):
            continue
        if not buffer and line.strip().startswith(AWS_MARK):
            marked = True
            continue
        if not buffer:
            start = number
        buffer += line + "\n"
        segments, still_open = _split(buffer)
        if still_open:
            continue
        buffer = ""
        for segment in segments:
            command = parse(segment, page, start, marked=marked)
            if command is not None:
                found.append(command)
    return found


def inline_commands(text: str, page: str) -> list[DocCommand]:
    """The inline code spans outside fenced blocks that are whole commands (`whole`)."""
    kept = [("" if inside else line) for line, inside in _fencing(text.split("\n"))]
    prose = "\n".join(kept)
    found: list[DocCommand] = []
    for match in re.finditer(r"(?<!`)`([^`]+)`(?!`)", prose):
        line = prose.count("\n", 0, match.start()) + 1
        for segment in _split(match.group(1).replace("\n", " "))[0]:
            command = parse(segment, page, line, fenced=False)
            if command is not None and whole(command):
                found.append(command)
    return found


def _fencing(lines: list[str]) -> list[tuple[str, bool]]:
    marks, inside = [], False
    for line in lines:
        if line.lstrip().startswith("```"):
            inside = not inside
            marks.append((line, True))
        else:
            marks.append((line, inside))
    return marks


def _subcommand_words(tool: str) -> dict[str, set[str]]:
    """For `laya-artifacts` and `laya-serverless`: each subcommand path (`bench`, `job`) and the words that
    follow it as subcommands, from the real parsers."""
    import argparse

    from laya_artifacts.cli import parser as artifacts_parser
    from laya_serverless.local_edge.cli import parser as serverless_parser

    tree: dict[str, set[str]] = {}

    def walk(parser: argparse.ArgumentParser, path: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                tree[path] = set(action.choices)
                for name, sub in action.choices.items():
                    walk(sub, (path + " " + name).strip())

    walk((artifacts_parser if tool == "laya-artifacts" else serverless_parser)(), "")
    return tree


_NESTED = {"aws": 2, "cdk": 1, "sam": 2, "make": 1}


def whole(command: DocCommand) -> bool:
    """Whether an inline span is a whole command rather than a tool's or subcommand's name (`make serve`,
    `laya-artifacts tune`, `cdk deploy`), which tests/unit/test_docs.py checks exist: a span with more than the
    tool's subcommand words, and no `...` standing for what it leaves out."""
    words = list(command.argv)
    if any(word in _ELISION for word in words):
        return False
    if command.tool in ("laya-artifacts", "laya-serverless"):
        tree, path, rest = _subcommand_words(command.tool), "", words[1:]
        while rest and path in tree and rest[0] in tree[path]:
            path, rest = (path + " " + rest[0]).strip(), rest[1:]
        return bool(rest)
    if command.tool in _NESTED:
        return len(words) > 1 + _NESTED[command.tool] or any(w.startswith("-") for w in words[1:])
    if command.tool == "script":
        return len(words) > 1 or command.text.split()[0] != words[0]  # arguments, or `python`/`bash` before it
    return len(words) > 1


def page_commands(page: Path) -> list[DocCommand]:
    text = page.read_text(encoding="utf-8")
    name = _relative(page)
    return sorted(fenced_commands(text, name) + inline_commands(text, name), key=lambda c: c.line)


def all_commands() -> list[DocCommand]:
    return [command for page in PAGES for command in page_commands(page)]


def synopsis(words: tuple[str, ...] | list[str]) -> list[str]:
    """A synopsis line as one argv: optional parts (`[--url …]`) kept, the first of `a|b` alternatives."""
    argv = []
    for word in words:
        if word == "":  # an explicit empty argument (`''`), as the shell passes it
            argv.append(word)
            continue
        word = word.strip("[]")
        word = re.sub(r"\]?\.\.\.$|…$", "", word) if word not in _ELISION else word
        if "|" in word and not word.startswith(("{", "'", '"')) and "://" not in word:
            word = word.split("|")[0]
        if word:
            argv.append(word)
    return argv
