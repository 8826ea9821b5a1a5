"""Where artifacts and the API key live."""

from __future__ import annotations

from aws_cdk import CfnElement, Duration, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from laya_serverless.jobs.store_keys import JOBS_PREFIX

from . import constants as c
from .config import DeployConfig
from .suppressions import API_KEY_ROTATION, ARTIFACT_OBJECTS, acknowledge, prefix_rule

# Where gate records live (`artifact/platform.py`: gates/<artifact id>/<int8 kernels>.json).
GATES = "gates/"
# Where signed release records live (`artifact/releases.py`: releases/<checkpoint>/<target>/<serial>/<key id>.json).
RELEASES = "releases/"


class ArtifactBucket(Construct):
    """The artifact store: a new private bucket (encrypted, versioned, TLS only, access-logged) or an
    existing one by name. Grants read on exactly what the runtime fetches under the artifact prefix."""

    def __init__(self, scope: Construct, construct_id: str, config: DeployConfig) -> None:
        super().__init__(scope, construct_id)
        self.config = config
        if config.artifact_bucket:
            self.bucket = s3.Bucket.from_bucket_name(self, "Existing", config.artifact_bucket)
        else:
            logs = s3.Bucket(
                self, "AccessLogs",
                block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
                encryption=s3.BucketEncryption.S3_MANAGED,
                enforce_ssl=True,
                object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
                lifecycle_rules=[s3.LifecycleRule(expiration=Duration.days(90))],
                removal_policy=RemovalPolicy.RETAIN,
            )
            self.bucket = s3.Bucket(
                self, "Bucket",
                block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
                encryption=s3.BucketEncryption.S3_MANAGED,
                enforce_ssl=True,
                versioned=True,
                object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
                server_access_logs_bucket=logs,
                server_access_logs_prefix="artifact-bucket/",
                lifecycle_rules=retention_rules(config),
                removal_policy=RemovalPolicy.RETAIN,   # published artifacts outlive a stack teardown
            )

    @property
    def store_uri(self) -> str:
        return "s3://%s/%s" % (self.bucket.bucket_name, self.config.artifact_prefix)

    def artifact_objects_finding(self) -> tuple[str, str]:
        """The cdk-nag finding the artifacts/ prefix grant raises, as cdk-nag spells the resource."""
        return self.prefix_finding("artifacts/", ARTIFACT_OBJECTS)

    def read_findings(self, target: str | None = None) -> list[tuple[str, str]]:
        """The cdk-nag findings `read_statements(target)` raises, acknowledged."""
        findings = [self.artifact_objects_finding()]
        if reads_gate_records(target or self.config.target):
            findings.append(self.prefix_finding(GATES, "gate records are named by artifact id and CPU or GPU class"))
        if self.config.signing:
            findings.append(self.prefix_finding(RELEASES, "release records are numbered as they are published"))
        return findings

    def prefix_finding(self, key_prefix: str, reason: str) -> tuple[str, str]:
        """The cdk-nag finding a grant on `<artifact prefix>/<key_prefix>*` raises, acknowledged with `reason`."""
        prefix = "%s/%s*" % (self.config.artifact_prefix, key_prefix)
        if self.config.artifact_bucket:
            return prefix_rule("arn:<AWS::Partition>:s3:::%s/%s" % (self.config.artifact_bucket, prefix), reason)
        default = self.bucket.node.default_child
        assert isinstance(default, CfnElement)
        logical_id = Stack.of(self).get_logical_id(default)
        return prefix_rule("<%s.Arn>/%s" % (logical_id, prefix), reason)

    def read_statements(self, target: str | None = None) -> list[iam.PolicyStatement]:
        """What a serving function reads, and nothing else: each deployed checkpoint's pointer for `target`
        (default the API's) and, for a CPU target, for its FP32 fallback; the immutable artifact objects;
        and for int8 and cuda targets, the gate records, with ListBucket on their prefix alone (without it S3 answers a
        missing record 403, not 404, and an unproven artifact would be refused instead of falling back)."""
        from laya_serverless.artifact.store import pointer_key
        from laya_serverless.artifact.targets import FALLBACK_TARGET, device_of

        target = target or self.config.target
        served = [target] + ([FALLBACK_TARGET] if device_of(target) == "cpu" and target != FALLBACK_TARGET else [])
        prefix = self.config.artifact_prefix
        pointers = [self.bucket.arn_for_objects("%s/%s" % (prefix, pointer_key(name, each)))
                    for name in self.config.checkpoints for each in served]
        statements = [
            iam.PolicyStatement(actions=["s3:GetObject"], resources=pointers),
            # Content-addressed: artifact ids are only known after publishing, hence the prefix.
            iam.PolicyStatement(actions=["s3:GetObject"],
                                resources=[self.bucket.arn_for_objects("%s/artifacts/*" % prefix)]),
        ]
        if reads_gate_records(target):
            statements += [iam.PolicyStatement(actions=["s3:GetObject"],
                                               resources=[self.bucket.arn_for_objects("%s/%s*" % (prefix, GATES))]),
                           self.list_statement(GATES)]
        if self.config.signing:  # a pointer's artifact must be the latest signed release (artifact/releases.py)
            statements += [iam.PolicyStatement(actions=["s3:GetObject"],
                                               resources=[self.bucket.arn_for_objects("%s/%s*" % (prefix, RELEASES))]),
                           self.list_statement(RELEASES)]
        return statements

    def list_statement(self, key_prefix: str) -> iam.PolicyStatement:
        """ListBucket for keys under `<artifact prefix>/<key_prefix>` only, so an absent key there reads as 404."""
        return iam.PolicyStatement(actions=["s3:ListBucket"], resources=[self.bucket.bucket_arn],
                                   conditions={"StringLike": {"s3:prefix": ["%s/%s*" % (self.config.artifact_prefix,
                                                                                         key_prefix)]}})


def retention_rules(config: DeployConfig) -> list[s3.LifecycleRule]:
    """Job data (inputs, shards, results, outputs, claims: everything under `<artifact prefix>/jobs/`) expires
    after `-c jobs_retention_days`; on this versioned bucket the expired versions go a day later, then their
    delete markers. Unfinished multipart uploads are aborted anywhere in the bucket. Artifacts never expire.
    `laya_artifacts.deploy.bucket.lifecycle_rules` puts the same rules on the bucket `laya-artifacts deploy` creates."""
    jobs = "%s/%s" % (config.artifact_prefix, JOBS_PREFIX)
    return [
        s3.LifecycleRule(id="laya-jobs-expire", prefix=jobs, expiration=Duration.days(config.jobs_retention_days),
                         noncurrent_version_expiration=Duration.days(c.JOBS_NONCURRENT_DAYS)),
        s3.LifecycleRule(id="laya-jobs-delete-markers", prefix=jobs, expired_object_delete_marker=True),
        s3.LifecycleRule(id="laya-abort-multipart",
                         abort_incomplete_multipart_upload_after=Duration.days(c.MULTIPART_ABORT_DAYS)),
    ]


class ApiKeySecret(Construct):
    """The bearer key: a generated secret, or an existing one by name or ARN."""

    def __init__(self, scope: Construct, construct_id: str, config: DeployConfig) -> None:
        super().__init__(scope, construct_id)
        if config.api_key_secret and config.api_key_secret.startswith("arn:"):
            self.secret = secretsmanager.Secret.from_secret_complete_arn(self, "Existing", config.api_key_secret)
        elif config.api_key_secret:
            self.secret = secretsmanager.Secret.from_secret_name_v2(self, "Existing", config.api_key_secret)
        else:
            self.secret = secretsmanager.Secret(
                self, "Secret",
                description="Bearer key of the laya-serverless API (Authorization: Bearer <value>)",
                generate_secret_string=secretsmanager.SecretStringGenerator(
                    password_length=48, exclude_punctuation=True, include_space=False),
            )
            acknowledge(self.secret, API_KEY_ROTATION)

    def grant_read(self, grantee: iam.IGrantable) -> None:
        self.secret.grant_read(grantee)


def reads_gate_records(target: str) -> bool:
    """Whether a function serving `target` reads gate records: int8 and cuda results depend on the kernels of
    the CPU or GPU that serves them (`artifact.platform`, `artifact.gpu`); FP32 on the CPU does not."""
    from laya_serverless.artifact.targets import CPU_INT8, device_of

    return target == CPU_INT8 or device_of(target) == "cuda"
