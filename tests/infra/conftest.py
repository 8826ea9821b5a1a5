"""Synthesizes the CDK app in-process (no AWS calls, no Docker) once per module, with stub assets:
the template does not depend on what the function and layer folders hold, only that they exist."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

INFRA = Path(__file__).resolve().parents[2] / "infra"
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
if str(INFRA) not in sys.path:
    sys.path.insert(0, str(INFRA))


def stub_assets(root: Path) -> Path:
    for arch in ("x86_64", "arm64"):
        (root / arch / "function" / "laya_serverless").mkdir(parents=True, exist_ok=True)
        (root / arch / "function" / "laya_serverless" / "__init__.py").write_text("")
        (root / arch / "layer" / "python").mkdir(parents=True, exist_ok=True)
        (root / arch / "layer" / "python" / "placeholder.txt").write_text("stub layer for template tests\n")
    return root


@pytest.fixture(scope="module")
def asset_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return stub_assets(tmp_path_factory.mktemp("assets"))


@pytest.fixture(scope="module")
def synth(asset_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Any]:
    """`synth(**context)` -> (Template, the template as a dict, cloud assembly dir); cached per context."""
    from aws_cdk.assertions import Template

    from app import build_app
    from laya_infra.constants import STACK_NAME

    cache: dict[tuple, Any] = {}

    def run(**context: Any) -> Any:
        key = tuple(sorted(context.items()))
        if key not in cache:
            out = tmp_path_factory.mktemp("cdk.out")
            app = build_app({"asset_dir": str(asset_dir), **context}, outdir=str(out))
            app.synth()   # runs the cdk-nag plugin: an unacknowledged finding raises here
            raw = json.loads((out / ("%s.template.json" % STACK_NAME)).read_text())
            cache[key] = (Template.from_json(raw), raw, out)
        return cache[key]

    return run
