"""The GPU endpoint beside the Lambda API (`-c gpu=true`): the CUDA image as an asset, a SageMaker real-time
endpoint with target-tracking scaling, and `<prefix>/gpu/...` routes on the same REST API, behind the same
authorizer, through a small function that calls InvokeEndpoint on that endpoint only.

A client picks CPU or GPU by base URL: `.../v1/systemone` or `.../gpu/v1/systemone`. Lambda has no GPU,
hence a container endpoint; its artifacts are the `cuda-*` ones, gated on the GPU model it runs on.

With `-c gpu_min_instances=0` the endpoint can hold no instance at all: the model runs as an inference
component (one copy per GPU instance) whose copy count tracks concurrent requests down to 0, the endpoint's managed
instance scaling follows the copies down to 0 instances, and an alarm on the component's
NoCapacityInvocationFailures scales it from 0 back to one copy when a request finds none (docs/gpu.md).
"""

from __future__ import annotations

from aws_cdk import ArnFormat, Duration, Fn, IgnoreMode, Stack
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_applicationautoscaling as scaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from laya_serverless import settings as env

from . import constants as c
from .api import DecisionApi
from .config import DeployConfig
from .functions import _RUNTIME, _log_group, _role
from .gpu_config import GpuConfig
from .storage import ArtifactBucket
from .suppressions import ECR_TOKEN, GPU_LOGS, NO_AUTH, NO_COGNITO, RUNTIME, acknowledge

# -c gpu_min_instances=0: what one copy of the model reserves on its instance (it takes the instance's GPU)
COPY_MEMORY_MB = 4096
NO_CAPACITY_METRIC = "NoCapacityInvocationFailures"   # AWS/SageMaker: requests that found no copy
# Copies track concurrent requests (a high-resolution metric that reads 0 when idle, so scale-in reaches 0 copies;
# AWS's scale-to-zero pattern). A decision takes milliseconds on the GPU: 4 in flight per copy is a busy copy.
COPY_CONCURRENCY = 4


def gpu_environment(config: DeployConfig, gpu: GpuConfig, store_uri: str) -> dict[str, str]:
    """The container's environment, keyed by the names the runtime's `Settings` reads. No API key: the
    gateway's authorizer checks it, and InvokeEndpoint is allowed to the proxy function alone."""
    return {
        env.DEVICE: "cuda",
        env.TARGET: gpu.target,
        env.STORE: store_uri,
        env.DEPLOYED: config.deployed,
        env.CACHE_DIR: c.GPU_CACHE_DIR,
        env.JEV_STRICT: "1" if config.jev_strict else "0",
        env.JEV_CONFIDENCE: config.jev_confidence,
        env.JOBS_WORKERS: "0",  # the endpoint answers decisions only: no local jobs engine listing jobs/ at start
    }


class GpuEndpoint(Construct):
    def __init__(self, scope: Construct, construct_id: str, config: DeployConfig, gpu: GpuConfig,
                 artifacts: ArtifactBucket, api: DecisionApi) -> None:
        super().__init__(scope, construct_id)
        image = ecr_assets.DockerImageAsset(
            self, "Image", directory=str(c.REPO_ROOT), file=c.GPU_DOCKERFILE, exclude=list(c.GPU_IMAGE_CONTEXT),
            ignore_mode=IgnoreMode.DOCKER, platform=ecr_assets.Platform.LINUX_AMD64)
        role = self._execution_role(image, gpu, artifacts)
        model = sagemaker.CfnModel(
            self, "Model", execution_role_arn=role.role_arn,
            primary_container=sagemaker.CfnModel.ContainerDefinitionProperty(
                image=image.image_uri, environment=gpu_environment(config, gpu, artifacts.store_uri)))
        model.node.add_dependency(role)   # CreateModel checks the image pull with the role's policy in place
        self.component: sagemaker.CfnInferenceComponent | None = None
        if gpu.scales_to_zero:
            self._component_endpoint(gpu, model, role)
        else:
            endpoint_config = sagemaker.CfnEndpointConfig(
                self, "Config", production_variants=[sagemaker.CfnEndpointConfig.ProductionVariantProperty(
                    variant_name=c.GPU_VARIANT, model_name=model.attr_model_name, instance_type=gpu.instance_type,
                    initial_instance_count=gpu.min_instances, inference_ami_version=c.GPU_AMI_VERSION,
                    container_startup_health_check_timeout_in_seconds=c.GPU_STARTUP_TIMEOUT_S)])
            self.endpoint = sagemaker.CfnEndpoint(self, "Endpoint",
                                                  endpoint_config_name=endpoint_config.attr_endpoint_config_name)
            self._scaling(gpu)
        self.proxy = self._proxy_function()
        self._routes(config, api)

    def _component_endpoint(self, gpu: GpuConfig, model: sagemaker.CfnModel, role: iam.Role) -> None:
        """An endpoint whose instances follow its inference component's copies, down to none (scale to zero)."""
        endpoint_config = sagemaker.CfnEndpointConfig(
            self, "Config", execution_role_arn=role.role_arn,
            production_variants=[sagemaker.CfnEndpointConfig.ProductionVariantProperty(
                variant_name=c.GPU_VARIANT, instance_type=gpu.instance_type, initial_instance_count=1,
                inference_ami_version=c.GPU_AMI_VERSION,
                managed_instance_scaling=sagemaker.CfnEndpointConfig.ManagedInstanceScalingProperty(
                    status="ENABLED", min_instance_count=0, max_instance_count=gpu.max_instances),
                routing_config=sagemaker.CfnEndpointConfig.RoutingConfigProperty(
                    routing_strategy="LEAST_OUTSTANDING_REQUESTS"))])
        self.endpoint = sagemaker.CfnEndpoint(self, "Endpoint",
                                              endpoint_config_name=endpoint_config.attr_endpoint_config_name)
        component = sagemaker.CfnInferenceComponent(
            self, "Component", endpoint_name=self.endpoint.attr_endpoint_name, variant_name=c.GPU_VARIANT,
            specification=sagemaker.CfnInferenceComponent.InferenceComponentSpecificationProperty(
                model_name=model.attr_model_name,
                compute_resource_requirements=sagemaker.CfnInferenceComponent
                .InferenceComponentComputeResourceRequirementsProperty(
                    number_of_accelerator_devices_required=1, min_memory_required_in_mb=COPY_MEMORY_MB),
                startup_parameters=sagemaker.CfnInferenceComponent.InferenceComponentStartupParametersProperty(
                    container_startup_health_check_timeout_in_seconds=c.GPU_STARTUP_TIMEOUT_S)),
            runtime_config=sagemaker.CfnInferenceComponent.InferenceComponentRuntimeConfigProperty(copy_count=1))
        self.component = component
        # CloudFormation gives the component's ARN but no name attribute: the name is the ARN's tail.
        self.component_name = Fn.select(1, Fn.split("inference-component/", component.attr_inference_component_arn))
        self._component_scaling(gpu, component)

    def _component_scaling(self, gpu: GpuConfig, component: sagemaker.CfnInferenceComponent) -> None:
        """Copies track concurrent requests between 0 and the maximum; a request that finds no copy starts one."""
        target = scaling.ScalableTarget(
            self, "Scaling", service_namespace=scaling.ServiceNamespace.SAGEMAKER,
            resource_id=Fn.join("", ["inference-component/", self.component_name]),
            scalable_dimension="sagemaker:inference-component:DesiredCopyCount",
            min_capacity=0, max_capacity=gpu.max_instances, role=self._scaling_role())
        target.node.add_dependency(component)
        target.scale_to_track_metric(
            "Concurrency", target_value=COPY_CONCURRENCY,
            predefined_metric=scaling.PredefinedMetric.SAGEMAKER_INFERENCE_COMPONENT_CONCURRENT_REQUESTS_PER_COPY_HIGH_RESOLUTION,
            scale_in_cooldown=Duration.minutes(10),
            scale_out_cooldown=Duration.minutes(3))
        from_zero = scaling.StepScalingAction(
            self, "FromZero", scaling_target=target, adjustment_type=scaling.AdjustmentType.CHANGE_IN_CAPACITY,
            cooldown=Duration.minutes(1), metric_aggregation_type=scaling.MetricAggregationType.MAXIMUM)
        from_zero.add_adjustment(adjustment=1, lower_bound=0)
        alarm = cloudwatch.Alarm(
            self, "NoCapacity", metric=cloudwatch.Metric(
                namespace="AWS/SageMaker", metric_name=NO_CAPACITY_METRIC, statistic="Maximum",
                period=Duration.minutes(1),
                dimensions_map={"InferenceComponentName": self.component_name}),
            threshold=1, evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description="a request found no copy of the GPU model: start one (scale from zero)")
        alarm.add_alarm_action(cloudwatch_actions.ApplicationScalingAction(from_zero))

    def _scaling_role(self) -> iam.IRole:
        return iam.Role.from_role_arn(self, "ScalingRole", Stack.of(self).format_arn(
            service="iam", region="", resource="role", resource_name=(
                "aws-service-role/sagemaker.application-autoscaling.amazonaws.com/"
                "AWSServiceRoleForApplicationAutoScaling_SageMakerEndpoint")))

    def _execution_role(self, image: ecr_assets.DockerImageAsset, gpu: GpuConfig,
                        artifacts: ArtifactBucket) -> iam.Role:
        """Pull this image, read the GPU target's pointers and the artifacts, write the endpoint's logs."""
        role = iam.Role(self, "Role", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"))
        image.repository.grant_pull(role)
        for statement in artifacts.read_statements(gpu.target):
            role.add_to_policy(statement)
        logs = Stack.of(self).format_arn(service="logs", resource="log-group",
                                         resource_name="/aws/sagemaker/Endpoints/*",
                                         arn_format=ArnFormat.COLON_RESOURCE_NAME)
        role.add_to_policy(iam.PolicyStatement(
            actions=["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
            resources=[logs, logs + ":log-stream:*"]))
        acknowledge(role, *artifacts.read_findings(gpu.target), ECR_TOKEN,
                    ("AwsSolutions-IAM5[Resource::%s]" % _nag_logs(), GPU_LOGS),
                    ("AwsSolutions-IAM5[Resource::%s:log-stream:*]" % _nag_logs(), GPU_LOGS))
        return role

    def _scaling(self, gpu: GpuConfig) -> None:
        resource_id = Fn.join("", ["endpoint/", self.endpoint.attr_endpoint_name, "/variant/", c.GPU_VARIANT])
        target = scaling.ScalableTarget(
            self, "Scaling", service_namespace=scaling.ServiceNamespace.SAGEMAKER, resource_id=resource_id,
            scalable_dimension="sagemaker:variant:DesiredInstanceCount",
            min_capacity=gpu.min_instances, max_capacity=gpu.max_instances, role=self._scaling_role())
        target.node.add_dependency(self.endpoint)
        target.scale_to_track_metric(
            "Invocations", target_value=gpu.invocations_per_instance,
            predefined_metric=scaling.PredefinedMetric.SAGEMAKER_VARIANT_INVOCATIONS_PER_INSTANCE,
            scale_in_cooldown=Duration.minutes(10), scale_out_cooldown=Duration.minutes(3))

    def _proxy_function(self) -> lambda_.Function:
        log_group = _log_group(self, "ProxyLogs")
        role = _role(self, "ProxyRole", log_group)
        role.add_to_policy(iam.PolicyStatement(actions=["sagemaker:InvokeEndpoint"], resources=[self.endpoint.ref]))
        function = lambda_.Function(
            self, "Proxy", runtime=_RUNTIME, architecture=lambda_.Architecture.ARM_64, handler=c.GPU_PROXY_HANDLER,
            code=lambda_.Code.from_asset(str(c.GPU_PROXY_DIR), exclude=["__pycache__", "*.pyc"]),
            memory_size=c.GPU_PROXY_MEMORY_MB, timeout=Duration.seconds(c.MAX_TIMEOUT_S),
            environment=self._proxy_environment(), role=role, log_group=log_group,
            description="laya-serverless /gpu routes -> SageMaker InvokeEndpoint")
        acknowledge(function, RUNTIME)
        return function

    def _proxy_environment(self) -> dict[str, str]:
        found = {env.GPU_ENDPOINT: self.endpoint.attr_endpoint_name}
        if self.component is not None:   # InvokeEndpoint names the component on an endpoint that hosts them
            found[env.GPU_INFERENCE_COMPONENT] = self.component_name
        return found

    def _routes(self, config: DeployConfig, api: DecisionApi) -> None:
        integration = apigw.LambdaIntegration(self.proxy, proxy=True)
        gpu_base = api.base.get_resource(c.GPU_PATH) or api.base.add_resource(c.GPU_PATH)
        for method, path in c.GPU_ROUTES:
            resource = gpu_base
            for segment in path.split("/"):
                resource = resource.get_resource(segment) or resource.add_resource(segment)
            added = resource.add_method(
                method, integration, authorizer=api.authorizer,
                authorization_type=apigw.AuthorizationType.CUSTOM if api.authorizer else apigw.AuthorizationType.NONE)
            acknowledge(added, NO_COGNITO, *(() if api.authorizer else (NO_AUTH,)))
        self.url = api.url.rstrip("/") + "/" + c.GPU_PATH


def _nag_logs() -> str:
    """The log-group ARN as cdk-nag spells it in a finding."""
    return "arn:<AWS::Partition>:logs:<AWS::Region>:<AWS::AccountId>:log-group:/aws/sagemaker/Endpoints/*"
