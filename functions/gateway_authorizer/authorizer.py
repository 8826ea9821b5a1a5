"""API Gateway (REST) TOKEN authorizer: allows a request whose Authorization header is exactly
`Bearer <key>`, the key read from Secrets Manager. Standard library and boto3 only, so the
function ships as this one file.

The gateway caches each answer per header value, so the secret is read rarely; it is also kept
here for a few minutes so a burst of new tokens does not become a burst of Secrets Manager calls.
"""

from __future__ import annotations

import hmac
import os
import time
from typing import Any

SECRET_ENV = "LAYA_API_KEY_SECRET_ARN"
SECRET_TTL_S = 300.0
MAX_KEY_CHARS = 4096  # laya_serverless.configuration's, copied: this function ships alone (a test ties them)
PRINCIPAL = "laya-client"

_cache: dict[str, Any] = {"value": None, "expires": 0.0}


def _client() -> Any:
    import boto3

    return boto3.client("secretsmanager")


class ApiKeyMisconfigured(ValueError):
    """The secret cannot be a key: the gateway answers 500 and the log says why, instead of denying every caller."""


def checked_key(value: str) -> str:
    """The secret as saved, refused (never trimmed) when it is empty, padded or not sendable (`key_problem`)."""
    source = "%s: the API key secret" % SECRET_ENV
    if not value:
        raise ApiKeyMisconfigured("%s is empty; save a key in it" % source)
    if value != value.strip():
        raise ApiKeyMisconfigured("%s has spaces or a newline around it (%d characters, %d without them); save the "
                                  "key without them" % (source, len(value), len(value.strip())))
    problem = key_problem(value)
    if problem:
        raise ApiKeyMisconfigured("%s %s; save a key clients can send" % (source, problem))
    return value


def key_problem(key: str) -> str | None:
    """Why no client could send `key` in a header (laya_serverless.configuration.key_problem, the same rule)."""
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in key):
        return "holds a control character"
    if any(ord(ch) > 0x7E for ch in key):
        return "holds a character that is not printable ASCII, which no HTTP client sends in a header"
    if len(key) > MAX_KEY_CHARS:
        return "is %d characters long; at most %d fit in a request's headers" % (len(key), MAX_KEY_CHARS)
    return None


def api_key(client: Any = None, now: float | None = None) -> str:
    now = time.monotonic() if now is None else now
    if _cache["value"] is None or now >= _cache["expires"]:
        response = (client or _client()).get_secret_value(SecretId=os.environ[SECRET_ENV])
        _cache["value"] = checked_key(response.get("SecretString") or "")  # a refused value is never cached
        _cache["expires"] = now + SECRET_TTL_S
    return _cache["value"]


def matches(header: Any, key: str) -> bool:
    """Constant-time comparison of the header with `Bearer <key>`; any odd value is simply False.

    Spaces and tabs around the value are not part of it (RFC 9110 5.5), as in the app and uvicorn."""
    if not key or not isinstance(header, str):
        return False
    supplied = header.strip(" \t").encode("utf-8", "surrogatepass")
    expected = ("Bearer " + key).encode("utf-8", "surrogatepass")
    return hmac.compare_digest(supplied, expected)


def _every_method(method_arn: str) -> str:
    """`arn:...:api-id/stage/*/*`: the gateway caches one answer per token for every route."""
    parts = method_arn.split("/")
    return "/".join(parts[:2] + ["*", "*"])


def policy(effect: str, method_arn: str) -> dict[str, Any]:
    return {
        "principalId": PRINCIPAL,
        "policyDocument": {
            "Version": "2012-10-17",
            "Statement": [{"Action": "execute-api:Invoke", "Effect": effect, "Resource": _every_method(method_arn)}],
        },
    }


def handler(event: dict[str, Any], _context: Any = None, client: Any = None) -> dict[str, Any]:
    allowed = matches(event.get("authorizationToken"), api_key(client))
    return policy("Allow" if allowed else "Deny", event["methodArn"])
