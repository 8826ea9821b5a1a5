"""CDK entry point: `cdk synth` / `cdk deploy` from this folder (see the README's deploy section)."""

from __future__ import annotations

import sys

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from laya_infra.config import DeployConfig
from laya_infra.constants import FEATURE_FLAGS, STACK_NAME
from laya_infra.gpu_config import GpuConfig
from laya_infra.stack import LayaServerlessStack
from laya_infra.suppressions import nag_summary


def build_app(context: dict[str, object] | None = None, outdir: str | None = None) -> cdk.App:
    app = cdk.App(context={**FEATURE_FLAGS, **(context or {})}, outdir=outdir)
    config = DeployConfig.from_context(app.node.try_get_context)
    gpu = GpuConfig.from_context(app.node.try_get_context)
    LayaServerlessStack(app, STACK_NAME, config, gpu=gpu, description="laya-serverless: Jev decision API on Lambda")
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app


if __name__ == "__main__":
    print(nag_summary(build_app().synth(), STACK_NAME), file=sys.stderr)   # cdk-nag's run, visible
