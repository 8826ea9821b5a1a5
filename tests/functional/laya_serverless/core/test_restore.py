"""A compact graph's FP16-stored weights are widened on their way into onnxruntime (`core.restore`): the session
answers bit for bit as the graph opened as stored, an in-memory graph is freed as it streams (a file on disk never
is), and a stream or session that fails leaves an error, no thread and no pipe behind."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from laya_serverless.artifact import compact
from laya_serverless.artifact.fetch import MemoryFile
from laya_serverless.core import restore, session
from laya_serverless.core.session import OnnxDecisionSession
from laya_serverless.errors import ArtifactError

LEVEL = "ORT_ENABLE_BASIC"   # the level a compact graph is opened at (`layout.DecodeConfig.session_level`)


def _compact_graph(folder: Path) -> Path:
    """A decision-shaped graph (the five inputs, two outputs) with an embedding table and three 1024 x 1024 weights,
    stored compactly by the build: 10 MiB, the table read in place, two weights folded, one widened."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from laya_artifacts.export.compact import compact_graph

    rng = np.random.default_rng(7)
    width = 1024

    def weight(name: str, *shape: int) -> onnx.TensorProto:   # FP16 values, so compaction stores them in FP16
        return numpy_helper.from_array((rng.standard_normal(shape) / 32).astype(np.float16).astype(np.float32), name)
    nodes = [helper.make_node("Gather", ["table", "input_ids"], ["embedded"]),
             helper.make_node("ReduceMean", ["embedded"], ["pooled"], axes=[1], keepdims=0),
             helper.make_node("MatMul", ["pooled", "w1"], ["h1"]), helper.make_node("MatMul", ["h1", "w2"], ["h2"]),
             helper.make_node("MatMul", ["h2", "w3"], ["h3"]), helper.make_node("MatMul", ["h3", "head"], ["logits"]),
             helper.make_node("ReduceSum", ["h3"], ["act_logits"], keepdims=1)]
    inputs = [helper.make_tensor_value_info(name, kind, shape) for name, kind, shape in (
        ("input_ids", TensorProto.INT64, ["r", "t"]), ("attention_mask", TensorProto.INT64, ["r", "t"]),
        ("marker_pos", TensorProto.INT64, ["r", "o"]), ("marker_mask", TensorProto.BOOL, ["r", "o"]),
        ("qtype", TensorProto.INT64, ["r"]))]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["r", 2]),
               helper.make_tensor_value_info("act_logits", TensorProto.FLOAT, ["r", 1])]
    initializers = [weight("table", 2048, width), weight("w1", width, width), weight("w2", width, width),
                    weight("w3", width, width), weight("head", width, 2)]
    model = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs, initializers),
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(folder / "fp32.onnx"))
    record = compact_graph(folder / "fp32.onnx", folder / "model.onnx")
    assert record["fp16"] == 4
    return folder / "model.onnx"


@pytest.fixture(scope="module")
def graph(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _compact_graph(tmp_path_factory.mktemp("restore"))


def _feeds(seed: int) -> dict[str, np.ndarray]:
    ids = np.random.default_rng(seed).integers(0, 2048, (3, 17))
    return {"input_ids": ids, "attention_mask": np.ones_like(ids), "marker_pos": np.zeros((3, 2), np.int64),
            "marker_mask": np.ones((3, 2), bool), "qtype": np.zeros(3, np.int64)}


def _in_memory(graph: Path) -> MemoryFile:
    memory = MemoryFile("model.onnx")
    with open(graph, "rb") as source, open(memory.path, "wb") as target:
        shutil.copyfileobj(source, target)
    return memory


def test_the_graph_s_weights_go_all_three_ways(graph: Path) -> None:
    found = compact.scan(graph.read_bytes())
    assert found is not None
    assert sorted((w.name, w.way) for w in found[2]) == [("table", "in-place"), ("w1", "fold"), ("w2", "fold"),
                                                          ("w3", "widen")]


def test_a_restored_session_answers_bit_for_bit_as_the_graph_opened_as_stored(graph: Path) -> None:
    memory = _in_memory(graph)
    restored = OnnxDecisionSession(memory.path, threads=1, level=LEVEL, after_parse=memory.close, restore=True)
    as_stored = OnnxDecisionSession(graph, threads=1, level=LEVEL)
    for seed in range(4):
        for got, expected in zip(restored.run(_feeds(seed)), as_stored.run(_feeds(seed)), strict=True):
            assert got.tobytes() == expected.tobytes()


def test_an_in_memory_graph_is_freed_as_it_streams(graph: Path) -> None:
    memory = _in_memory(graph)
    held: list[int] = []

    def release() -> None:   # what the memory file still holds once onnxruntime has parsed the graph
        held.append(os.fstat(memory._fd).st_blocks * 512)   # type: ignore[arg-type]
        memory.close()

    OnnxDecisionSession(memory.path, threads=1, level=LEVEL, after_parse=release, restore=True)
    size = graph.stat().st_size
    # all but the pipe's last MiB or so: the in-place table at once, the rest behind what onnxruntime has read
    assert held and held[0] < 0.3 * size, (held, size)


def test_a_graph_on_disk_is_never_freed(graph: Path, tmp_path: Path) -> None:
    copy = tmp_path / "model.onnx"
    shutil.copyfile(graph, copy)
    before = hashlib.sha256(copy.read_bytes()).hexdigest()
    OnnxDecisionSession(copy, threads=1, level=LEVEL, after_parse=lambda: None, restore=True)
    assert hashlib.sha256(copy.read_bytes()).hexdigest() == before


def _leftovers() -> tuple[list[str], list[str]]:
    folders = [p.name for p in Path(tempfile.gettempdir()).glob("laya-graph-*")]
    return folders, [t.name for t in threading.enumerate() if t.name == "laya-graph-stream"]


def test_a_stream_that_fails_fails_the_session_and_leaves_nothing(graph: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    widened = restore._Source.widened

    def broken(self: Any, start: int, end: int, into: Any = None) -> Any:
        if into is None:   # the stream, not the in-place table
            raise OSError("the source went away")
        return widened(self, start, end, into)
    monkeypatch.setattr(restore._Source, "widened", broken)
    before = _leftovers()
    with pytest.raises(ArtifactError, match="cannot be loaded|could not be streamed"):
        OnnxDecisionSession(graph, threads=1, level=LEVEL, restore=True)
    assert _leftovers() == before


def test_a_session_that_fails_before_reading_leaves_nothing(graph: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuses(*_args: Any) -> Any:
        raise RuntimeError("no provider")
    monkeypatch.setattr(session, "_inference_session", refuses)
    before = _leftovers()
    with pytest.raises(ArtifactError, match="no provider"):
        OnnxDecisionSession(graph, threads=1, level=LEVEL, restore=True)
    assert _leftovers() == before


def test_where_no_pipe_can_be_made_the_graph_is_opened_as_stored(graph: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    def refused(*_args: Any) -> None:
        raise PermissionError("no FIFOs here")
    monkeypatch.setattr(os, "mkfifo", refused)
    opened = OnnxDecisionSession(graph, threads=1, level=LEVEL, restore=True)
    assert "opened as stored" in caplog.text and _leftovers()[0] == []
    expected = OnnxDecisionSession(graph, threads=1, level=LEVEL).run(_feeds(0))
    assert [a.tobytes() for a in opened.run(_feeds(0))] == [a.tobytes() for a in expected]


def test_where_splicing_is_refused_the_bytes_are_copied(graph: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    def refused(*_args: Any, **_kwargs: Any) -> int:
        raise OSError(errno.EINVAL, "splice")
    monkeypatch.setattr(os, "splice", refused)
    memory = _in_memory(graph)
    opened = OnnxDecisionSession(memory.path, threads=1, level=LEVEL, after_parse=memory.close, restore=True)
    expected = OnnxDecisionSession(graph, threads=1, level=LEVEL).run(_feeds(1))
    assert [a.tobytes() for a in opened.run(_feeds(1))] == [a.tobytes() for a in expected]


def test_large_blocks_are_mapped_on_their_own_only_while_onnxruntime_parses(graph: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    steps: list[str] = []
    monkeypatch.setattr(restore, "_mmap_threshold", lambda size: steps.append("threshold %d" % size))
    parse = session._inference_session

    def watched(graph_path: Path, options: Any, providers: Any, after_parse: Any) -> Any:
        def parsed() -> None:
            steps.append("parsed")
            after_parse()
        return parse(graph_path, options, providers, parsed)
    monkeypatch.setattr(session, "_inference_session", watched)
    OnnxDecisionSession(graph, threads=1, level=LEVEL, restore=True)
    low, high = "threshold %d" % restore.PARSE_MMAP_THRESHOLD, "threshold %d" % restore.MMAP_THRESHOLD_MAX
    assert steps[:3] == [low, "parsed", high] and steps[-1] == high


def test_every_session_the_restore_makes_is_made_on_the_caller_s_thread(graph: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """onnxruntime flushes denormals on the thread that creates the process's first session, once: were the stream's
    thread first, the decision session's own thread would compute without it."""
    import onnxruntime as ort

    threads: list[str] = []
    made = ort.InferenceSession.__init__

    def recorded(self: Any, *args: Any, **kwargs: Any) -> None:
        threads.append(threading.current_thread().name)
        made(self, *args, **kwargs)
    monkeypatch.setattr(ort.InferenceSession, "__init__", recorded)
    scan = compact.scan

    def all_widened(buf: Any) -> Any:   # nothing widened before the stream starts: all of it on its thread
        found = scan(buf)
        for weight in found[2]:
            weight.way = "widen"
        return found
    monkeypatch.setattr(restore, "scan", all_widened)
    OnnxDecisionSession(graph, threads=1, level=LEVEL, restore=True)
    assert threads and set(threads) == {threading.current_thread().name}
