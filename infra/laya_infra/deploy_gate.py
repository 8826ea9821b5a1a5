"""The deploy-time gate: before the API serves an int8 artifact, replay its gate corpus on Lambda's own CPU.

A custom resource (the CDK's Provider framework, which speaks CloudFormation's response protocol) invokes
a function with the API function's architecture, memory (so its CPU share) and runtime package; it runs
`laya_serverless.gate.regate.handler` on every deployed (checkpoint, target) and writes a create-only record
under `gates/` when the gate passes on the int8 kernels it found. The Provider is asynchronous: onEvent starts
nothing, and its waiter state machine calls the same function (isComplete) every `GATE_POLL` until the replay is
whole, each call a step of at most 10 minutes (`gate.stepwise`), so a corpus longer than one invocation fits.
The API reads that record at load and serves the checkpoint's cpu-fp32 artifact, saying so in /health, when there is
none for its CPU. A failed gate leaves the deployment up on that fallback, unless `-c deploy_gate_strict=true` rolls
it back.

Limits: Lambda does not promise one CPU model per function, so an instance that lands on other int8
kernels than the gate's finds no record and falls back to FP32 (and says so); the whole gate must end within
CloudFormation's hour for a custom resource (`GATE_TOTAL`, 55 minutes, is the Provider's own limit).
"""

from __future__ import annotations

import json

from aws_cdk import CustomResource, Duration, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import custom_resources as cr
from constructs import Construct

from laya_serverless import settings as runtime

from .config import DeployConfig
from .functions import _ARCH, _log_group, _role, package_runtime
from .operations import DeadLetters
from .storage import GATES, ArtifactBucket
from .suppressions import RUNTIME, VENDED_LOGS_AND_TRACES, XRAY, acknowledge, prefix_rule

GATE_HANDLER = "laya_serverless.gate.regate.handler"
STEP_MARKER = "LayaGateStep"  # regate.STEP_MARKER, kept here so that synth never imports onnxruntime (tested equal)
GATE_TIMEOUT = Duration.minutes(15)  # Lambda's limit; the Provider framework waits as long
GATE_POLL = Duration.seconds(30)  # between two steps
GATE_TOTAL = Duration.minutes(55)  # within CloudFormation's one hour for a custom resource
GOLDENS_PREFIX = "goldens/"


def is_int8_target(target: str) -> bool:
    return "int8" in target


class DeployGate(Construct):
    def __init__(self, scope: Construct, construct_id: str, config: DeployConfig, artifacts: ArtifactBucket,
                 layer: lambda_.ILayerVersion, dead_letters: DeadLetters) -> None:
        super().__init__(scope, construct_id)
        log_group = _log_group(self, "Logs")
        role = _role(self, "Role", log_group)
        self.function = lambda_.Function(
            self, "Function", runtime=package_runtime(config.arch), architecture=_ARCH[config.arch],
            handler=GATE_HANDLER,
            code=lambda_.Code.from_asset(str(config.function_asset)), layers=[layer],
            memory_size=config.memory_mb, timeout=GATE_TIMEOUT, role=role, log_group=log_group,
            logging_format=lambda_.LoggingFormat.JSON, tracing=lambda_.Tracing.ACTIVE,
            description="laya-serverless deploy gate: replays the gate corpus on this CPU before int8 serves")
        prefix = config.artifact_prefix
        reads = artifacts.read_statements()
        findings = artifacts.read_findings()
        gates = artifacts.prefix_finding(GATES, "gate records are named by artifact id and CPU class")
        if gates not in findings:  # an int8 target's read grant has these already; the gate always needs them
            reads.append(artifacts.list_statement(GATES))
            findings.append(gates)
        for statement in (
            *reads,
            iam.PolicyStatement(actions=["s3:GetObject"],
                                resources=[artifacts.bucket.arn_for_objects("%s/%s*" % (prefix, GOLDENS_PREFIX))]),
            # create-only records are written with If-None-Match; reading one says it is already there
            iam.PolicyStatement(actions=["s3:GetObject", "s3:PutObject"],
                                resources=[artifacts.bucket.arn_for_objects("%s/%s*" % (prefix, GATES))]),
        ):
            role.add_to_policy(statement)
        acknowledge(self.function, RUNTIME)
        acknowledge(role, *findings,
                    artifacts.prefix_finding(GOLDENS_PREFIX, "goldens are content-addressed: known after publishing"),
                    XRAY)
        # the framework function's logs expire like the stack's others (CDK's own group for it keeps two years)
        provider = cr.Provider(self, "Provider", on_event_handler=self.function, is_complete_handler=self.function,
                               query_interval=GATE_POLL, total_timeout=GATE_TOTAL,
                               log_group=_log_group(self, "ProviderLogs"), disable_waiter_state_machine_logging=False,
                               waiter_state_machine_log_options=cr.LogOptions(
                                   destination=_log_group(self, "WaiterLogs"), level=sfn.LogLevel.ALL,
                                   include_execution_data=False))  # no data: the events carry the store's URI
        # Both are invoked synchronously (CloudFormation -> framework -> gate); async failures would still land
        # in the stack's dead-letter queue, like every function's.
        framework = [f for f in provider.node.find_all() if isinstance(f, lambda_.Function)]
        for function in [self.function, *framework]:
            dead_letters.configure(function)
        for function in framework:  # traced like every function of the stack (the Provider has no flag for it)
            cfn = function.node.default_child
            assert isinstance(cfn, lambda_.CfnFunction)
            cfn.add_property_override("TracingConfig.Mode", "Active")
            function.add_to_role_policy(iam.PolicyStatement(
                actions=["xray:PutTraceSegments", "xray:PutTelemetryRecords"], resources=["*"]))
        self._trace_waiter(provider)
        stack = Stack.of(self)
        gate_id = stack.get_logical_id(self.function.node.default_child)  # type: ignore[arg-type]
        waits_on = [stack.get_logical_id(f.node.default_child) for f in framework  # type: ignore[arg-type]
                    if "onEvent" not in f.node.id]  # the waiter invokes isComplete and onTimeout
        acknowledge(provider, *[prefix_rule("<%s.Arn>:*" % name, "The Provider's waiter state machine invokes its "
                                            "isComplete and onTimeout functions; the :* covers their versions only")
                                for name in waits_on], VENDED_LOGS_AND_TRACES, (
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]",
            "The CDK Provider framework's own function writes its logs with the basic execution role"), (
            "AwsSolutions-IAM5[Resource::<%s.Arn>:*]" % gate_id,
            "The Provider framework invokes the gate function; the :* covers that function's versions only"), XRAY)
        pins: dict[str, str] = runtime.fields()["artifact_pins"].parse(config.artifact_pins) \
            if config.artifact_pins else {}  # type: ignore[assignment]
        pairs = [{"checkpoint": name, "target": config.target,
                  **({"artifact": pins[pin]} if (pin := "%s/%s" % (name, config.target)) in pins else {})}
                 for name in config.checkpoints]
        # CloudFormation runs it on create and whenever these change: a new function asset, or a new pinned artifact
        # (`laya-artifacts deploy` pins what it published); otherwise run its steps by hand (docs/operations.md).
        self.properties = {"Store": artifacts.store_uri, "Artifacts": pairs,
                           "Strict": str(config.deploy_gate_strict).lower()}
        self.resource = CustomResource(self, "Gate", service_token=provider.service_token, properties=self.properties)

    @staticmethod
    def _trace_waiter(provider: cr.Provider) -> None:
        """The waiter state machine traced like the jobs engine (the Provider has no flag for it)."""
        [waiter] = [m for m in provider.node.find_all() if isinstance(m, sfn.CfnStateMachine)]
        waiter.tracing_configuration = sfn.CfnStateMachine.TracingConfigurationProperty(enabled=True)
        [role] = [r for r in provider.node.find_all() if isinstance(r, iam.Role) and "waiter" in r.node.path]
        role.add_to_policy(iam.PolicyStatement(actions=["xray:PutTraceSegments", "xray:PutTelemetryRecords",
                                                        "xray:GetSamplingRules", "xray:GetSamplingTargets"],
                                               resources=["*"]))

    def invoke_payload(self) -> str:
        """The event of one step by hand (aws lambda invoke --payload <this>, again until IsComplete is true)."""
        return json.dumps({"RequestType": "Update", "ResourceProperties": self.properties,
                           "Data": {STEP_MARKER: "Update"}}, sort_keys=True)
