"""`laya-artifacts deploy` before anything is built: the region `cdk deploy` will use, and credentials that work.

Building and gating take minutes; a deploy that ends in "no credentials" or the wrong region must say so first.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from laya_artifacts.errors import DeployFailed

Progress = Callable[[str], None]


def aws_region(environ: Mapping[str, str], configured: str | None) -> str:
    """The region `cdk deploy` deploys to: AWS_REGION, else boto3's (AWS_DEFAULT_REGION, then the profile's)."""
    region = (environ.get("AWS_REGION") or "").strip() or configured
    if not region:
        raise DeployFailed("no AWS region is configured: set AWS_REGION (or AWS_DEFAULT_REGION), or a region in "
                           "your profile (`aws configure`); cdk deploys there")
    return region


def check_credentials(sts: Any, progress: Progress) -> str:
    """Before anything is built: the account these credentials reach (STS GetCallerIdentity), or one line."""
    try:
        account = str(sts.get_caller_identity()["Account"])
    except Exception as exc:  # botocore's NoCredentialsError, an expired token, a refused call: all said the same
        raise DeployFailed("no usable AWS credentials (%s): configure them (`aws configure`, AWS_PROFILE, or "
                           "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY); nothing was built"
                           % (str(exc).strip() or type(exc).__name__), step="credentials") from exc
    progress("AWS account %s" % account)
    return account


__all__ = ["aws_region", "check_credentials"]
