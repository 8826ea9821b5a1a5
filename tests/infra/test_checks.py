"""cdk-nag, cfn-lint and the CDK CLI on the synthesized app."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import INFRA


@pytest.mark.parametrize("context", [{}, {"auth": "false", "prefix": "/laya"},
                                     {"artifact_bucket": "existing-artifacts", "arch": "arm64"}])
def test_cdk_nag_passes_with_every_finding_acknowledged(synth, context):
    _, raw, out = synth(**context)   # synth raises on any unacknowledged AwsSolutions error
    assert raw["Resources"]
    assert not (out / "validation-report.json").exists() or '"conclusion": "failure"' not in (
        out / "validation-report.json").read_text()


def test_cdk_nag_really_runs(asset_dir, tmp_path, monkeypatch):
    """Drop one acknowledgement and the synth must fail on exactly that rule."""
    import laya_infra.functions as functions
    from app import build_app

    real = functions.acknowledge
    monkeypatch.setattr(functions, "acknowledge",
                        lambda construct, *items: real(construct, *[i for i in items if i[0] != "AwsSolutions-L1"]))
    app = build_app({"asset_dir": str(asset_dir)}, outdir=str(tmp_path))
    with pytest.raises(RuntimeError, match=r"ValidationFailed(.|\n)*AwsSolutions-L1"):
        app.synth()


def test_cfn_lint_finds_nothing_but_w3005(synth):
    _, _, out = synth(prefix="/laya")
    template = out / "LayaServerless.template.json"
    cfn_lint = Path(sys.executable).parent / "cfn-lint"
    result = subprocess.run([str(cfn_lint), "--ignore-checks", "W3005", "--", str(template)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow  # needs the built Lambda package and the npm CLI (make test provides both)
def test_the_cdk_cli_synthesizes_the_built_package_offline(tmp_path):
    """`cdk synth` through the pinned npm CLI, running infra/app.py on the real Lambda package
    (`make test` installs the CLI and builds the package first)."""
    from laya_infra.constants import DEFAULT_ASSET_DIR

    cdk = INFRA / "node_modules" / ".bin" / "cdk"
    assert cdk.exists(), "the CDK CLI is not installed: run `npm ci --prefix infra` (make test does)"
    assert (DEFAULT_ASSET_DIR / "x86_64" / "layer").is_dir(), "no Lambda package: run `make layer` (make test does)"
    environment = dict(os.environ, PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]),
                       JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="20", CDK_DISABLE_VERSION_CHECK="1")
    result = subprocess.run([str(cdk), "synth", "--quiet", "--no-notices", "-o", str(tmp_path / "cdk.out"),
                             "-c", "prefix=/laya"],
                            cwd=INFRA, env=environment, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    # what the person running it reads: cdk-nag's verdict, and no warning (SnapStart's is acknowledged)
    assert "cdk-nag AwsSolutions checks: passed with no unacknowledged finding" in result.stderr
    assert "[Warning" not in result.stdout + result.stderr and "SnapStart" not in result.stdout + result.stderr
    assert "feature flags" not in result.stdout + result.stderr   # laya_infra/feature_flags.py sets them all
    template = json.loads((tmp_path / "cdk.out" / "LayaServerless.template.json").read_text())
    [layer] = [r for r in template["Resources"].values() if r["Type"] == "AWS::Lambda::LayerVersion"]
    assets = json.loads((tmp_path / "cdk.out" / "LayaServerless.assets.json").read_text())["files"]
    staged = [tmp_path / "cdk.out" / a["source"]["path"] for a in assets.values()]
    assert any((path / "python" / "onnxruntime").is_dir() for path in staged)   # the real layer was staged
    assert layer["Properties"]["CompatibleRuntimes"] == ["python3.12"]
