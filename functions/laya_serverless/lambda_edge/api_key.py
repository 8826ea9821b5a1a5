"""The bearer key from Secrets Manager (`LAYA_API_KEY_SECRET_ARN`): read at INIT and again after a SnapStart restore."""

from __future__ import annotations

from typing import Any

from ..configuration import key_problem
from ..errors import SettingsError
from ..settings import API_KEY_SECRET


def read_api_key(secret_arn: str, secrets_client: Any = None) -> str:
    """The secret's string value; a secret that cannot be read, or holds no string, is a SettingsError."""
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    client = secrets_client or boto3.client("secretsmanager")
    try:
        value = client.get_secret_value(SecretId=secret_arn).get("SecretString") or ""
    except (BotoCoreError, ClientError) as exc:
        raise SettingsError("%s: cannot read the API key secret (%s)" % (API_KEY_SECRET, type(exc).__name__)) from exc
    if not value:
        raise SettingsError("%s: the API key secret has no string value" % API_KEY_SECRET)
    return check_api_key(str(value), "%s: the API key secret" % API_KEY_SECRET)


def check_api_key(key: str, source: str) -> str:
    """`key` as configured, or a one-line SettingsError naming `source`: a key that is empty, has spaces around it or
    holds what no client can send (`configuration.key_problem`: control characters, non-ASCII, over 4096 characters)
    would lock every caller out, or nobody, without a word. It is never trimmed: the secret's owner decides what the
    key is."""
    if not key:
        raise SettingsError("%s is empty; set a key, or unset it to turn auth off" % source)
    if key != key.strip():
        raise SettingsError("%s has spaces or a newline around it (%d characters, %d without them); save the key "
                            "without them" % (source, len(key), len(key.strip())))
    problem = key_problem(key)
    if problem:
        raise SettingsError("%s %s; save a key clients can send" % (source, problem))
    return key
