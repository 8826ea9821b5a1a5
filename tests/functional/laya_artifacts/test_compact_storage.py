"""Lossless compact storage: a graph whose FP16-exact initializers are stored in FP16 behind Casts answers bit for
bit as the FP32-stored graph does, at the level its decode config records, and is valid ONNX at about half the
bytes; a tensor FP16 cannot hold exactly stays FP32."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from laya_artifacts.export.compact import FP16_SUFFIX, MIN_ELEMENTS, RESTORE_LEVEL, compact_artifact, compact_graph
from laya_artifacts.search.precision import prepare_artifact
from laya_serverless import Decider
from laya_serverless.artifact.layout import GRAPH_FILE, DecodeConfig
from tests.conftest import golden_slice


class _Recording:
    """The decider's session, keeping every pass's raw outputs."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.outputs: list[tuple[np.ndarray, np.ndarray]] = []

    def run(self, feeds: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        logits, act = self.session.run(feeds)
        self.outputs.append((logits.copy(), act.copy()))
        return logits, act


def _outputs(artifact: Path, cases: list[dict[str, Any]]) -> list[tuple[np.ndarray, np.ndarray]]:
    decider = Decider.from_artifact(artifact, verify=False)
    recording = _Recording(decider.session)
    decider.session = recording
    for case in cases:
        questions = {qid: {k: v for k, v in q.items() if k in ("type", "instructions", "criteria", "labels")}
                     for qid, q in case["questions"].items()}
        decider.predict(case["state"], questions)
    return recording.outputs


@pytest.fixture(scope="module")
def artifacts(tiny_modernbert: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the FP32-stored cpu-fp32 artifact as built before, the same stored compactly) of the tiny ModernBERT."""
    root = tmp_path_factory.mktemp("compact")
    raw = tiny_modernbert[1]
    fp32 = prepare_artifact(raw / GRAPH_FILE, raw, root / "fp32")
    compact = root / "compact"
    shutil.copytree(fp32, compact)
    record = compact_artifact(compact)
    assert record["fp16"] > 0 and record["kept_fp32"] == 0 and record["restored_at_load_by"] == RESTORE_LEVEL
    return fp32, compact


def test_compact_storage_answers_bit_for_bit_as_the_fp32_graph(artifacts: tuple[Path, Path]) -> None:
    cases = golden_slice("tiny-modernbert", keep_case=lambda i, _row: i % 6 == 0)["rows"]
    fp32, compact = (_outputs(artifact, cases) for artifact in artifacts)
    assert len(fp32) == len(compact) == len(cases) >= 10
    for (logits, act), (logits_c, act_c) in zip(fp32, compact, strict=True):
        assert logits.tobytes() == logits_c.tobytes() and act.tobytes() == act_c.tobytes()


def test_the_compact_graph_is_valid_onnx_about_half_the_bytes_and_records_its_level(
        artifacts: tuple[Path, Path]) -> None:
    import onnx

    fp32, compact = artifacts
    model = onnx.load(str(compact / GRAPH_FILE))
    onnx.checker.check_model(model, full_check=False)
    assert model.ir_version <= 10   # onnxruntime 1.31 loads IR <= 13; onnx 1.23 would write 14
    casts = [n for n in model.graph.node if n.op_type == "Cast" and n.input[0].endswith(FP16_SUFFIX)]
    assert casts and model.graph.node[: len(casts)] == casts   # before every reader: still topologically sorted
    assert (compact / GRAPH_FILE).stat().st_size < 0.6 * (fp32 / GRAPH_FILE).stat().st_size
    assert DecodeConfig.load(compact).session_level == RESTORE_LEVEL
    assert DecodeConfig.load(fp32).load_optimization is None   # an FP32-stored graph keeps its config's bytes


def test_a_tensor_fp16_cannot_hold_stays_fp32(tmp_path: Path) -> None:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    exact = (np.arange(MIN_ELEMENTS) % 1024).astype(np.float32) / 2   # halves below 512: 11 bits, exact in FP16
    inexact = exact + np.float32(1e-3)
    graph = helper.make_graph(
        [helper.make_node("Add", ["w_exact", "w_inexact"], ["s"]), helper.make_node("Add", ["x", "s"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [MIN_ELEMENTS])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [MIN_ELEMENTS])],
        [numpy_helper.from_array(exact, "w_exact"), numpy_helper.from_array(inexact, "w_inexact")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(tmp_path / "g.onnx"))
    record = compact_graph(tmp_path / "g.onnx", tmp_path / "c.onnx")
    assert (record["fp16"], record["kept_fp32"]) == (1, 1)
    stored = {t.name: t.data_type for t in onnx.load(str(tmp_path / "c.onnx")).graph.initializer}
    assert stored == {"w_exact" + FP16_SUFFIX: TensorProto.FLOAT16, "w_inexact": TensorProto.FLOAT}


def test_the_runtime_opens_the_compact_graph_at_the_recorded_level_restoring_it(artifacts: tuple[Path, Path]) -> None:
    from laya_serverless.core.providers import Placement
    from laya_serverless.core.session import OnnxDecisionSession

    levels: list[tuple[str, bool]] = []

    def spy(graph: Path, providers: Any, threads: Any, loading: Any) -> OnnxDecisionSession:
        levels.append((loading.level, loading.restore))
        return OnnxDecisionSession(graph, threads=threads, level=loading.level, providers=providers)

    for artifact in artifacts:
        Decider.from_artifact(artifact, verify=False, placement=Placement(open=spy))
    # the compact graph's FP16-stored weights are widened on the way in (`core.restore`)
    assert levels == [("ORT_DISABLE_ALL", False), (RESTORE_LEVEL, True)]
