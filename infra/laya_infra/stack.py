"""The stack: artifact bucket, API key secret, API function, REST API with a bearer authorizer, alarms, the
rollout of new versions (CodeDeploy), with `-c signing=true` the artifact signing key, and (unless
`-c jobs=false`) the batch-jobs engine: the jobs function, its state machine and dead-letter queue."""

from __future__ import annotations

from typing import Any

from aws_cdk import Aspects, CfnOutput, Stack
from constructs import Construct

from . import constants as c
from .api import DecisionApi
from .config import DeployConfig
from .deploy_gate import DeployGate, is_int8_target
from .functions import ApiFunction
from .gpu import GpuEndpoint
from .gpu_config import GpuConfig
from .jobs import JobsEngine
from .managed_instances import ManagedInstances
from .monitoring import Alarms
from .operations import DeadLetters
from .retention import DeletionPolicies
from .rollout import Rollout, SigningKey
from .storage import ApiKeySecret, ArtifactBucket


class LayaServerlessStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, config: DeployConfig, gpu: GpuConfig | None = None,
                 **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        Aspects.of(self).add(DeletionPolicies())   # one deletion policy per kind of data
        artifacts = ArtifactBucket(self, "Artifacts", config)
        secret = ApiKeySecret(self, "ApiKey", config) if config.auth else None
        dead_letters = DeadLetters(self, "AsyncFailures")
        function = ApiFunction(self, "Api", config, artifacts, secret, dead_letters)
        if config.compute == c.COMPUTE_MANAGED:   # the API function on EC2 families the gate covers
            ManagedInstances(self, "ManagedInstances", config).attach(function.function)
        # The gateway invokes the live alias: a published version, snapshotted (SnapStart) or provisioned.
        api = DecisionApi(self, "Gateway", config, function.alias, secret, dead_letters)
        jobs = JobsEngine(self, "Jobs", config, artifacts, function.layer) if config.jobs else None
        others = [dead_letters.alarm, *([jobs.alarm] if jobs else [])]
        alarms = Alarms(self, "Alarms", config, function.function, function.log_group, others, api.api)
        # A new version (new code, configuration or pinned artifacts) takes traffic gradually, rolled back on alarm.
        Rollout(self, "Rollout", config, function.alias, alarms.rollback_alarms)
        signing = SigningKey(self, "Signing", config) if config.signing else None
        if signing is not None:  # artifacts must carry the signing key's signature, on the API and in jobs alike
            for served in [function.function, *([jobs.function] if jobs else [])]:
                signing.trust(served)
        if jobs is not None:
            jobs.connect_api(function.function, config.timeout_s, config.threads)
            for name, value, description in jobs.outputs():
                CfnOutput(self, name, value=value, description=description)
        if config.deploy_gate and is_int8_target(config.target):  # int8 serves only where its gate held
            gate = DeployGate(self, "DeployGate", config, artifacts, function.layer, dead_letters)
            # The published version, not only the alias, waits for the gate: publishing the version is what runs
            # the INIT that SnapStart snapshots, and that INIT must read the gate's record (or its absence).
            function.function.current_version.node.add_dependency(gate.resource)
            function.alias.node.add_dependency(gate.resource)
            CfnOutput(self, "DeployGateFunctionName", value=gate.function.function_name,
                      description="Re-gate after publishing: aws lambda invoke --function-name <this> --payload "
                                  "file://gate.json (see docs/operations.md)")
        if gpu is not None:   # -c gpu=true: the CUDA container endpoint and its /gpu routes on the same API
            endpoint = GpuEndpoint(self, "Gpu", config, gpu, artifacts, api, signing.key if signing else None)
            CfnOutput(self, "GpuApiUrl", value=endpoint.url, description="Base URL of the Jev API on the GPU")
            CfnOutput(self, "GpuEndpointName", value=endpoint.endpoint.attr_endpoint_name)

        CfnOutput(self, "ApiUrl", value=api.url, description="Base URL of the Jev API (prefix included)")
        CfnOutput(self, "ArtifactBucketName", value=artifacts.bucket.bucket_name)
        CfnOutput(self, "AsyncFailureQueueUrl", value=dead_letters.queue.queue_url,
                  description="Failure records of async invocations (no function is meant to be invoked async)")
        CfnOutput(self, "ArtifactStore", value=artifacts.store_uri,
                  description="Publish artifacts here: laya-artifacts publish ARTIFACT_DIR --store <this>")
        if secret is not None:
            CfnOutput(self, "ApiKeySecretArn", value=secret.secret.secret_arn,
                      description="aws secretsmanager get-secret-value --secret-id <this> gives the bearer key")
