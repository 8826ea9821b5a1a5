"""The REST API in front of the function: the protocol's routes under the prefix, bearer auth at the
gateway on the decision routes, protocol-shaped gateway errors, throttling and access logs.

REST rather than HTTP API, on purpose: an HTTP API authorizer can only answer 401 `Unauthorized`
or 403 `Forbidden` in its own body, while the protocol requires 401
`{"detail":"invalid or missing bearer token"}`; REST gateway responses can say exactly that. REST
also caches TOKEN authorizer results per header, offers usage plans and WAF, and has the same
29 s integration limit; it costs more per request ($3.50 vs $1.00 per million in us-east-1).
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from . import constants as c
from .config import DeployConfig
from .functions import BearerAuthorizerFunction
from .operations import DeadLetters
from .storage import ApiKeySecret
from .suppressions import NO_AUTH, NO_COGNITO, NO_EXECUTION_LOGS, NO_REQUEST_MODELS, NO_WAF, OPEN_HEALTH, acknowledge

_JSON = "application/json"


class DecisionApi(Construct):
    def __init__(self, scope: Construct, construct_id: str, config: DeployConfig, function: lambda_.IFunction,
                 secret: ApiKeySecret | None, dead_letters: DeadLetters | None = None) -> None:
        super().__init__(scope, construct_id)
        access_logs = logs.LogGroup(self, "AccessLogs", retention=logs.RetentionDays[c.LOG_RETENTION])
        self.api = apigw.RestApi(
            self, "Api",
            rest_api_name="laya-serverless",
            description="TypeSafe Jev protocol (laya-serverless)",
            endpoint_types=[apigw.EndpointType.REGIONAL],
            # zstd-compressed request bodies (the official client sends them) must reach the
            # function unmangled: every body arrives base64-encoded and Mangum decodes it.
            binary_media_types=["*/*"],
            cloud_watch_role=False,
            deploy_options=apigw.StageOptions(
                stage_name=config.stage,
                throttling_rate_limit=config.throttle_rate,
                throttling_burst_limit=config.throttle_burst,
                metrics_enabled=True,
                tracing_enabled=True,  # X-Ray from the gateway into the function's trace
                access_log_destination=apigw.LogGroupLogDestination(access_logs),
                access_log_format=apigw.AccessLogFormat.json_with_standard_fields(
                    caller=False, http_method=True, ip=True, protocol=True, request_time=True,
                    resource_path=True, response_length=True, status=True, user=False),
            ),
        )
        self._gateway_responses()
        integration = apigw.LambdaIntegration(function, proxy=True)
        base = self.api.root
        for segment in filter(None, config.prefix.split("/")):
            base = base.add_resource(segment)

        authorizer = None
        if secret is not None:
            self.authorizer_function = BearerAuthorizerFunction(self, "Authorizer", secret, dead_letters).function
            authorizer = apigw.TokenAuthorizer(
                self, "Bearer",
                handler=self.authorizer_function,
                identity_source=apigw.IdentitySource.header("Authorization"),
                results_cache_ttl=Duration.seconds(c.AUTHORIZER_CACHE_S),
            )
        # /health stays open as the protocol requires; the app reduces its payload without the key.
        health = self._resource(base, c.HEALTH_PATH).add_method("GET", integration)
        acknowledge(health, OPEN_HEALTH, NO_COGNITO)
        for path in c.DECISION_PATHS:
            method = self._resource(base, path).add_method(
                "POST", integration, authorizer=authorizer,
                authorization_type=apigw.AuthorizationType.CUSTOM if authorizer else apigw.AuthorizationType.NONE)
            acknowledge(method, NO_COGNITO, *(() if authorizer else (NO_AUTH,)))
        models = self._resource(base, c.MODELS_PATH).add_method(
            "GET", integration, authorizer=authorizer,
            authorization_type=apigw.AuthorizationType.CUSTOM if authorizer else apigw.AuthorizationType.NONE)
        acknowledge(models, NO_COGNITO, *(() if authorizer else (NO_AUTH,)))
        for verb, path in c.JOB_ROUTES if config.jobs else ():   # batch jobs: the same authorizer and prefix
            method = self._resource(base, path).add_method(
                verb, integration, authorizer=authorizer,
                authorization_type=apigw.AuthorizationType.CUSTOM if authorizer else apigw.AuthorizationType.NONE)
            acknowledge(method, NO_COGNITO, *(() if authorizer else (NO_AUTH,)))
        if secret is None:
            for path in c.DOCS_PATHS:   # the app serves these only when no key is configured
                acknowledge(self._resource(base, path).add_method("GET", integration), NO_AUTH, NO_COGNITO)
        self.base, self.authorizer = base, authorizer   # where other routes (the GPU endpoint's) attach
        acknowledge(self.api, NO_REQUEST_MODELS)
        acknowledge(self.api.deployment_stage, NO_EXECUTION_LOGS, NO_WAF)
        self.url = self.api.url + config.prefix.lstrip("/")

    @staticmethod
    def _resource(base: apigw.IResource, path: str) -> apigw.IResource:
        resource = base
        for segment in path.split("/"):
            resource = resource.get_resource(segment) or resource.add_resource(segment)
        return resource

    def _gateway_responses(self) -> None:
        """Errors the gateway answers itself, shaped like the app's own."""
        unauthorized = {_JSON: c.UNAUTHORIZED_BODY}
        json_header = {"Content-Type": "'application/json'"}
        for name, kind in (("Unauthorized", apigw.ResponseType.UNAUTHORIZED),
                           ("AccessDenied", apigw.ResponseType.ACCESS_DENIED)):
            self.api.add_gateway_response(name, type=kind, status_code="401", templates=unauthorized,
                                          response_headers=json_header)
        # An unknown path or method: what the app answers, not API Gateway's "Missing Authentication Token".
        self.api.add_gateway_response("NotFound", type=apigw.ResponseType.MISSING_AUTHENTICATION_TOKEN,
                                      status_code="404", templates={_JSON: '{"detail":"Not Found"}'},
                                      response_headers=json_header)
