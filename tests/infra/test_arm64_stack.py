"""`-c arch=arm64`: every function that runs the built package (API, jobs, deploy gate) runs the arm64 package
on arm64 with the runtime it was built and probed for (python3.13); the stdlib-only ones are arm64 already."""

from __future__ import annotations

from typing import Any

from laya_infra import constants as c
from laya_infra.config import DeployConfig
from laya_infra.deploy_gate import GATE_HANDLER

from .test_stack import resources

PACKAGE_HANDLERS = {c.HANDLER, c.JOBS_HANDLER, GATE_HANDLER}


def _python_functions(raw: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The template's Python functions (CDK's own custom-resource handlers run on Node) by handler."""
    found = [r["Properties"] for r in resources(raw, "AWS::Lambda::Function").values()
             if str(r["Properties"].get("Runtime", "")).startswith("python")]
    return {props["Handler"]: props for props in found}


def test_arm64_runs_the_arm64_package_with_its_runtime_on_every_function(synth, asset_dir) -> None:
    _, raw, _ = synth(arch="arm64", snapstart="true")
    functions = _python_functions(raw)
    assert PACKAGE_HANDLERS <= set(functions), sorted(functions)   # the deploy gate included
    for handler in PACKAGE_HANDLERS:
        props = functions[handler]
        assert props["Architectures"] == ["arm64"] and props["Runtime"] == "python3.13", handler
    assert functions[c.HANDLER]["SnapStart"] == {"ApplyOn": "PublishedVersions"}   # SnapStart runs on 3.13 too
    for handler, props in functions.items():   # the authorizer: stdlib only, always the cheaper arm64
        if handler not in PACKAGE_HANDLERS:
            assert props["Architectures"] == ["arm64"] and props["Runtime"] == c.PYTHON_RUNTIME, handler
    [layer] = resources(raw, "AWS::Lambda::LayerVersion").values()
    assert layer["Properties"]["CompatibleRuntimes"] == ["python3.13"]
    assert layer["Properties"]["CompatibleArchitectures"] == ["arm64"]
    # and the assets are the arm64 build's (the stub assets of both arches are alike, so ask the config)
    config = DeployConfig.from_context({"asset_dir": str(asset_dir), "arch": "arm64"}.get)
    assert config.layer_asset == asset_dir / "arm64" / "layer"
    assert config.function_asset == asset_dir / "arm64" / "function"


def test_the_runtimes_match_what_the_layer_builder_builds_for() -> None:
    from laya_artifacts.package.lambda_package import PYTHON_VERSIONS

    assert {arch: "python%s" % version for arch, version in PYTHON_VERSIONS.items()} == c.PACKAGE_RUNTIMES
