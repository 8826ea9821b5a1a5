"""The API function (runtime package + dependency layer, prebuilt by `laya-artifacts package`) and the
gateway's bearer authorizer."""

from __future__ import annotations

from aws_cdk import Annotations, Duration, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from laya_serverless import settings as env
from laya_serverless.configuration import declared, env_value

from . import constants as c
from .config import DeployConfig
from .operations import DeadLetters, live_alias, snap_start
from .storage import ApiKeySecret, ArtifactBucket
from .suppressions import RUNTIME, XRAY, acknowledge

_ARCH = {"x86_64": lambda_.Architecture.X86_64, "arm64": lambda_.Architecture.ARM_64}
# Lambda runs SnapStart on Python 3.12 and later (the CDK must be told for a runtime built by name).
_RUNTIME = lambda_.Runtime(c.PYTHON_RUNTIME, lambda_.RuntimeFamily.PYTHON, supports_inline_code=True,
                           supports_snap_start=True)


def package_runtime(arch: str) -> lambda_.Runtime:
    """The runtime of a function that runs the built package of `arch` (`constants.PACKAGE_RUNTIMES`)."""
    return lambda_.Runtime(c.PACKAGE_RUNTIMES[arch], lambda_.RuntimeFamily.PYTHON, supports_inline_code=True,
                           supports_snap_start=True)


def _log_group(scope: Construct, construct_id: str) -> logs.LogGroup:
    return logs.LogGroup(scope, construct_id, retention=logs.RetentionDays[c.LOG_RETENTION],
                         removal_policy=RemovalPolicy.RETAIN)   # as every log group (retention.py)


def _role(scope: Construct, construct_id: str, log_group: logs.LogGroup) -> iam.Role:
    """An execution role that may write to its own log group and nothing else (yet)."""
    role = iam.Role(scope, construct_id, assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    role.add_to_policy(iam.PolicyStatement(
        actions=["logs:CreateLogStream", "logs:PutLogEvents"],
        resources=[log_group.log_group_arn],   # the ARN CloudFormation returns already ends in :*
    ))
    return role


def encoded(**values: object) -> dict[str, str]:
    """The environment that reads back as these settings (by attribute name), through the table's own encoder."""
    table = {**declared(env.HttpSettings), **declared(env.ProtocolSettings), **declared(env.DeploymentSettings)}
    return env_value((table[name], value) for name, value in values.items())


def api_environment(config: DeployConfig, store_uri: str, secret: ApiKeySecret | None) -> dict[str, str]:
    """The function's environment, keyed by the names the runtime's `Settings` reads."""
    return encoded(
        store=store_uri, deployed=config.deployed, target=config.target, cache_dir=c.LAMBDA_CACHE_DIR,
        graph_in_memory=True,  # /tmp (512 MB, SnapStart or not) holds no checkpoint-sized FP32 graph
        jev_strict=config.jev_strict, jev_confidence=config.jev_confidence,
        # REST API events carry the resource path (prefix included, stage not): Mangum strips the
        # prefix; the public URL adds the stage, which is what the docs' links must start with.
        api_base_path=config.prefix or "/", root_path="/%s%s" % (config.stage, config.prefix),
        api_key_secret=secret.secret.secret_arn if secret is not None else None,
        # a new artifact is a new configuration, so a new version for the canary to shift to
        artifact_pins=config.artifact_pins or None)


class ApiFunction(Construct):
    """The function, and `alias`: its published version that the gateway invokes (SnapStart or provisioned)."""

    def __init__(self, scope: Construct, construct_id: str, config: DeployConfig, artifacts: ArtifactBucket,
                 secret: ApiKeySecret | None, dead_letters: DeadLetters | None = None) -> None:
        super().__init__(scope, construct_id)
        self.log_group = _log_group(self, "Logs")
        role = _role(self, "Role", self.log_group)
        self.layer = layer = lambda_.LayerVersion(
            self, "Dependencies",
            code=lambda_.Code.from_asset(str(config.layer_asset)),
            compatible_runtimes=[package_runtime(config.arch)],
            compatible_architectures=[_ARCH[config.arch]],
            description="onnxruntime, tokenizers, numpy, fastapi, mangum (manylinux, %s)" % config.arch,
        )
        self.function = lambda_.Function(
            self, "Function",
            runtime=package_runtime(config.arch),
            architecture=_ARCH[config.arch],
            handler=c.HANDLER,
            code=lambda_.Code.from_asset(str(config.function_asset)),
            layers=[layer],
            memory_size=config.memory_mb,
            timeout=Duration.seconds(config.timeout_s),
            reserved_concurrent_executions=config.reserved_concurrency,
            environment=api_environment(config, artifacts.store_uri, secret),
            role=role,
            log_group=self.log_group,
            # JSON platform logs carry initDurationMs, which the cold-start alarm reads.
            logging_format=lambda_.LoggingFormat.JSON,
            description="laya-serverless Jev API (artifacts fetched and verified at INIT)",
            tracing=lambda_.Tracing.ACTIVE,
            snap_start=snap_start(config),
        )
        if config.snapstart:   # the warning's condition holds by construction: the gateway invokes a published version
            Annotations.of(self.function).acknowledge_warning(
                "@aws-cdk/aws-lambda:snapStartRequirePublish", "the live alias is a published version (live_alias)")
        self.alias = live_alias(self, self.function, config)
        if dead_letters is not None:
            dead_letters.configure(self.function)
            dead_letters.configure(self.alias)
        for statement in artifacts.read_statements():
            role.add_to_policy(statement)
        acknowledge(self.function, RUNTIME)
        acknowledge(role, *artifacts.read_findings(), XRAY)
        if secret is not None:
            secret.grant_read(role)


class BearerAuthorizerFunction(Construct):
    """A small function that compares the Authorization header with the key in Secrets Manager."""

    def __init__(self, scope: Construct, construct_id: str, secret: ApiKeySecret,
                 dead_letters: DeadLetters | None = None) -> None:
        super().__init__(scope, construct_id)
        log_group = _log_group(self, "Logs")
        role = _role(self, "Role", log_group)
        self.function = lambda_.Function(
            self, "Function",
            runtime=_RUNTIME,
            architecture=lambda_.Architecture.ARM_64,   # stdlib + boto3 only: the cheaper architecture
            handler=c.AUTHORIZER_HANDLER,
            code=lambda_.Code.from_asset(str(c.AUTHORIZER_DIR), exclude=["__pycache__", "*.pyc"]),
            memory_size=c.AUTHORIZER_MEMORY_MB,
            timeout=Duration.seconds(c.AUTHORIZER_TIMEOUT_S),
            environment={env.API_KEY_SECRET: secret.secret.secret_arn},   # the name authorizer.py reads
            role=role,
            log_group=log_group,
            description="laya-serverless bearer authorizer",
            tracing=lambda_.Tracing.ACTIVE,
        )
        secret.grant_read(role)
        acknowledge(self.function, RUNTIME)
        acknowledge(role, XRAY)
        if dead_letters is not None:
            dead_letters.configure(self.function)
