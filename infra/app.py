"""CDK entry point: `cdk synth` / `cdk deploy` from this folder (see the README's deploy section)."""

from __future__ import annotations

import sys

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from laya_infra.config import ConfigError, DeployConfig, refuse_unknown_context
from laya_infra.constants import STACK_NAME
from laya_infra.feature_flags import FEATURE_FLAGS
from laya_infra.gpu_config import GpuConfig, gpu_fields
from laya_infra.stack import LayaServerlessStack
from laya_infra.suppressions import nag_summary
from laya_serverless.configuration import declared
from laya_serverless.errors import SettingsError


def build_app(context: dict[str, object] | None = None, outdir: str | None = None) -> cdk.App:
    app = cdk.App(context={**FEATURE_FLAGS, **(context or {})}, outdir=outdir)
    known = [f.context for f in [*declared(DeployConfig).values(), *gpu_fields()] if f.context]
    refuse_unknown_context(app.node.get_all_context(), known)
    config = DeployConfig.from_context(app.node.try_get_context)
    gpu = GpuConfig.from_context(app.node.try_get_context)
    LayaServerlessStack(app, STACK_NAME, config, gpu=gpu, description="laya-serverless: Jev decision API on Lambda")
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app


if __name__ == "__main__":
    try:
        assembly = build_app().synth()
    except (ConfigError, SettingsError) as exc:  # the user's context: one line naming the flag, no traceback
        sys.exit("error: %s" % exc)
    print(nag_summary(assembly, STACK_NAME), file=sys.stderr)   # cdk-nag's run, visible
