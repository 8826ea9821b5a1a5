"""Signed artifacts and safe rollout: the KMS key that signs artifacts, and CodeDeploy on the live alias.

- `SigningKey`: an asymmetric KMS key (ECC_NIST_P256, SIGN_VERIFY) created here, or an existing one by ARN
  (`-c signing_key=`, what `laya-artifacts deploy` passes). Serving functions get its ARN as
  `LAYA_ARTIFACT_KEYS` and kms:GetPublicKey on it alone (fetched once at INIT; verification is offline);
  publishers get kms:Sign through `PublisherPolicy`, which no function holds.
- `Rollout`: a CodeDeploy deployment group on the `live` alias. Each deploy that changes the function's
  configuration publishes a new version (`-c artifact_pins` puts the artifact ids in it, so a new artifact is a
  new version); CodeDeploy shifts traffic to it (canary: 10% for 5 minutes, then all) and rolls back to the
  previous version when an alarm of degraded serving fires (docs/deploy.md#safe-rollout).
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import CfnOutput, RemovalPolicy
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_codedeploy as codedeploy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from laya_serverless import settings as env

from . import constants as c
from .config import DeployConfig
from .suppressions import CODEDEPLOY_ROLE, SIGNING_KEY_ROTATION, acknowledge

_CONFIGS = {"canary": codedeploy.LambdaDeploymentConfig.CANARY_10_PERCENT_5_MINUTES,
            "linear": codedeploy.LambdaDeploymentConfig.LINEAR_10_PERCENT_EVERY_1_MINUTE,
            "all-at-once": codedeploy.LambdaDeploymentConfig.ALL_AT_ONCE}


class SigningKey(Construct):
    def __init__(self, scope: Construct, construct_id: str, config: DeployConfig) -> None:
        super().__init__(scope, construct_id)
        if config.signing_key:
            self.key: kms.IKey = kms.Key.from_key_arn(self, "Existing", config.signing_key)
        else:
            created = kms.Key(self, "Key", key_spec=kms.KeySpec.ECC_NIST_P256, key_usage=kms.KeyUsage.SIGN_VERIFY,
                              description="Signs laya-serverless artifacts (laya-artifacts publish --sign-key)",
                              alias=c.SIGNING_KEY_ALIAS, removal_policy=RemovalPolicy.RETAIN)
            acknowledge(created, SIGNING_KEY_ROTATION)
            self.key = created
        self.publisher = iam.ManagedPolicy(
            self, "PublisherPolicy", description="Sign laya-serverless artifacts with the stack's key",
            statements=[iam.PolicyStatement(actions=["kms:Sign", "kms:GetPublicKey"], resources=[self.key.key_arn])])
        CfnOutput(self, "SigningKeyArn", value=self.key.key_arn,
                  description="Sign artifacts: laya-artifacts publish DIR --store S --sign-key <this>")
        CfnOutput(self, "PublisherPolicyArn", value=self.publisher.managed_policy_arn,
                  description="Attach to the role that publishes artifacts (kms:Sign on the signing key)")

    def trust(self, function: lambda_.Function) -> None:
        """`function` refuses artifacts this key did not sign; it may read the public key, and nothing else."""
        function.add_environment(env.ARTIFACT_KEYS, self.key.key_arn)
        function.add_to_role_policy(iam.PolicyStatement(actions=["kms:GetPublicKey"], resources=[self.key.key_arn]))


class Rollout(Construct):
    def __init__(self, scope: Construct, construct_id: str, config: DeployConfig, alias: lambda_.Alias,
                 alarms: Sequence[cloudwatch.IAlarm]) -> None:
        super().__init__(scope, construct_id)
        self.group = codedeploy.LambdaDeploymentGroup(
            self, "Group", alias=alias, deployment_config=_CONFIGS[config.rollout], alarms=list(alarms),
            auto_rollback=codedeploy.AutoRollbackConfig(failed_deployment=True, deployment_in_alarm=True))
        acknowledge(self.group, CODEDEPLOY_ROLE)
