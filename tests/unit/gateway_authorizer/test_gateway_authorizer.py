"""The gateway's TOKEN authorizer: exact `Bearer <key>` match against Secrets Manager (moto)."""

from __future__ import annotations

import importlib.util

import pytest

from tests.paths import ROOT

SOURCE = ROOT / "functions" / "gateway_authorizer" / "authorizer.py"
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


@pytest.mark.parametrize("saved, detail", [
    ("", "is empty; save a key in it"),
    (KEY + "\n", r"has spaces or a newline around it \(22 characters, 21 without them\)"),
    ("  " + KEY, r"has spaces or a newline around it \(23 characters, 21 without them\)"),
    (KEY[:5] + "\x00" + KEY[5:], "holds a control character"),
    (KEY + "é", "holds a character that is not printable ASCII"),
    ("k" * 20_000, "is 20000 characters long; at most 4096 fit"),
])
def test_a_secret_that_cannot_be_a_key_is_one_clear_error_naming_it_not_a_silent_deny(authorizer, saved, detail):
    """A secret saved with a trailing newline used to deny every caller with no word in any log."""
    module, client = authorizer
    if saved:
        client.put_secret_value(SecretId="laya-api-key", SecretString=saved)
    else:
        client.put_secret_value(SecretId="laya-api-key", SecretBinary=b"\x00")   # no string value at all
    with pytest.raises(module.ApiKeyMisconfigured, match=r"^LAYA_API_KEY_SECRET_ARN: the API key secret " + detail):
        module.handler({"authorizationToken": "Bearer " + saved.strip(), "methodArn": METHOD_ARN}, None, client)
    assert module._cache["value"] is None   # nothing refused is kept


@pytest.mark.parametrize("key", ["", "ok-key", "k\x01y", "kéy", "k" * 4096, "k" * 4097, "\u2028key", "key\x7f"])
def test_the_authorizer_refuses_the_keys_the_runtime_refuses(authorizer, key):
    """The authorizer ships alone with its own copy of the rule; it must say what the runtime says."""
    from laya_serverless.configuration import MAX_KEY_CHARS, key_problem

    module, _ = authorizer
    assert module.MAX_KEY_CHARS == MAX_KEY_CHARS and module.key_problem(key) == key_problem(key)
