"""The graph-optimization level a session opens an artifact's graph at: recorded in the decode config when the
build needs one (compact storage folds its Casts at load), else chosen by whether the graph was optimized offline;
an unknown level is refused; the level reaches the session opener."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from laya_serverless.artifact.layout import DECODE_CONFIG_FILE, LOAD_LEVELS, DecodeConfig, write_decode_config
from laya_serverless.core.fallback import open_decision_session
from laya_serverless.core.providers import Placement
from laya_serverless.core.session import Loading
from laya_serverless.errors import ArtifactError
from tests.unit.fakes import SPECIAL
from tests.unit.gpu_fakes import GRAPH, FakeSession


def _config(**extra: object) -> DecodeConfig:
    return DecodeConfig.from_dict({"special_tokens": SPECIAL.__dict__, **extra})


@pytest.mark.parametrize(("raw", "level"), [
    ({}, "ORT_ENABLE_ALL"),
    ({"optimized_offline": True}, "ORT_DISABLE_ALL"),
    ({"optimized_offline": True, "load_optimization": "ORT_ENABLE_BASIC"}, "ORT_ENABLE_BASIC"),
])
def test_the_recorded_level_wins_else_offline_optimization_decides(raw: dict[str, object], level: str) -> None:
    assert _config(**raw).session_level == level


@pytest.mark.parametrize("bad", ["basic", "ORT_ENABLE_EVERYTHING", 1, True])
def test_an_unknown_level_is_refused(bad: object) -> None:
    with pytest.raises(ArtifactError, match="load_optimization"):
        _config(load_optimization=bad)


def test_the_level_is_written_only_when_set(tmp_path: Path) -> None:
    common = {"special": SPECIAL, "max_len": 512, "head_max_len": 192, "temperature": [1.0] * 3,
              "temperature_by_options": {}, "optimized_offline": True}
    write_decode_config(tmp_path, **common)  # type: ignore[arg-type]
    assert "load_optimization" not in json.loads((tmp_path / DECODE_CONFIG_FILE).read_text())
    write_decode_config(tmp_path, **common, load_optimization="ORT_ENABLE_BASIC")  # type: ignore[arg-type]
    assert DecodeConfig.load(tmp_path).session_level == "ORT_ENABLE_BASIC" in LOAD_LEVELS


def test_the_level_reaches_the_session_opener() -> None:
    levels: list[str] = []

    def open_fake(_graph: Path, _providers: object, _threads: object, loading: Loading) -> FakeSession:
        levels.append(loading.level)
        return FakeSession(["CPUExecutionProvider"])

    fake = Placement(available=lambda: ["CPUExecutionProvider"], open=open_fake)
    open_decision_session(GRAPH, "cpu", loading=Loading("ORT_ENABLE_BASIC"), placement=fake)
    open_decision_session(GRAPH, "cpu", placement=fake)
    assert levels == ["ORT_ENABLE_BASIC", "ORT_ENABLE_ALL"]
