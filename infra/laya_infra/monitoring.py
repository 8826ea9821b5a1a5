"""Alarms on the API: the function's errors, throttles, slow answers and slow cold starts (INIT time); degraded
serving (503 not ready, refused artifacts, int8 served on its FP32 fallback) from the runtime's EMF metrics; and
the gateway's 5XX and 4XX rates. Every alarm notifies one SNS topic (docs/operations.md#alarms has a runbook line
per alarm); `rollback_alarms` are the ones a canary rolls back on (`rollout.Rollout`): 1-minute periods, so that
they can fire inside the rollout window, and 2 bad minutes of 3 for counts that one request can move (errors,
503s, the 5XX rate); a refusal at load fires on one. The 4XX rate is the callers' and never rolls back."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import CfnOutput, Duration
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from laya_serverless import observe

from . import constants as c
from .config import DeployConfig

_PERIOD = Duration.minutes(5)
_ROLLBACK_PERIOD = Duration.minutes(c.ROLLBACK_PERIOD_MINUTES)
# One bad minute is noise (a timeout, a client's burst): a rollback alarm on a count needs 2 of 3.
_OF, _BAD = c.ROLLBACK_EVALUATION_PERIODS, c.ROLLBACK_DATAPOINTS


def runtime_metric(name: str, period: Duration = _PERIOD) -> cloudwatch.Metric:
    """A count the runtime emits (EMF, `observe.metric`), as Powertools dimensions it: by service."""
    return cloudwatch.Metric(namespace=c.METRIC_NAMESPACE, metric_name=name, statistic="Sum", period=period,
                             dimensions_map={"service": c.METRIC_SERVICE})


class Alarms(Construct):
    def __init__(self, scope: Construct, construct_id: str, config: DeployConfig, function: lambda_.Function,
                 log_group: logs.ILogGroup, others: Sequence[cloudwatch.Alarm] = (),
                 api: apigw.RestApi | None = None) -> None:
        """`others`: alarms made elsewhere (the jobs dead-letter queue's) that notify the same topic; `api`: the
        gateway whose 5XX and 4XX rates are watched."""
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
            function.metric_errors(period=_ROLLBACK_PERIOD).create_alarm(
                self, "Errors", threshold=1, evaluation_periods=_OF, datapoints_to_alarm=_BAD,
                alarm_description="The API function raised (unhandled errors, timeouts, INIT failures) in 2 of 3 "
                                  "minutes",
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
        gateway = self._gateway(api)
        self.rollback_alarms = [self.alarms[0], *self._degraded_serving(), *gateway[:1]]
        # Notified, never rolled back: a restore on another CPU class is the platform's doing, an FP32 fallback
        # serves exact answers (rolling back would not make int8 proven on this CPU), and the 4XX rate is the callers'.
        notified = [runtime_metric(name).create_alarm(
            self, alarm_id, threshold=1, evaluation_periods=1, alarm_description=description,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING)
            for alarm_id, name, description in (
                ("ClassSwitches", observe.CLASS_SWITCHES,
                 "A restored snapshot landed on another int8 CPU class and chose its artifacts again"),
                ("TargetFallbacks", observe.TARGET_FALLBACKS,
                 "A checkpoint serves its cpu-fp32 artifact: int8 is missing or unproven on this CPU's int8 "
                 "kernel class"))]
        self.alarms += [*self.rollback_alarms[1:], *gateway[1:], *notified]
        self.topic = sns.Topic(self, "Topic", enforce_ssl=True, display_name="laya-serverless alarms")
        if config.alarm_email:
            self.topic.add_subscription(subscriptions.EmailSubscription(config.alarm_email))
        for alarm in [*self.alarms, *others]:
            alarm.add_alarm_action(actions.SnsAction(self.topic))
        CfnOutput(self, "AlarmTopicArn", value=self.topic.topic_arn,
                  description="Every alarm notifies this topic: aws sns subscribe --topic-arn <this> ...")

    def _degraded_serving(self) -> list[cloudwatch.Alarm]:
        """What a Lambda error never shows: the function answering 503, or serving less than it was deployed with."""
        return [runtime_metric(name, _ROLLBACK_PERIOD).create_alarm(
            self, alarm_id, threshold=1, evaluation_periods=_OF if counts else 1,
            datapoints_to_alarm=_BAD if counts else 1,
            alarm_description=description,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING)
            for alarm_id, name, counts, description in (
                ("NotReady", observe.NOT_READY, True,
                 "Requests answered 503 not ready in 2 of 3 minutes: the instance's artifacts were refused or "
                 "missing at INIT"),
                # emitted once per INIT, and a refusal at load is a verdict, not noise: one is enough
                ("RefusedArtifacts", observe.REFUSED_ARTIFACTS, False,
                 "An artifact was refused at load (missing, failed verification, signature or binding)"))]

    def _gateway(self, api: apigw.RestApi | None) -> list[cloudwatch.Alarm]:
        """The share of gateway answers that are 5XX (the service failed) and 4XX (callers refused en masse)."""
        if api is None:
            return []
        return [
            api.metric_server_error(period=_ROLLBACK_PERIOD, statistic="Average").create_alarm(
                self, "Gateway5xxRate", threshold=c.API_5XX_RATE_ALARM, evaluation_periods=_OF,
                datapoints_to_alarm=_BAD,
                alarm_description="More than %g%% of API answers were 5XX in 2 of 3 minutes"
                % (100 * c.API_5XX_RATE_ALARM),
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING),
            api.metric_client_error(period=_PERIOD, statistic="Average").create_alarm(
                self, "Gateway4xxRate", threshold=c.API_4XX_RATE_ALARM, evaluation_periods=3,
                alarm_description="More than %g%% of API answers were 4XX for 15 minutes (keys, clients, limits)"
                % (100 * c.API_4XX_RATE_ALARM),
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING),
        ]
