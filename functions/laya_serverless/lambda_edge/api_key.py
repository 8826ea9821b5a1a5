"""The bearer key from Secrets Manager (`LAYA_API_KEY_SECRET_ARN`): read at INIT and again after a SnapStart restore."""

from __future__ import annotations

from typing import Any

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
    return str(value)
