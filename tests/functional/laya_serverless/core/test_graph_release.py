"""A graph held in memory is freed once onnxruntime has parsed it, before the session is initialized (so its bytes
do not sit beside the session's own copies at INIT), and the session answers as one opened the usual way; a GPU
session, which may reopen its graph on the CPU later, frees nothing."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from laya_serverless.artifact.fetch import MemoryFile
from laya_serverless.core.fallback import open_decision_session
from laya_serverless.core.session import Loading, OnnxDecisionSession
from tests.unit.gpu_fakes import placement


def _feeds() -> dict[str, np.ndarray]:
    return {"input_ids": np.array([[2, 40, 41, 42, 43, 3]], dtype=np.int64),
            "attention_mask": np.ones((1, 6), dtype=np.int64), "marker_pos": np.array([[2, 4]], dtype=np.int64),
            "marker_mask": np.ones((1, 2), dtype=bool), "qtype": np.zeros(1, dtype=np.int64)}


def test_an_in_memory_graph_is_freed_after_parsing_and_the_session_answers_the_same(
        tiny_modernbert: tuple[Path, Path]) -> None:
    graph = tiny_modernbert[1] / "model.onnx"
    memory = MemoryFile("model.onnx")
    with open(graph, "rb") as source, open(memory.path, "wb") as target:
        shutil.copyfileobj(source, target)
    calls: list[bool] = []

    def release() -> None:
        calls.append(True)
        memory.close()

    released = OnnxDecisionSession(memory.path, threads=1, after_parse=release)
    assert calls == [True]
    usual = OnnxDecisionSession(graph, threads=1)
    for got, expected in zip(released.run(_feeds()), usual.run(_feeds()), strict=True):
        assert got.tobytes() == expected.tobytes()


def test_a_gpu_session_frees_nothing_after_parsing_and_restores_nothing() -> None:
    from tests.unit.gpu_fakes import GRAPH, FakeSession

    seen: list[Loading] = []
    fake, _ = placement(["CUDAExecutionProvider", "CPUExecutionProvider"],
                        FakeSession(["CUDAExecutionProvider", "CPUExecutionProvider"]))
    opener = fake.open

    def spy(graph: Path, providers: object, threads: object, loading: Loading) -> object:
        seen.append(loading)
        return opener(graph, providers, threads, loading)   # type: ignore[arg-type]

    from dataclasses import replace

    open_decision_session(GRAPH, "cuda", loading=Loading("ORT_DISABLE_ALL", lambda: None, restore=True), cpu_retry=True,
                          placement=replace(fake, open=spy))   # type: ignore[arg-type]
    assert [(loading.after_parse, loading.restore) for loading in seen] == [(None, False)]   # as stored, too


def test_the_loader_frees_an_in_memory_graph_once_parsed_and_serves_the_same_answers(
        tiny_fp32: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    from laya_artifacts.deploy.publish import publish
    from laya_serverless import Decider
    from laya_serverless.artifact.fetch import read_manifest
    from laya_serverless.artifact.store import LocalStore
    from laya_serverless.assembly.loader import open_artifact

    store = LocalStore(tmp_path / "store")
    artifact_id = publish(tiny_fp32, store)
    closed: list[bool] = []
    close = MemoryFile.close

    def counted(memory: MemoryFile) -> None:
        closed.append(memory._fd is not None)
        close(memory)

    monkeypatch.setattr(MemoryFile, "close", counted)
    settings = SimpleNamespace(graph_in_memory=True)
    decider, _ = open_artifact(store, artifact_id, read_manifest(store, artifact_id), settings,  # type: ignore[arg-type]
                               tmp_path / "cache", 1)
    assert closed == [True, False]   # freed once parsed; the fetch's own release afterwards found it closed
    questions = {"team": {"type": "choice", "instructions": "Which team?", "criteria": ["billing", "tech", "other"]}}
    assert decider.predict("I was charged twice", questions) == Decider.from_artifact(tiny_fp32).predict(
        "I was charged twice", questions)
