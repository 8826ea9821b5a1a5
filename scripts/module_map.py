"""Renders both wings' module maps in docs/architecture.md from the packages themselves (each module's first
docstring line): the runtime between the `modules:begin` / `modules:end` markers, the build wing between
`build-modules:begin` / `build-modules:end`; tests/unit/test_docs_architecture.py checks that the page holds
what this writes.

    python scripts/module_map.py          rewrite the block in docs/architecture.md
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "functions" / "laya_serverless"
BUILD_PACKAGE = ROOT / "artifacts" / "laya_artifacts"
PAGE = ROOT / "docs" / "architecture.md"
BEGIN, END = "<!-- modules:begin -->", "<!-- modules:end -->"
BUILD_BEGIN, BUILD_END = "<!-- build-modules:begin -->", "<!-- build-modules:end -->"


def _summary(path: Path) -> str:
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""


def render(package: Path = PACKAGE, begin: str = BEGIN, end: str = END) -> str:
    lines = [begin, "```"]
    groups = [package] + sorted(p for p in package.iterdir() if (p / "__init__.py").is_file())
    for group in groups:
        label = "%s/" % package.name if group == package else "  %s/" % group.name
        lines.append(label)
        for module in sorted(group.glob("*.py")):
            if module.name == "__init__.py":
                continue
            lines.append("    %-22s %s" % (module.stem, _summary(module)))
    lines += ["```", end]
    return "\n".join(lines)


def render_build() -> str:
    return render(BUILD_PACKAGE, BUILD_BEGIN, BUILD_END)


def _replaced(page: str, begin: str, end: str, block: str) -> str:
    head, _, rest = page.partition(begin)
    _, _, tail = rest.partition(end)
    return head + block + tail


def rewritten(page: str) -> str:
    return _replaced(_replaced(page, BEGIN, END, render()), BUILD_BEGIN, BUILD_END, render_build())


if __name__ == "__main__":
    PAGE.write_text(rewritten(PAGE.read_text(encoding="utf-8")), encoding="utf-8")
    sys.exit(0)
