"""How the functions are run: async-invoke failures dead-lettered, and the API function's live alias.

- `DeadLetters`: one SQS queue (TLS only, SQS-managed encryption, 14 days) that every function's
  async-invoke configuration sends its failure records to: no retry, a short maximum event age.
  The functions are invoked synchronously by the gateway; an async event (an S3 or EventBridge
  rule pointed at one by mistake) is answered by the guard and never retried.
- `live_alias`: the API function's published version behind the `live` alias the gateway invokes,
  with SnapStart on published versions (the default) or provisioned concurrency on the alias.
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from . import constants as c
from .config import DeployConfig
from .suppressions import DLQ_ITSELF, acknowledge


class DeadLetters(Construct):
    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self.queue = sqs.Queue(self, "Queue", encryption=sqs.QueueEncryption.SQS_MANAGED, enforce_ssl=True,
                               retention_period=Duration.days(c.DLQ_RETENTION_DAYS))
        acknowledge(self.queue, DLQ_ITSELF)
        # A failure record here is an event some function could not take: someone should read it.
        self.alarm = self.queue.metric_approximate_number_of_messages_visible(
            period=Duration.minutes(5), statistic="Maximum").create_alarm(
            self, "Alarm", threshold=1, evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            alarm_description="An async invocation failed and its record is in the async-failure queue",
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING)

    def configure(self, function: lambda_.IFunction) -> None:
        """Async invokes of `function` (or an alias): no retry, at most an hour old, failures to the queue."""
        function.configure_async_invoke(on_failure=destinations.SqsDestination(self.queue),
                                        retry_attempts=c.ASYNC_RETRY_ATTEMPTS,
                                        max_event_age=Duration.seconds(c.ASYNC_MAX_EVENT_AGE_S))


def snap_start(config: DeployConfig) -> lambda_.SnapStartConf | None:
    return lambda_.SnapStartConf.ON_PUBLISHED_VERSIONS if config.snapstart else None


def live_alias(scope: Construct, function: lambda_.Function, config: DeployConfig) -> lambda_.Alias:
    """The alias the gateway invokes: the current published version (snapshotted, or kept provisioned)."""
    return lambda_.Alias(scope, "Live", alias_name=c.ALIAS_NAME, version=function.current_version,
                         provisioned_concurrent_executions=config.provisioned_concurrency,
                         description="what API Gateway invokes: SnapStart version" if config.snapstart
                         else "what API Gateway invokes: provisioned version")
