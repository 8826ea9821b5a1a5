"""The official Jev client (`typesafe-sdk`) against a real uvicorn server on 127.0.0.1, full and strict."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from laya_serverless import Decider
from laya_serverless.http.app import create_app
from laya_serverless.settings import Settings
from tests.functional.threaded_server import free_port, start_server

pytestmark = pytest.mark.slow
typesafe = pytest.importorskip("typesafe_sdk")


def multilingual_settings(**values: Any) -> Settings:
    """Settings of a deployment whose default checkpoint is `multilingual` (the one these tests deploy)."""
    return Settings.of(default_model="multilingual", **values)


def _serve(app: Any) -> Iterator[str]:
    import uvicorn

    port = free_port()
    server, thread = start_server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    yield "http://127.0.0.1:%d" % port
    server.should_exit = True
    thread.join(timeout=10)


@pytest.fixture(params=[False, True], ids=["full", "strict"])
def base_url(request: pytest.FixtureRequest, tiny_fp32: Path) -> Iterator[str]:
    app = create_app({"multilingual": Decider.from_artifact(tiny_fp32)},
                     multilingual_settings(jev_strict=request.param))
    yield from _serve(app)


def test_the_official_client_reads_every_answer_type(base_url: str) -> None:
    from typesafe_sdk import Choice, Noul, RetryPolicy, TypeSafeClient

    questions = {
        "billing": Noul(instructions="Is this about billing?"),
        "tone": Choice(instructions="What is the tone?", criteria={"calm": None, "angry": "upset, shouting"}),
        "urgency": {"type": "score", "instructions": "How urgent?", "criteria": ["low", "medium", "high"]},
    }
    # The client always sends an API key; with auth off the server ignores it.
    with TypeSafeClient(api_key="unused", base_url=base_url, retry=RetryPolicy(max_retries=0)) as client:
        small = client.system_one(state="I was charged twice. Please help.", questions=questions)
        large = client.system_one(state={"ticket": "my parcel is late " * 200}, questions=questions)  # zstd body
    for result in (small, large):
        assert result.model == "laya-rl-agent" and result.usage.input_tokens > 0
        assert 0.0 <= result.nouls["billing"].noul <= 1.0
        assert result.choices["tone"].choice in ("calm", "angry")
        assert sum(result.choices["tone"].probabilities.values()) == pytest.approx(1.0, abs=1e-9)
        assert 0.0 <= result.scores["urgency"].score <= 2.0
    assert large.usage.input_tokens > small.usage.input_tokens


def test_the_official_client_lists_models_and_reads_request_ids(base_url: str) -> None:
    from typesafe_sdk import Noul, RetryPolicy, TypeSafeClient

    with TypeSafeClient(api_key="unused", base_url=base_url, retry=RetryPolicy(max_retries=0)) as client:
        listed = client.models.list()
        answered = client.system_one(state="hello", questions={"q": Noul(instructions="Is this a greeting?")})
    assert [m.name for m in listed.models] == ["multilingual"]
    assert answered.request_id.startswith("req_")


@pytest.mark.parametrize(("confidence", "should"), [("jev", 14), ("laya", 13)])
def test_jevcompat_strict_mode_is_conformant(tiny_fp32: Path, confidence: str, should: int) -> None:
    """jevcompat 0.1.1 (a test dependency), as docs/operations.md reports it."""
    from jevcompat import runner
    settings = multilingual_settings(jev_strict=True, jev_confidence=confidence, api_key="k3y")
    app = create_app({"multilingual": Decider.from_artifact(tiny_fp32)}, settings)
    for url in _serve(app):
        summary = runner.run(url, key="k3y").summary()
    assert (summary["MUST"]["passed"], summary["MUST"]["tested"]) == (32, 32), summary
    assert (summary["SHOULD"]["passed"], summary["SHOULD"]["tested"]) == (should, 14), summary
