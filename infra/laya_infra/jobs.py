"""Batch jobs on AWS: the jobs function (same layer and asset, its own handler), a Step Functions Standard
state machine running a Distributed Map over each job's shard manifest in S3, and an SQS dead-letter
queue with an alarm on its depth. Why Step Functions rather than SQS + an event source mapping is
written down in docs/jobs.md.

    Shards (Map, DISTRIBUTED; items read from jobs/<id>/manifest.json, one shard a child; Standard children)
      Answer    the jobs function on one shard; retried with backoff
      catch ->  DeadLetter (the batch and its error to the DLQ) -> GiveUp (error lines, so the job ends)
    Finish      the jobs function merges the results and ends the job, even when the map itself failed
"""

from __future__ import annotations

import json
from typing import Any

from aws_cdk import ArnFormat, CfnElement, Duration, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from laya_serverless import settings as env
from laya_serverless.jobs import stepfunctions as task
from laya_serverless.jobs.store_keys import INPUT_PREFIX, JOBS_PREFIX, OUTPUT_PREFIX

from . import constants as c
from .config import DeployConfig
from .functions import _ARCH, _RUNTIME, _log_group, _role, api_environment
from .storage import ArtifactBucket
from .suppressions import (
    DLQ_IS_THE_DLQ,
    JOBS_OBJECTS,
    LAMBDA_VERSIONS,
    RUNTIME,
    STATES_EXECUTIONS,
    VENDED_LOGS_AND_TRACES,
    XRAY,
    acknowledge,
    prefix_rule,
)

_LAMBDA_ERRORS = ["Lambda.ServiceException", "Lambda.AWSLambdaException", "Lambda.SdkClientException",
                  "Lambda.TooManyRequestsException", "Lambda.Unknown"]


def _retry(errors: list[str], attempts: int) -> dict[str, Any]:
    return {"ErrorEquals": errors, "IntervalSeconds": 2, "BackoffRate": 2.0, "MaxAttempts": attempts,
            "JitterStrategy": "FULL"}


def _invoke(payload: dict[str, Any], **state: Any) -> dict[str, Any]:
    return {"Type": "Task", "Resource": "arn:aws:states:::lambda:invoke", "OutputPath": "$.Payload",
            "Parameters": {"FunctionName": "${JobsFunction}", "Payload": payload},
            "Retry": [_retry(_LAMBDA_ERRORS, 3)], **state}


def definition(config: DeployConfig) -> dict[str, Any]:
    """The state machine, in Amazon States Language; `${...}` are CDK definition substitutions."""
    batch = {task.JOB + ".$": "$." + task.JOB, task.ITEMS + ".$": "$." + task.ITEMS}
    answer = _invoke({task.ACTION: task.ANSWER, **batch}, End=True,
                     Catch=[{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "DeadLetter"}])
    answer["Retry"].append(_retry(["States.ALL"], c.JOBS_TASK_RETRIES))  # our ShardFailed, timeouts: backoff
    processor = {
        # Standard children: a batch's tries can outlast Express's 5-minute cap, and each runs exactly once.
        "ProcessorConfig": {"Mode": "DISTRIBUTED", "ExecutionType": "STANDARD"},
        "StartAt": "Answer",
        "States": {
            "Answer": answer,
            "DeadLetter": {"Type": "Task", "Resource": "arn:aws:states:::sqs:sendMessage", "ResultPath": None,
                           "Parameters": {"QueueUrl": "${DeadLetterQueue}", "MessageBody.$": "$"},
                           "Retry": [_retry(["States.ALL"], 3)], "Next": "GiveUp"},
            "GiveUp": _invoke({task.ACTION: task.GIVE_UP, **batch, task.ERROR + ".$": "$.error",
                               task.ATTEMPTS: c.JOBS_TASK_RETRIES + 1}, End=True),
        },
    }
    return {
        "Comment": "laya-serverless batch job: answer every shard of jobs/<id>/manifest.json, then end the job",
        "StartAt": "Shards",
        "States": {
            "Shards": {
                "Type": "Map",
                "ItemReader": {"Resource": "arn:aws:states:::s3:getObject", "ReaderConfig": {"InputType": "JSON"},
                               "Parameters": {"Bucket": "${Bucket}", "Key.$": "$." + task.MANIFEST}},
                # One shard a child, no ItemBatcher: shards are planned at the worker's whole budget already, so
                # batching would only make them smaller (and no interpreter we can test with parses it). The
                # item is wrapped as a one-shard batch, the jobs function's task shape.
                "ItemSelector": {task.JOB + ".$": "$." + task.JOB,
                                 task.ITEMS + ".$": "States.Array($$.Map.Item.Value)"},
                "MaxConcurrency": config.jobs_concurrency,
                # A failed shard is given up as error lines; the job goes on. A float: the API's type.
                "ToleratedFailurePercentage": 100.0,
                "ItemProcessor": processor,
                "ResultWriter": {"Resource": "arn:aws:states:::s3:putObject",
                                 "Parameters": {"Bucket": "${Bucket}", "Prefix.$": "$." + task.MAP_RESULTS}},
                "ResultPath": None,
                "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "Finish"}],
                "Next": "Finish",
            },
            "Finish": _invoke({task.ACTION: task.FINISH, task.JOB + ".$": "$." + task.JOB,
                               task.ERROR + ".$": "$.error"}, End=True),
        },
    }


def jobs_environment(config: DeployConfig, artifacts: ArtifactBucket, state_machine_arn: str) -> dict[str, str]:
    """What the jobs function reads: the API's deployment settings, the engine, and how to size shards."""
    environment = {k: v for k, v in api_environment(config, artifacts.store_uri, None).items()
                   if k not in (env.API_BASE_PATH, env.ROOT_PATH)}
    environment.update({env.JOBS_STATE_MACHINE: state_machine_arn,
                        **shard_sizing(config)})
    return environment


def shard_sizing(config: DeployConfig) -> dict[str, str]:
    """A shard is planned at a share of the worker's timeout (one shard an invocation), at the worker's
    measured speed; the API function splits jobs with the same numbers."""
    budget = config.jobs_timeout_s * c.JOBS_BUDGET_SHARE
    return {env.JOBS_TIME_BUDGET: "%g" % budget,
            env.JOBS_TOKEN_RATE: str(config.token_rate * config.jobs_threads)}


class JobsEngine(Construct):
    def __init__(self, scope: Construct, construct_id: str, config: DeployConfig, artifacts: ArtifactBucket,
                 layer: lambda_.ILayerVersion) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.config, self.artifacts = config, artifacts
        self.state_machine_name = "%s-jobs" % stack.stack_name
        # Named, so the roles can name it before it exists (its own role may start its map's children).
        self.state_machine_arn = stack.format_arn(service="states", resource="stateMachine",
                                                  resource_name=self.state_machine_name,
                                                  arn_format=ArnFormat.COLON_RESOURCE_NAME)
        self.dead_letters = sqs.Queue(self, "DeadLetters", encryption=sqs.QueueEncryption.SQS_MANAGED,
                                      enforce_ssl=True, retention_period=Duration.days(c.JOBS_DLQ_RETENTION_DAYS))
        acknowledge(self.dead_letters, DLQ_IS_THE_DLQ)
        self.function = self._function(config, artifacts, layer)
        self.state_machine = self._state_machine(config, artifacts)
        self.alarm = self.dead_letters.metric_approximate_number_of_messages_visible(
            period=Duration.minutes(5), statistic="Maximum").create_alarm(
            self, "DeadLettersAlarm", threshold=1, evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description="A job shard batch or a direct job submission ended in the jobs dead-letter queue")

    def _function(self, config: DeployConfig, artifacts: ArtifactBucket,
                  layer: lambda_.ILayerVersion) -> lambda_.Function:
        log_group = _log_group(self, "Logs")
        role = _role(self, "Role", log_group)
        function = lambda_.Function(
            self, "Function", runtime=_RUNTIME, architecture=_ARCH[config.arch], handler=c.JOBS_HANDLER,
            code=lambda_.Code.from_asset(str(config.function_asset)), layers=[layer],
            memory_size=config.jobs_memory_mb, timeout=Duration.seconds(config.jobs_timeout_s),
            environment=jobs_environment(config, artifacts, self.state_machine_arn), role=role, log_group=log_group,
            logging_format=lambda_.LoggingFormat.JSON,
            description="laya-serverless jobs: Step Functions shard tasks and direct async job submissions",
            tracing=lambda_.Tracing.ACTIVE)
        function.configure_async_invoke(retry_attempts=c.JOBS_ASYNC_RETRIES,
                                        max_event_age=Duration.seconds(c.JOBS_EVENT_AGE_S),
                                        on_failure=destinations.SqsDestination(self.dead_letters))
        for statement in [*artifacts.read_statements(), *self.job_statements(), self._start_statement()]:
            role.add_to_policy(statement)
        acknowledge(function, RUNTIME)
        acknowledge(role, *artifacts.read_findings(), self.jobs_objects_finding(), XRAY)
        return function

    def job_statements(self) -> list[iam.PolicyStatement]:
        """Read and write under the store's jobs/ prefix, and list only there (a missing key is then a 404)."""
        prefix = "%s/%s" % (self.config.artifact_prefix, JOBS_PREFIX)
        return [
            iam.PolicyStatement(actions=["s3:GetObject", "s3:PutObject"],
                                resources=[self.artifacts.bucket.arn_for_objects(prefix + "*")]),
            iam.PolicyStatement(actions=["s3:ListBucket"], resources=[self.artifacts.bucket.bucket_arn],
                                conditions={"StringLike": {"s3:prefix": [prefix + "*"]}}),
        ]

    def _start_statement(self) -> iam.PolicyStatement:
        return iam.PolicyStatement(actions=["states:StartExecution"], resources=[self.state_machine_arn])

    def jobs_objects_finding(self) -> tuple[str, str]:
        return self.artifacts.prefix_finding(JOBS_PREFIX, JOBS_OBJECTS)

    def _state_machine(self, config: DeployConfig, artifacts: ArtifactBucket) -> sfn.StateMachine:
        stack = Stack.of(self)
        prefix = "%s/%s" % (config.artifact_prefix, JOBS_PREFIX)
        executions = stack.format_arn(service="states", resource="execution", resource_name=self.state_machine_name
                                      + ":*", arn_format=ArnFormat.COLON_RESOURCE_NAME)
        role = iam.Role(self, "EngineRole", assumed_by=iam.ServicePrincipal("states.amazonaws.com"))
        for statement in (
            iam.PolicyStatement(actions=["lambda:InvokeFunction"],
                                resources=[self.function.function_arn, self.function.function_arn + ":*"]),
            iam.PolicyStatement(actions=["sqs:SendMessage"], resources=[self.dead_letters.queue_arn]),
            iam.PolicyStatement(actions=["s3:GetObject", "s3:PutObject", "s3:ListMultipartUploadParts",
                                         "s3:AbortMultipartUpload"],
                                resources=[artifacts.bucket.arn_for_objects(prefix + "*")]),
            iam.PolicyStatement(actions=["states:StartExecution"], resources=[self.state_machine_arn]),
            iam.PolicyStatement(actions=["states:DescribeExecution", "states:StopExecution",
                                         "states:RedriveExecution"], resources=[executions]),
        ):
            role.add_to_policy(statement)
        log_group = logs.LogGroup(self, "EngineLogs", retention=logs.RetentionDays[c.LOG_RETENTION],
                                  log_group_name="/aws/vendedlogs/states/%s" % self.state_machine_name)
        machine = sfn.StateMachine(
            self, "StateMachine", state_machine_name=self.state_machine_name,
            state_machine_type=sfn.StateMachineType.STANDARD,
            definition_body=sfn.DefinitionBody.from_string(json.dumps(definition(config), indent=1)),
            definition_substitutions={"JobsFunction": self.function.function_arn,
                                      "DeadLetterQueue": self.dead_letters.queue_url,
                                      "Bucket": artifacts.bucket.bucket_name},
            role=role, tracing_enabled=True,
            logs=sfn.LogOptions(destination=log_group, level=sfn.LogLevel.ALL, include_execution_data=False))
        function = self.function.node.default_child
        assert isinstance(function, CfnElement)
        acknowledge(role, artifacts.prefix_finding(JOBS_PREFIX, JOBS_OBJECTS), VENDED_LOGS_AND_TRACES,
                    prefix_rule("<%s.Arn>:*" % stack.get_logical_id(function), LAMBDA_VERSIONS),
                    prefix_rule("arn:<AWS::Partition>:states:<AWS::Region>:<AWS::AccountId>:execution:%s:*"
                                % self.state_machine_name, STATES_EXECUTIONS))
        return machine

    def connect_api(self, function: lambda_.Function, api_timeout_s: int, api_threads: int) -> None:
        """The API function submits jobs (store writes under jobs/, one StartExecution) and refuses a /batch
        that cannot finish in its timeout, pointing to /v1/jobs."""
        for statement in [*self.job_statements(), self._start_statement()]:
            function.add_to_role_policy(statement)
        sync = {env.JOBS_STATE_MACHINE: self.state_machine_arn,
                env.BATCH_TIME_BUDGET: str(max(1, api_timeout_s - c.SYNC_BUDGET_MARGIN_S)),
                env.BATCH_TOKEN_RATE: str(self.config.token_rate * api_threads)}
        for name, value in {**shard_sizing(self.config), **sync}.items():
            function.add_environment(name, value)
        assert function.role is not None
        acknowledge(function.role, self.jobs_objects_finding())

    def outputs(self) -> list[tuple[str, str, str]]:
        """The stack outputs: (name, value, description)."""
        store = self.artifacts.store_uri
        return [
            ("JobsInputPrefix", "%s/%s" % (store, INPUT_PREFIX),
             'Upload job inputs here (JSONL, one state per line); POST /v1/jobs {"input": <its URI>, ...}'),
            ("JobsOutputPrefix", "%s/%s" % (store, OUTPUT_PREFIX),
             "Merged job results land here (<job id>.jsonl, or the output a submission names under it)"),
            ("JobsFunctionName", self.function.function_name,
             "aws lambda invoke --invocation-type Event --function-name <this> ... (docs/jobs.md)"),
            ("JobsStateMachineArn", self.state_machine.state_machine_arn, "One execution per job, named by its id"),
            ("JobsDeadLetterQueueUrl", self.dead_letters.queue_url,
             "Given-up shard batches and refused direct submissions, with their reasons"),
        ]
