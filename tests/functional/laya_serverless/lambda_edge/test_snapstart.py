"""SnapStart hooks: every deployed decider warmed before the snapshot; after a restore, the key re-read."""

from __future__ import annotations

import random
from typing import Any

from fastapi.testclient import TestClient

from laya_serverless.http.app import create_app
from laya_serverless.lambda_edge import snapstart
from laya_serverless.protocol.routing import Registry
from laya_serverless.settings import Settings
from tests.functional.laya_serverless.http.test_app_fast import QUESTIONS, fake_decider


class _Secrets:
    def __init__(self, value: str) -> None:
        self.value = value

    def get_secret_value(self, SecretId: str) -> dict[str, Any]:  # noqa: N803 - boto3's spelling
        return {"SecretString": self.value}


def _app(**settings: Any) -> Any:
    chosen = Settings.of(**settings)
    deciders = {"english": fake_decider([1.0, 0.0]), "multilingual": fake_decider([0.0, 1.0])}
    return create_app(deciders, chosen, registry=Registry()), chosen


def test_before_the_snapshot_every_decider_answers_once() -> None:
    app, _ = _app()
    sessions = [d.session for d in app.state.serving.deployment.deciders.values()]
    assert snapstart.warm(app.state.serving) == 2
    assert all(len(s.calls) == 1 for s in sessions)


def test_a_deployment_that_could_not_load_warms_nothing() -> None:
    app = create_app({}, Settings.of(), unavailable="no artifacts")
    assert snapstart.warm(app.state.serving) == 0


def test_after_a_restore_randomness_is_reseeded_and_the_key_read_again() -> None:
    app, settings = _app(api_key="old-key", api_key_secret="arn:aws:secretsmanager:eu-west-1:1:secret:k")
    client = TestClient(app)
    body = {"state": "x", "questions": QUESTIONS, "lang": "en"}
    assert client.post("/v1/systemone", json=body, headers={"Authorization": "Bearer old-key"}).status_code == 200
    random.seed(7)
    before = random.random()
    random.seed(7)
    snapstart.refresh(app.state.serving, settings, _Secrets("rotated-key"))
    assert random.random() != before
    assert client.post("/v1/systemone", json=body, headers={"Authorization": "Bearer old-key"}).status_code == 401
    assert client.post("/v1/systemone", json=body, headers={"Authorization": "Bearer rotated-key"}).status_code == 200


def test_a_secret_that_cannot_be_read_after_restore_keeps_the_previous_key() -> None:
    app, settings = _app(api_key="old-key", api_key_secret="arn:aws:secretsmanager:eu-west-1:1:secret:k")
    snapstart.refresh(app.state.serving, settings, _Secrets(""))
    assert app.state.serving.authorized("Bearer old-key")
