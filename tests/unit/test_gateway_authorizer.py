"""The gateway's TOKEN authorizer: exact `Bearer <key>` match against Secrets Manager (moto)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SOURCE = Path(__file__).resolve().parents[2] / "functions" / "gateway_authorizer" / "authorizer.py"
METHOD_ARN = "arn:aws:execute-api:eu-west-1:123456789012:abcdef1234/prod/POST/laya/v1/systemone"
KEY = "s3cr3t-key-0123456789"


@pytest.fixture()
def authorizer(monkeypatch, moto_aws):
    spec = importlib.util.spec_from_file_location("gateway_authorizer_under_test", SOURCE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    client = moto_aws("secretsmanager")
    arn = client.create_secret(Name="laya-api-key", SecretString=KEY)["ARN"]
    monkeypatch.setenv(module.SECRET_ENV, arn)
    yield module, client


def effect(result: dict) -> str:
    [statement] = result["policyDocument"]["Statement"]
    return statement["Effect"]


@pytest.mark.parametrize("header, allowed", [
    ("Bearer " + KEY, True),
    ("Bearer " + KEY + " ", True),     # spaces and tabs around the value are not part of it (RFC 9110 5.5),
    ("\tBearer " + KEY, True),          # as in the app and uvicorn: every path agrees
    ("Bearer " + KEY + " x", False),
    ("bearer " + KEY, False),
    ("Bearer  " + KEY, False),
    (KEY, False),
    ("Bearer wrong", False),
    ("", False),
    (None, False),
    ("Bearer s3cr3t-kéy-\udcff", False),   # odd bytes compare as False, never raise
])
def test_only_the_exact_bearer_header_is_allowed(authorizer, header, allowed):
    module, client = authorizer
    result = module.handler({"type": "TOKEN", "authorizationToken": header, "methodArn": METHOD_ARN}, None, client)
    assert effect(result) == ("Allow" if allowed else "Deny")


def test_the_policy_covers_every_route_of_the_stage_so_the_gateway_cache_is_safe(authorizer):
    module, client = authorizer
    result = module.handler({"authorizationToken": "Bearer " + KEY, "methodArn": METHOD_ARN}, None, client)
    [statement] = result["policyDocument"]["Statement"]
    assert statement["Resource"] == "arn:aws:execute-api:eu-west-1:123456789012:abcdef1234/prod/*/*"
    assert statement["Action"] == "execute-api:Invoke"


def test_the_secret_is_read_once_per_ttl(authorizer):
    module, client = authorizer

    class Counting:
        calls = 0

        def get_secret_value(self, **kwargs):
            Counting.calls += 1
            return client.get_secret_value(**kwargs)

    counting = Counting()
    assert module.api_key(counting, now=0.0) == KEY
    assert module.api_key(counting, now=module.SECRET_TTL_S - 1) == KEY
    assert Counting.calls == 1
    client.put_secret_value(SecretId="laya-api-key", SecretString="rotated")
    assert module.api_key(counting, now=module.SECRET_TTL_S + 1) == "rotated"
    assert Counting.calls == 2
