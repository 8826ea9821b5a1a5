"""The bearer key read from Secrets Manager is used exactly as saved, or refused at INIT with one line naming it."""

from __future__ import annotations

from typing import Any

import pytest

from laya_serverless.errors import SettingsError
from laya_serverless.lambda_edge.api_key import read_api_key

ARN = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:laya-api-key"


class Secrets:
    def __init__(self, value: str) -> None:
        self.value = value

    def get_secret_value(self, **_: Any) -> dict[str, str]:
        return {"SecretString": self.value}


def test_a_saved_key_is_used_as_saved() -> None:
    assert read_api_key(ARN, Secrets("s3cr3t-key")) == "s3cr3t-key"


@pytest.mark.parametrize(("saved", "detail"), [
    ("", "the API key secret has no string value"),
    ("s3cr3t-key\n", r"the API key secret has spaces or a newline around it \(11 characters, 10 without them\); "
                     "save the key without them"),
    (" s3cr3t-key", r"the API key secret has spaces or a newline around it \(11 characters, 10 without them\)"),
    ("s3cr3t\x1b-key", "the API key secret holds a control character; save a key clients can send"),
    ("s3cr3t-kéy", "the API key secret holds a character that is not printable ASCII"),
    ("k" * 4097, "the API key secret is 4097 characters long; at most 4096 fit in a request's headers"),
])
def test_a_secret_that_cannot_be_a_key_is_refused_naming_it_never_trimmed(saved: str, detail: str) -> None:
    """A secret saved with a trailing newline used to be served as is: every caller got 401, and no log said why."""
    with pytest.raises(SettingsError, match="^LAYA_API_KEY_SECRET_ARN: " + detail) as refused:
        read_api_key(ARN, Secrets(saved))
    assert "\n" not in str(refused.value)
