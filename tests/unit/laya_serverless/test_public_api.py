"""The names a user imports are pinned, and the error tree is one tree with one status map."""

from __future__ import annotations

import inspect

import laya_serverless
from laya_serverless import errors
from laya_serverless.http.statuses import refusal_response, status_of


def test_the_public_names_are_pinned() -> None:
    assert laya_serverless.__all__ == ["ArtifactError", "Decider", "InferenceError", "LayaError",
                                       "QuestionError", "RequestError", "SettingsError", "StateError"]
    assert all(hasattr(laya_serverless, name) for name in laya_serverless.__all__)


def test_every_error_descends_from_laya_error() -> None:
    classes = [c for _, c in inspect.getmembers(errors, inspect.isclass) if issubclass(c, Exception)]
    assert len(classes) > 10 and all(issubclass(c, errors.LayaError) for c in classes)


def test_the_runtime_s_tree_holds_no_build_only_error() -> None:
    # the gate's refusal, deploy's step failure and the demo's check live in `laya_artifacts.errors`
    assert not {"GateFailed", "DeployFailed", "DemoError"} & set(vars(errors))


REFUSALS = [c for _, c in inspect.getmembers(errors, inspect.isclass)
            if issubclass(c, errors.RequestError) and c is not errors.RequestError]


def test_every_refusal_kind_declares_its_own_status() -> None:
    """A status lives on the class (no table elsewhere): every kind but the 500 states one of its own or a parent's."""
    assert len(REFUSALS) > 10
    for kind in REFUSALS:
        assert 400 <= kind.status < 600 and kind.error_type
        declared = [k for k in kind.__mro__ if "status" in vars(k)]
        assert declared[0] is not errors.RequestError or kind is errors.InferenceFailed, kind.__name__
    assert status_of(errors.TooLarge("x")) == 413 and status_of(errors.InvalidRequest("x")) == 422
    assert (status_of(errors.MalformedRequest("x")), status_of(errors.MalformedRequest("x"), strict=True)) == (400, 422)
    assert status_of(errors.MalformedEvent("x"), strict=True) == 400 and status_of(errors.DeviceOutOfMemory("x")) == 503


def test_only_the_503s_ask_to_retry() -> None:
    for kind in REFUSALS:
        response = refusal_response(kind("why"))
        assert response.status_code == kind.status and response.body == b'{"detail":"why"}'
        assert ("retry-after" in response.headers) == (kind.status == 503)


def test_settings_have_one_source_of_defaults() -> None:
    from laya_serverless.settings import Settings

    built, read = Settings(), Settings.from_environ({})
    assert built == read and Settings.of() == read
    deployment = built.deployment
    assert deployment.default_model in deployment.deployed  # the default model is one that is deployed
