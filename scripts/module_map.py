"""Renders the runtime's module map in docs/architecture.md from the package itself (each module's first
docstring line), between the `modules:begin` / `modules:end` markers; tests/unit/test_docs_architecture.py
checks that the page holds what this writes.

    python scripts/module_map.py          rewrite the block in docs/architecture.md
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "functions" / "laya_serverless"
PAGE = ROOT / "docs" / "architecture.md"
BEGIN, END = "<!-- modules:begin -->", "<!-- modules:end -->"


def _summary(path: Path) -> str:
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""


def render() -> str:
    lines = [BEGIN, "```"]
    groups = [PACKAGE] + sorted(p for p in PACKAGE.iterdir() if (p / "__init__.py").is_file())
    for group in groups:
        label = "laya_serverless/" if group == PACKAGE else "  %s/" % group.name
        lines.append(label)
        for module in sorted(group.glob("*.py")):
            if module.name == "__init__.py":
                continue
            lines.append("    %-22s %s" % (module.stem, _summary(module)))
    lines += ["```", END]
    return "\n".join(lines)


def rewritten(page: str) -> str:
    head, _, rest = page.partition(BEGIN)
    _, _, tail = rest.partition(END)
    return head + render() + tail


if __name__ == "__main__":
    PAGE.write_text(rewritten(PAGE.read_text(encoding="utf-8")), encoding="utf-8")
    sys.exit(0)
