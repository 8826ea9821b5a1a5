"""Alarms on the API function: errors, throttles, slow answers and slow cold starts (INIT time)."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from . import constants as c
from .config import DeployConfig

_PERIOD = Duration.minutes(5)


class Alarms(Construct):
    def __init__(self, scope: Construct, construct_id: str, config: DeployConfig, function: lambda_.Function,
                 log_group: logs.ILogGroup, others: Sequence[cloudwatch.Alarm] = ()) -> None:
        """`others`: alarms made elsewhere (the jobs dead-letter queue's) that notify the same address."""
        super().__init__(scope, construct_id)
        # Lambda publishes no INIT metric; its JSON platform report carries initDurationMs on cold starts.
        logs.MetricFilter(
            self, "InitDuration",
            log_group=log_group,
            filter_pattern=logs.FilterPattern.literal(
                '{ $.type = "platform.report" && $.record.metrics.initDurationMs > 0 }'),
            metric_namespace=c.METRIC_NAMESPACE,
            metric_name=c.INIT_METRIC,
            metric_value="$.record.metrics.initDurationMs",
            unit=cloudwatch.Unit.MILLISECONDS,
        )
        init = cloudwatch.Metric(namespace=c.METRIC_NAMESPACE, metric_name=c.INIT_METRIC,
                                 statistic="Maximum", period=_PERIOD)
        self.alarms = [
            function.metric_errors(period=_PERIOD).create_alarm(
                self, "Errors", threshold=1, evaluation_periods=1,
                alarm_description="The API function raised (unhandled errors, timeouts, INIT failures)",
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING),
            function.metric_throttles(period=_PERIOD).create_alarm(
                self, "Throttles", threshold=1, evaluation_periods=1,
                alarm_description="Invocations were throttled (reserved concurrency or account limit)",
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING),
            function.metric_duration(period=_PERIOD, statistic="p99").create_alarm(
                self, "Duration", threshold=config.duration_alarm_ms, evaluation_periods=3,
                alarm_description="p99 duration above %d ms" % config.duration_alarm_ms,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING),
            init.create_alarm(
                self, "ColdStart", threshold=config.init_alarm_ms, evaluation_periods=1,
                alarm_description="A cold start (INIT: imports, artifact fetch and verify, session) took over %d ms"
                % config.init_alarm_ms,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING),
        ]
        if config.alarm_email:
            topic = sns.Topic(self, "Topic", enforce_ssl=True)
            topic.add_subscription(subscriptions.EmailSubscription(config.alarm_email))
            for alarm in [*self.alarms, *others]:
                alarm.add_alarm_action(actions.SnsAction(topic))
