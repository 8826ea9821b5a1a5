"""docs/architecture.md's module maps are the packages as they are: every runtime and build-side module, with
its own first docstring line, and nothing that no longer exists."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_module_map_is_the_package_as_it_is() -> None:
    spec = importlib.util.spec_from_file_location("module_map", ROOT / "scripts" / "module_map.py")
    assert spec and spec.loader
    module_map = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module_map)
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert module_map.render() in page, "docs/architecture.md's module map is stale: python scripts/module_map.py"
    assert module_map.render_build() in page, "the build wing's module map is stale: python scripts/module_map.py"
