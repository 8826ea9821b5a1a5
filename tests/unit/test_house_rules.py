"""The shape rules of the code base, checked statically: small modules and functions, no import cycle,
and a runtime package that never reaches the build side."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_ROOTS = {"laya_serverless": ROOT / "functions", "gateway_authorizer": ROOT / "functions",
                 "laya_artifacts": ROOT / "artifacts", "laya_infra": ROOT / "infra", "laya_training": ROOT / "training"}
MAX_MODULE_LINES, MAX_FUNCTION_LINES = 400, 80
BUILD_SIDE = ("torch", "transformers", "optimum", "onnx", "laya", "laya_artifacts", "laya_training", "safetensors")


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package, root in PACKAGE_ROOTS.items():
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """First-party modules `name` imports, at any depth of the file (lazy imports count too)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            targets = [base] + ["%s.%s" % (base, alias.name) for alias in node.names]
        else:
            continue
        out.update(t for t in targets if t in MODULES and t != name)
    return out


def test_the_rules_see_every_package() -> None:
    assert {"laya_serverless.http.app", "laya_serverless.core.decider", "laya_artifacts.build",
            "laya_infra.stack"} <= set(MODULES)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_modules_and_functions_stay_small(name: str) -> None:
    source = MODULES[name].read_text(encoding="utf-8")
    assert source.count("\n") <= MAX_MODULE_LINES, "%s has over %d lines" % (name, MAX_MODULE_LINES)
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            assert length <= MAX_FUNCTION_LINES, "%s.%s has %d lines" % (name, node.name, length)


def test_there_is_no_import_cycle() -> None:
    graph = {name: _imports(name, path) for name, path in MODULES.items()}
    # A package's __init__ importing its own submodules is how packages export names, not a cycle.
    for name in graph:
        graph[name] = {t for t in graph[name] if not (t.startswith(name + ".") and MODULES[name].name == "__init__.py")}
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                raise AssertionError("import cycle: %s" % " -> ".join(trail[trail.index(nxt):] + [nxt]))
            if nxt not in state:
                visit(nxt, trail + [nxt])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])


def test_the_runtime_package_never_imports_the_build_side() -> None:
    for name, path in MODULES.items():
        if not name.startswith("laya_serverless"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                for imported in names:
                    if node.__class__ is ast.ImportFrom and getattr(node, "level", 0):
                        continue
                    assert imported.split(".")[0] not in BUILD_SIDE, "%s imports %s" % (name, imported)
