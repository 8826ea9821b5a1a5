"""The docs agree with the tree: every relative link and `#anchor` resolves, every `make` target and
CLI subcommand a page names exists, and every figure table names its date and command."""

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


def _recipe(makefile: str, target: str) -> list[str]:
    """The command lines of a Makefile target (tab-indented lines under `target:`), and its prerequisites first."""
    match = re.search(r"^%s:([^\n]*)\n((?:\t[^\n]*\n)*)" % re.escape(target), makefile, re.M)
    assert match, target
    lines = [line.strip() for line in match.group(2).splitlines()]
    for prerequisite in match.group(1).split():
        if re.search(r"^%s:" % re.escape(prerequisite), makefile, re.M) and not prerequisite.startswith("$"):
            lines = _recipe(makefile, prerequisite) + lines
    return lines


@pytest.mark.parametrize("target", ["serve", "deploy"])
def test_the_user_s_make_targets_run_only_installed_commands(target: str) -> None:
    """`make serve` and `make deploy` (and what they build first) call the package's commands or the pinned CDK
    CLI, never a script by path: a checkout's loose file is not a front door."""
    lines = _recipe((ROOT / "Makefile").read_text(encoding="utf-8"), target)
    assert any("$(BIN)/laya-artifacts " in line for line in lines), lines
    loose = [line for line in lines if re.search(r"\bpython\b|\.py\b", line)]
    assert loose == []


def test_every_cli_subcommand_a_page_names_exists() -> None:
    from laya_artifacts.cli import parser as artifacts_parser
    from laya_serverless.local_edge.cli import parser as serverless_parser

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


# --- Every figure table names its date and its command (issue 25) --------------------------------------
#
# The project rule: "Every figure in docs has its date, machine (CPU flags) and the command that made it."
# The machine is prose and not checked here; the date and the command are.

_UNIT = r"(?:ms|s|min|h|KB|MB|GB|KiB|MiB|GiB|GB-s|GFLOP/s|tok/s|states/s|rows/s|%|×)(?![\w/])"
_NUM = r"\d[\d,]*(?:\.\d+)?"
# A cell that *is* a figure: it opens with a number (after bold, backticks, ~, ≈) and a unit; "strong"
# when it can only be a measurement: a fraction with a unit (14.75 ms, 53.4%, 3.21×, ×0.66) or an
# exponent (1.2e-5). An integer with a unit (3 s, 99 MB, 10 s) is "weak": settings look like that too.
_STRONG_CELL = re.compile(r"^[~≈]?\s*(?:×\s*\d+\.\d+|\d[\d,]*\.\d+\s?%s|\d(?:\.\d+)?e[-+]?\d+)" % _UNIT)
_WEAK_CELL = re.compile(r"^[~≈]?\s*%s\s?%s" % (_NUM, _UNIT))
_BARE_NUMBER = re.compile(r"^[~≈]?\s*%s$" % _NUM)
# Words that name a measurement, looked for in the header row, the nearest heading and the paragraph
# just above the table (its caption). Under a column header that names one (seconds, states/s,
# max |Δp|), a bare number is a weak figure too.
_MEASURED = re.compile(
    r"measured|\bp50\b|\bp90\b|\bp99\b|median|\bcold\b|\bRSS\b|throughput|speed|\btimes?\b|timings?|runtime|"
    r"how long|took|benchmark|\|Δp\||Δ act|\bseconds\b|states/s|\bms\b|accuracy|held-out|\bECE\b",
    re.I,
)
_DATE = re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b")
# A command: a code span (inline, or a line of a fenced block) whose first word, after `VAR=value`
# assignments and `nice -n N`, is one of these tools, or a path to a script in a scripts/ folder.
_COMMAND = re.compile(
    r"^(?:\w+=\S*\s+)*(?:nice(?:\s+-n\s*\d+)?\s+)?"
    r"(?:(?:make|python3?|pytest|bash|laya-artifacts|laya-serverless)\s+\S|(?:\S*/)?scripts/\S+)"
)
_SCRIPT_LINK = re.compile(r"\]\((?:\.\./|\./)?(?:\S*/)?scripts/[^)\s]+\)")
_HEADING = re.compile(r"^#{1,6}\s+\S")
_SPAN = re.compile(r"```[^\n]*\n(.*?)```|`([^`]+)`", re.S)  # an inline span may wrap across lines

# Tables the detection calls figure tables that are not (page, first header cell): each with its reason.
# Empty while the detection needs none; add an entry only with the reason it is not a measured figure.
NOT_FIGURES: dict[tuple[str, str], str] = {}


def _cells(row: str) -> list[str]:
    row = row.strip().removeprefix("|").removesuffix("|")
    return [re.sub(r"[*`]", "", c).replace("\\|", "|").strip() for c in re.split(r"(?<!\\)\|", row)]


def _blocks(text: str) -> tuple[list[str], list[bool]]:
    """The page's lines, and for each whether it lies in a fenced code block (headings and tables
    there are not the page's)."""
    lines, fenced, inside = text.split("\n"), [], False
    for line in lines:
        if line.lstrip().startswith("```"):
            inside = not inside
            fenced.append(True)
        else:
            fenced.append(inside)
    return lines, fenced


def _tables(text: str) -> list[dict]:
    """Every table of a page, with its header, body rows, the section it lies in (from the nearest
    heading above it to the next heading, the table included), that heading, and its caption (the
    paragraph right above it)."""
    lines, fenced = _blocks(text)
    heads = [i for i, line in enumerate(lines) if not fenced[i] and _HEADING.match(line)]
    tables, i = [], 0
    while i < len(lines) - 1:
        sep = re.match(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$", lines[i + 1])
        if fenced[i] or not lines[i].lstrip().startswith("|") or not sep:
            i += 1
            continue
        end = i + 2
        while end < len(lines) and lines[end].lstrip().startswith("|"):
            end += 1
        start = max([h for h in heads if h < i], default=0)
        stop = min([h for h in heads if h > i], default=len(lines))
        above = i
        while above > start + 1 and lines[above - 1].strip():
            above -= 1
        tables.append(
            {
                "line": i + 1,
                "header": _cells(lines[i]),
                "body": [_cells(row) for row in lines[i + 2 : end]],
                "heading": lines[start] if start in heads else "",
                "caption": "\n".join(lines[above:i]),
                "section": "\n".join(lines[start:stop]),
            }
        )
        i = end
    return tables


def _is_figure_table(table: dict) -> bool:
    """A figure table has body cells that are measured figures: at least one strong cell (a fraction
    with a unit, an exponent), or weak cells (an integer with a unit, a bare number under a header
    that names a unit or measurement) where the header row, the nearest heading or the caption names
    a measurement. So a table of defaults ("10 s", "2048") is not one, nor one of counts, prices or
    statuses; a table of timings, sizes, ratios, accuracies or |Δp| is."""
    header, body = table["header"], table["body"]
    strong = weak = False
    for row in body:
        for col, cell in enumerate(row):
            named = header[col] if col < len(header) else ""
            strong |= bool(_STRONG_CELL.match(cell))
            weak |= bool(_WEAK_CELL.match(cell)) or bool(_BARE_NUMBER.match(cell) and _MEASURED.search(named))
    context = " | ".join(header) + "\n" + table["heading"] + "\n" + table["caption"]
    return strong or (weak and bool(_MEASURED.search(context)))


def _commands(section: str) -> list[str]:
    spans = [a or b for a, b in _SPAN.findall(section)]
    lines = [line.strip() for span in spans for line in span.split("\n")]
    return [c for c in lines if _COMMAND.match(c)] + _SCRIPT_LINK.findall(section)


def _unsourced(table: dict) -> list[str]:
    """What a figure table's section lacks: a YYYY-MM-DD date, and the command that made it. The
    section is the text from the nearest heading above the table to the next heading, the table
    and its notes after it included; a subsection does not inherit its parent's."""
    missing = []
    if not _DATE.search(table["section"]):
        missing.append("date")
    if not _commands(table["section"]):
        missing.append("command")
    return missing


def _figure_tables(page: Path) -> list[dict]:
    key = lambda t: (page.name, t["header"][0])  # noqa: E731
    return [t for t in _tables(page.read_text(encoding="utf-8")) if _is_figure_table(t) and key(t) not in NOT_FIGURES]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_figure_table_names_its_date_and_command(page: Path) -> None:
    bare = [
        "line %d (%s): no %s" % (t["line"], t["heading"], " or ".join(missing))
        for t in _figure_tables(page)
        if (missing := _unsourced(t))
    ]
    assert bare == [], "%s has figure tables without their date or command" % page.name


def test_the_figure_table_detection_finds_the_figures() -> None:
    found = {page.name: len(_figure_tables(page)) for page in PAGES}
    assert found["benchmarks.md"] >= 7 and found["jobs.md"] >= 2 and found["artifacts-gate.md"] >= 2
    assert sum(found.values()) >= 15
    for page, table in NOT_FIGURES:
        assert any(t["header"][0] == table for t in _tables((ROOT / page).read_text(encoding="utf-8")))


def test_the_figure_table_detection_can_fail() -> None:
    bare = "## Speed\n\nSome prose.\n\n| shape | p50 |\n|---|---:|\n| 1q | 14.75 ms |\n\n## Next\n"
    sourced = bare.replace("Some prose.", "Measured 2026-12-01 with `python scripts/bench_handler.py`.")
    linked = bare.replace("Some prose.", "Measured 2026-12-01 with [the script](../scripts/bench_handler.py).")
    dated_only = bare.replace("Some prose.", "Measured 2026-12-01 with `bench_handler.py`.")
    after = bare.replace("14.75 ms |\n", "14.75 ms |\n\nFrom `make bench`, 2026-12-01.\n")
    elsewhere = "## Other\n\n`make bench`, 2026-12-01.\n\n" + bare
    (table,) = _tables(bare)
    assert _is_figure_table(table) and _unsourced(table) == ["date", "command"]
    assert _unsourced(_tables(sourced)[0]) == [] and _unsourced(_tables(linked)[0]) == []
    assert _unsourced(_tables(dated_only)[0]) == ["command"]
    assert _unsourced(_tables(after)[0]) == [] and _unsourced(_tables(elsewhere)[0]) == ["date", "command"]
    # Settings, counts, statuses and prices are not figure tables; a table in a code block is no table.
    settings = "## Settings\n\n| variable | default | what |\n|---|---|---|\n| `T` | 10 s | a timeout |\n"
    counts = "## Corpus\n\n| type | rows |\n|---|---:|\n| choice | 255 |\n"
    prices = "## Cost\n\n| item | cost |\n|---|---|\n| compute | **$9.40** |\n"
    fenced = "## Speed\n\n```\n| shape | p50 |\n|---|---:|\n| 1q | 14.75 ms |\n```\n"
    assert not any(_is_figure_table(t) for t in _tables(settings + counts + prices))
    assert _tables(fenced) == []
    # A weak cell counts where a header, heading or caption names a measurement.
    tiers = "## Tests\n\n| tier | how long |\n|---|---|\n| unit | 3 s |\n"
    limits = "## Limits\n\n| what | max |\n|---|---:|\n| a body | 64 KiB |\n"
    assert _is_figure_table(_tables(tiers)[0]) and not _is_figure_table(_tables(limits)[0])
