"""The artifact bucket `laya-artifacts deploy` publishes to before the stack exists: created as the stack would
create its own (private, SSE-S3, versioned, TLS only, owner-enforced) when absent, checked when it exists.

The stack then takes it with `-c artifact_bucket=NAME` (`infra/laya_infra/storage.py`), so one CloudFormation
deploy finds its artifacts already in place (docs/deploy.md says why this and not a bucket-only first deploy).
"""

from __future__ import annotations

import json
from typing import Any

from laya_artifacts.errors import DeployFailed

BUCKET_PREFIX = "laya-serverless"
_ALL_BLOCKED = {"BlockPublicAcls": True, "IgnorePublicAcls": True, "BlockPublicPolicy": True,
                "RestrictPublicBuckets": True}
_MISSING = ("404", "NoSuchBucket", "NotFound")
# The stack's retention (infra/laya_infra/constants.py; a test ties them): job data expires, artifacts never do.
DEFAULT_JOBS_RETENTION_DAYS = 30
MAX_JOBS_RETENTION_DAYS = 3650
JOBS_NONCURRENT_DAYS = 1
MULTIPART_ABORT_DAYS = 7
JOBS_PREFIX = "jobs/"  # laya_serverless.jobs.store_keys.JOBS_PREFIX
_NOT_YOURS = ("403", "AccessDenied", "Forbidden")


def _code(error: Exception) -> str:
    return str(getattr(error, "response", {}).get("Error", {}).get("Code", ""))


def default_bucket_name(sts: Any, region: str) -> str:
    """`laya-serverless-<account>-<region>`: one per account and region, the same on every run."""
    return "%s-%s-%s" % (BUCKET_PREFIX, sts.get_caller_identity()["Account"], region)


def _partition(region: str) -> str:
    return "aws-cn" if region.startswith("cn-") else "aws-us-gov" if region.startswith("us-gov-") else "aws"


def tls_only_policy(name: str, region: str) -> str:
    arn = "arn:%s:s3:::%s" % (_partition(region), name)
    return json.dumps({"Version": "2012-10-17", "Statement": [{
        "Sid": "DenyInsecureTransport", "Effect": "Deny", "Principal": {"AWS": "*"}, "Action": "s3:*",
        "Resource": [arn, arn + "/*"],
        "Condition": {"Bool": {"aws:SecureTransport": "false"}}}]})


def create_bucket(s3: Any, name: str, region: str) -> None:
    """A private bucket: all public access blocked, SSE-S3 by default, versioned, TLS only, ACLs disabled."""
    location = {} if region == "us-east-1" else {"CreateBucketConfiguration": {"LocationConstraint": region}}
    s3.create_bucket(Bucket=name, ObjectOwnership="BucketOwnerEnforced", **location)
    s3.put_public_access_block(Bucket=name, PublicAccessBlockConfiguration=dict(_ALL_BLOCKED))
    s3.put_bucket_encryption(Bucket=name, ServerSideEncryptionConfiguration={
        "Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]})
    s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
    s3.put_bucket_policy(Bucket=name, Policy=tls_only_policy(name, region))


def lifecycle_rules(artifact_prefix: str, retention_days: int) -> list[dict[str, Any]]:
    """The stack's lifecycle rules (`laya_infra.storage.retention_rules`) as S3's API spells them: everything
    under `<artifact_prefix>/jobs/` expires after `retention_days`, its old versions a day later, then their delete
    markers; unfinished multipart uploads are aborted bucket-wide."""
    jobs = {"Prefix": "%s/%s" % (artifact_prefix.strip("/"), JOBS_PREFIX)}
    return [
        {"ID": "laya-jobs-expire", "Filter": jobs, "Status": "Enabled", "Expiration": {"Days": retention_days},
         "NoncurrentVersionExpiration": {"NoncurrentDays": JOBS_NONCURRENT_DAYS}},
        {"ID": "laya-jobs-delete-markers", "Filter": jobs, "Status": "Enabled",
         "Expiration": {"ExpiredObjectDeleteMarker": True}},
        {"ID": "laya-abort-multipart", "Filter": {"Prefix": ""}, "Status": "Enabled",
         "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": MULTIPART_ABORT_DAYS}},
    ]


def ensure_lifecycle(s3: Any, name: str, artifact_prefix: str, retention_days: int) -> bool:
    """Put `lifecycle_rules` on `name`, keeping the bucket's other rules (ours are replaced by their IDs); True
    when something changed. S3 replaces a lifecycle configuration whole, hence the merge."""
    try:
        present = s3.get_bucket_lifecycle_configuration(Bucket=name).get("Rules", [])
    except Exception as exc:
        if _code(exc) != "NoSuchLifecycleConfiguration":
            raise
        present = []
    ours = lifecycle_rules(artifact_prefix, retention_days)
    ids = {rule["ID"] for rule in ours}
    if [rule for rule in present if rule.get("ID") in ids] == ours:
        return False
    kept = [rule for rule in present if rule.get("ID") not in ids]
    s3.put_bucket_lifecycle_configuration(Bucket=name, LifecycleConfiguration={"Rules": kept + ours})
    return True


def bucket_problems(s3: Any, name: str) -> list[str]:
    """What keeps an existing bucket from holding artifacts as the stack's own would: every one, at once."""
    problems = []
    try:
        blocked = s3.get_public_access_block(Bucket=name)["PublicAccessBlockConfiguration"]
    except Exception as exc:
        if _code(exc) != "NoSuchPublicAccessBlockConfiguration":
            raise
        blocked = {}
    if any(not blocked.get(flag) for flag in _ALL_BLOCKED):
        problems.append("public access is not blocked (all four settings)")
    try:
        s3.get_bucket_encryption(Bucket=name)
    except Exception as exc:
        if _code(exc) != "ServerSideEncryptionConfigurationNotFoundError":
            raise
        problems.append("no default encryption")
    if s3.get_bucket_versioning(Bucket=name).get("Status") != "Enabled":
        problems.append("versioning is not enabled")
    return problems


def ensure_bucket(s3: Any, name: str, region: str) -> bool:
    """Create `name` when absent (True), or check the one there (False); refuse one that is not private."""
    try:
        s3.head_bucket(Bucket=name)
    except Exception as exc:
        if _code(exc) in _NOT_YOURS:
            raise DeployFailed("bucket %s exists and this account cannot use it; name another with "
                               "-c artifact_bucket=NAME" % name) from exc
        if _code(exc) not in _MISSING:
            raise
        create_bucket(s3, name, region)
        return True
    problems = bucket_problems(s3, name)
    if problems:
        raise DeployFailed("bucket %s is not private and versioned as the stack's own: %s (fix it, or name "
                           "another with -c artifact_bucket=NAME)" % (name, "; ".join(problems)))
    return False


__all__ = ["bucket_problems", "create_bucket", "default_bucket_name", "ensure_bucket", "ensure_lifecycle",
           "lifecycle_rules", "tls_only_policy"]
