"""`laya-artifacts deploy` before it builds anything: the region read as `cdk deploy` reads it (AWS_REGION, then
boto3's AWS_DEFAULT_REGION and profile), and the credentials checked with STS, each failure one line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import NoCredentialsError

from laya_artifacts.deploy import command, preflight
from laya_artifacts.errors import DeployFailed


@pytest.mark.parametrize("environ, configured, region", [
    ({"AWS_REGION": "eu-west-1"}, "us-east-1", "eu-west-1"),   # AWS_REGION first, as the CDK CLI reads it
    ({}, "us-east-2", "us-east-2"),                             # boto3's: AWS_DEFAULT_REGION or the profile's
    ({"AWS_REGION": " "}, "ap-south-1", "ap-south-1"),
])
def test_the_region_is_the_one_cdk_deploys_to(environ: dict[str, str], configured: str, region: str) -> None:
    assert preflight.aws_region(environ, configured) == region


def test_no_region_is_one_line_naming_both_variables_and_the_profile() -> None:
    with pytest.raises(DeployFailed, match=r"^no AWS region is configured: set AWS_REGION \(or AWS_DEFAULT_REGION\), "
                                           r"or a region in your profile"):
        preflight.aws_region({}, None)


def test_aws_seams_reads_aws_region(moto_aws: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    assert command.aws_seams({"AWS_REGION": "eu-central-1"}).s3.meta.region_name == "eu-central-1"


class NoCredentials:
    def get_caller_identity(self) -> dict[str, str]:
        raise NoCredentialsError()


def test_missing_credentials_stop_the_deploy_before_anything_is_built(tmp_path: Path) -> None:
    def build(*_args: Any) -> Path:
        raise AssertionError("built without credentials")

    seams = command.Seams(s3=None, sts=NoCredentials(), secrets=None, run_cdk=lambda _a: 0, build=build,
                          resolve=lambda source: (tmp_path, source, None))
    with pytest.raises(DeployFailed, match=r"^no usable AWS credentials \(Unable to locate credentials\): configure "
                                           r"them .*; nothing was built$") as refused:
        command.deploy(command.Request(cache=tmp_path), seams)
    assert refused.value.step == "credentials"


def test_credentials_that_work_name_the_account(moto_aws: Any) -> None:
    said: list[str] = []
    assert preflight.check_credentials(moto_aws("sts"), said.append) == "123456789012"
    assert said == ["AWS account 123456789012"]
