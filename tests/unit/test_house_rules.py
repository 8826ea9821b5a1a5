"""The shape rules of the code base, checked statically: small modules and functions, no import cycle,
and a runtime package that never reaches the build side."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_ROOTS = {"laya_serverless": ROOT / "functions", "gateway_authorizer": ROOT / "functions",
                 "laya_artifacts": ROOT / "artifacts", "laya_infra": ROOT / "infra", "laya_training": ROOT / "research"}
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


# The runtime's floors, top to bottom (docs/architecture.md). A module imports only from its own floor or
# lower ones; `http/` and `jobs/` share a floor and never import each other (they meet in `protocol/`). The
# edges (Lambda, local) sit on top; `assembly/` loads the deployment for the transports; `settings` sits just
# above `core/`: every floor above receives it.
FLOORS: list[tuple[str, tuple[str, ...]]] = [
    ("entry", ("laya_serverless.lambda_edge", "laya_serverless.local_edge", "laya_serverless.gate.regate")),
    ("transport", ("laya_serverless.http", "laya_serverless.jobs")),
    ("assembly", ("laya_serverless.assembly",)),
    ("protocol", ("laya_serverless.protocol", "laya_serverless.gate")),
    ("settings", ("laya_serverless.settings",)),
    ("core", ("laya_serverless.core",)),
    ("artifact", ("laya_serverless.artifact",)),
    ("base", ("laya_serverless.errors", "laya_serverless.observe", "laya_serverless.configuration",
              "laya_serverless.command")),
]


def _floor(name: str, floors: list[tuple[str, tuple[str, ...]]] | None = None) -> tuple[int, str]:
    """(depth, the longest prefix naming `name`'s floor) among `floors` (the runtime's by default); 0 is the top."""
    floors = FLOORS if floors is None else floors
    best: tuple[int, str] | None = None
    for depth, (_floor_name, prefixes) in enumerate(floors):
        for prefix in prefixes:
            if (name == prefix or name.startswith(prefix + ".")) and (best is None or len(prefix) > len(best[1])):
                best = (depth, prefix)
    assert best is not None, "%s is on no floor; add it to its wing's floors" % name
    return best


def _runtime_edges() -> list[tuple[str, str]]:
    runtime = {n: p for n, p in MODULES.items() if n.startswith("laya_serverless.")}  # the package face is exempt
    return [(a, b) for a, path in runtime.items() for b in sorted(_imports(a, path)) if b in runtime]


def test_no_runtime_module_imports_a_floor_above_it() -> None:
    upward = ["%s (%s) -> %s (%s)" % (a, FLOORS[_floor(a)[0]][0], b, FLOORS[_floor(b)[0]][0])
              for a, b in _runtime_edges() if _floor(b)[0] < _floor(a)[0]]
    assert upward == []


def test_http_and_jobs_never_import_each_other() -> None:
    def side(name: str) -> str | None:
        prefix = _floor(name)[1]
        return prefix.rsplit(".", 1)[-1] if prefix in ("laya_serverless.http", "laya_serverless.jobs") else None

    crossing = ["%s -> %s" % (a, b) for a, b in _runtime_edges() if side(a) and side(b) and side(a) != side(b)]
    assert crossing == []


def test_the_floors_rule_sees_an_upward_arrow() -> None:
    assert _floor("laya_serverless.core.decider")[0] > _floor("laya_serverless.assembly.loader")[0]
    assert _floor("laya_serverless.gate.regate")[1] == "laya_serverless.gate.regate"  # an entry point in gate/


# The build wing's floors, top to bottom (docs/architecture.md, "The build wing"). The commands stand on top;
# `build` composes the stages below it; a stage imports only from its own subpackage or lower floors, and two
# subpackages that share a floor never import each other.
BUILD_FLOORS: list[tuple[str, tuple[str, ...]]] = [
    ("commands", ("laya_artifacts.cli", "laya_artifacts.quickstart", "laya_artifacts.bench",
                  "laya_artifacts.deploy.command", "laya_artifacts.deploy.commands",
                  "laya_artifacts.tune.commands")),
    ("build", ("laya_artifacts.build",)),
    ("spec", ("laya_artifacts.spec",)),
    ("qat", ("laya_artifacts.qat",)),
    ("stages", ("laya_artifacts.search", "laya_artifacts.deploy", "laya_artifacts.tune")),
    ("package", ("laya_artifacts.package",)),
    ("graphs", ("laya_artifacts.export", "laya_artifacts.goldens")),
    ("checkpoints", ("laya_artifacts.checkpoints",)),
    ("base", ("laya_artifacts.errors", "laya_artifacts.paths")),
]
MAX_BUILD_ROOT_MODULES = 10


def _build_floor(name: str) -> tuple[int, str]:
    return _floor(name, BUILD_FLOORS)


def _build_edges() -> list[tuple[str, str]]:
    wing = {n: p for n, p in MODULES.items() if n.startswith("laya_artifacts.")}  # the package face is exempt
    return [(a, b) for a, path in wing.items() for b in sorted(_imports(a, path)) if b in wing]


def test_no_build_module_imports_a_floor_above_it() -> None:
    upward = ["%s (%s) -> %s (%s)" % (a, BUILD_FLOORS[_build_floor(a)[0]][0], b, BUILD_FLOORS[_build_floor(b)[0]][0])
              for a, b in _build_edges() if _build_floor(b)[0] < _build_floor(a)[0]]
    assert upward == []


def test_stages_on_one_floor_never_import_each_other() -> None:
    crossing = ["%s -> %s" % (a, b) for a, b in _build_edges()
                if _build_floor(a)[0] == _build_floor(b)[0] and _build_floor(a)[1] != _build_floor(b)[1]
                and len(BUILD_FLOORS[_build_floor(a)[0]][1]) > 1 and _build_floor(a)[0] != 0]
    assert crossing == []


def test_the_build_wing_keeps_its_root_small_and_its_stages_in_subpackages() -> None:
    root = ROOT / "artifacts" / "laya_artifacts"
    modules = sorted(p.stem for p in root.glob("*.py") if p.name != "__init__.py")
    assert len(modules) <= MAX_BUILD_ROOT_MODULES, modules
    assert {"checkpoints", "goldens", "export", "search", "qat", "package", "deploy", "tune", "bench"} <= {
        p.name for p in root.iterdir() if (p / "__init__.py").is_file()}


def test_the_build_floors_rule_sees_an_upward_arrow() -> None:
    assert _build_floor("laya_artifacts.export.onnx_export")[0] > _build_floor("laya_artifacts.search.precision")[0]
    assert _build_floor("laya_artifacts.deploy.command")[0] == 0 < _build_floor("laya_artifacts.deploy.publish")[0]


def test_no_runtime_file_name_occurs_twice() -> None:
    """A name says which module it is: no two runtime modules share a file name (package faces aside)."""
    names = [path.name for path in (ROOT / "functions" / "laya_serverless").rglob("*.py") if path.name != "__init__.py"]
    assert sorted({n for n in names if names.count(n) > 1}) == []


def _aws_cdk_dir() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("aws_cdk")  # finds it without importing it (jsii starts node on import)
    assert spec is not None and spec.submodule_search_locations
    return Path(next(iter(spec.submodule_search_locations)))


def _aws_cdk_modules_imported() -> set[str]:
    """The aws_cdk modules the checked packages import (`from aws_cdk import aws_s3` names one; `Duration` none)."""
    root = _aws_cdk_dir().parent
    found = set()
    for path in MODULES.values():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name.split(".")[0] == "aws_cdk")
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "aws_cdk":
                package = root / (node.module or "").replace(".", "/")
                found.add(node.module or "")
                found.update("%s.%s" % (node.module, a.name) for a in node.names
                             if (package / a.name).is_dir() or (package / (a.name + ".py")).is_file())
    return found


def _mypy_aws_cdk_overrides() -> tuple[set[str], set[str]]:
    """(followed, skipped) aws_cdk module patterns of pyproject.toml's mypy overrides."""
    import tomllib

    overrides = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]["overrides"]
    followed = {m for o in overrides if o.get("follow_imports") == "normal" for m in o["module"]}
    skipped = {m for o in overrides if o.get("follow_imports") == "skip" for m in o["module"]}
    return {m for m in followed if m.startswith("aws_cdk")}, skipped


def test_mypy_follows_every_aws_cdk_module_the_packages_import() -> None:
    """mypy skips aws_cdk's service modules (pyproject.toml) but for those listed; an unlisted import would be Any."""
    followed, skipped = _mypy_aws_cdk_overrides()
    imported = _aws_cdk_modules_imported()
    assert {"aws_cdk", "aws_cdk.aws_lambda", "aws_cdk.aws_iam"} <= imported and "aws_cdk.Duration" not in imported
    assert "aws_cdk.*" in skipped
    assert sorted(imported - followed) == []


_ALIAS = re.compile(r"^\s*import (aws_cdk[\w.]*) as (\w+)$", re.MULTILINE)
_CLASS_BASES = re.compile(r"^class \w+\(([^)]*)\)", re.MULTILINE)


def _base_class_modules(module: str) -> set[str]:
    """The aws_cdk modules `module`'s classes derive from. jsii writes `import aws_cdk.aws_ec2 as _aws_ec2_09840e12`
    and `class IFunction(_aws_ec2_09840e12.IConnectable, ...)`; read as text (ast takes seconds a module)."""
    path = _aws_cdk_dir().parent / module.replace(".", "/")
    source = (path / "__init__.py" if path.is_dir() else path.with_suffix(".py")).read_text(encoding="utf-8")
    aliases = {alias: name for name, alias in _ALIAS.findall(source)}
    return {aliases[alias] for bases in _CLASS_BASES.findall(source)
            for alias in re.findall(r"(\w+)\.\w+", bases) if alias in aliases}


def test_mypy_follows_the_bases_of_every_followed_aws_cdk_class_and_nothing_else() -> None:
    """A followed class with a skipped base would accept any attribute; a module neither imported nor a base
    is analysed for nothing."""
    followed, _skipped = _mypy_aws_cdk_overrides()
    needed, todo = set(_aws_cdk_modules_imported()), list(_aws_cdk_modules_imported())
    while todo:
        for base in _base_class_modules(todo.pop()) - needed:
            needed.add(base)
            todo.append(base)
    assert "aws_cdk.aws_ec2" in needed   # lambda_.IFunction is an ec2.IConnectable
    assert sorted(needed - followed) == [] and sorted(followed - needed) == []


# Where a `LAYA_*` name may be spelled: the declarations (settings), and code that cannot import them.
LAYA_NAME_HOMES = {
    "laya_serverless.settings": "the table: every variable declared once",
    "laya_serverless.configuration": "the table's machinery (its docs name the prefix)",
    "laya_serverless.core.cpu_share": "below the settings floor: /health's label of where the thread count came from",
    "gateway_authorizer.authorizer": "ships alone, stdlib only: it cannot import the runtime",
}


def _writes_the_environment(node: ast.AST) -> bool:
    def is_environ(expr: ast.AST) -> bool:
        return isinstance(expr, ast.Attribute) and expr.attr == "environ" and isinstance(expr.value, ast.Name) \
            and expr.value.id == "os"
    if isinstance(node, ast.Assign | ast.AugAssign | ast.Delete):
        targets = node.targets if isinstance(node, ast.Assign | ast.Delete) else [node.target]
        return any(isinstance(t, ast.Subscript) and is_environ(t.value) for t in targets)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return (node.func.attr in ("setdefault", "update", "pop", "clear") and is_environ(node.func.value)) or (
            node.func.attr == "putenv" and isinstance(node.func.value, ast.Name) and node.func.value.id == "os")
    return False


def test_configuration_is_read_from_the_table_never_written_to_the_environment() -> None:
    """Edges and benches hand a mapping (`Settings.from_environ(environ)`, `main(argv, environ)`); no product
    module writes `os.environ`, and a `LAYA_*` name is spelled only where it is declared."""
    written, spelled = [], []
    for name, path in MODULES.items():
        if name.split(".")[0] == "laya_training":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if _writes_the_environment(node):
                written.append("%s:%d" % (name, getattr(node, "lineno", 0)))
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and re.fullmatch(r"LAYA_[A-Z_]+",
                                                                                               node.value):
                if name not in LAYA_NAME_HOMES:
                    spelled.append("%s: %s" % (name, node.value))
    assert written == [] and spelled == []


def test_the_environment_rule_sees_a_write() -> None:
    assert _writes_the_environment(ast.parse("os.environ['LAYA_X'] = '1'").body[0])
    assert _writes_the_environment(ast.parse("os.environ.setdefault('A', 'b')").body[0].value)  # type: ignore[attr-defined]
    assert not _writes_the_environment(ast.parse("os.environ.get('A')").body[0].value)  # type: ignore[attr-defined]
