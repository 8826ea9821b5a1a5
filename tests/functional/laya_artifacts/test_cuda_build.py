"""CUDA targets without a GPU: the build refuses before any work, meets the guards every target meets, and the
FP16 export has the promised structure.

The FP16 numbers here come from the CPU provider: a smoke test of the graph, never its gate,
which runs only on the GPU that serves (scripts/gpu_check.sh, docs/gpu.md).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from laya_artifacts.build import TARGETS, build_artifact
from laya_artifacts.cli import main as cli
from laya_artifacts.export.cuda import CUDA_TARGETS, convert_fp16, keeps_fp32
from laya_artifacts.goldens.corpus import GateCasesError
from laya_artifacts.goldens.record import load_goldens
from laya_artifacts.spec import BuildSeams, BuildSpec
from laya_serverless.artifact.layout import DECODE_CONFIG_FILE, GRAPH_FILE, TOKENIZER_FILE, DecodeConfig
from laya_serverless.artifact.manifest import Manifest
from laya_serverless.core.providers import CPU_PROVIDER, CUDA_PROVIDER, Placement
from laya_serverless.gate.replay import TOLERANCES, run_gate
from tests.conftest import GOLDENS, golden_slice, write_goldens_file


def _cuda_offered() -> bool:
    import onnxruntime as ort

    return CUDA_PROVIDER in ort.get_available_providers()


def test_tolerances_are_fixed_before_measurement() -> None:
    assert {t: TOLERANCES[t] for t in CUDA_TARGETS} == {"cuda-fp16": 0.02, "cuda-fp32": 1e-4}


@pytest.mark.skipif(_cuda_offered(), reason="this machine has CUDA: the refusal is for machines without it")
@pytest.mark.parametrize("target", CUDA_TARGETS)
def test_a_cuda_build_without_cuda_exits_non_zero_naming_the_provider_and_writes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], target: str) -> None:
    checkpoint = tmp_path / "checkpoint"
    checkpoint.mkdir()
    (checkpoint / "rl_agent_config.json").write_text("{}")  # refused before the checkpoint is even read
    out = tmp_path / "artifact"
    code = cli(["build", str(checkpoint), "--target", target, "--out", str(out),
                "--goldens", str(GOLDENS / "tiny-modernbert" / "goldens.json")])
    assert code != 0
    assert "CUDAExecutionProvider" in capsys.readouterr().err
    assert not out.exists()   # no directory, no graph, no manifest


# An onnxruntime that offers CUDA: the device check passes, so the guards after it are what is tested.
CUDA_OFFERED = Placement(available=lambda: [CUDA_PROVIDER, CPU_PROVIDER])


def test_one_recipe_builds_every_target_and_names_them_all_for_an_unknown_one(tmp_path: Path) -> None:
    assert TARGETS == ("cpu-int8", "cpu-fp32", "cuda-fp16", "cuda-fp32")
    with pytest.raises(ValueError, match=r"unknown target 'tpu-int4'; choose one of cpu-int8, cpu-fp32, cuda-fp16, "
                                         r"cuda-fp32"):
        build_artifact(tmp_path / "checkpoint", BuildSpec("tpu-int4"), tmp_path / "artifact")


@pytest.mark.parametrize("target", TARGETS)
def test_every_target_refuses_bad_gate_cases_and_a_full_out_dir_before_any_work(tmp_path: Path, target: str) -> None:
    checkpoint, out = tmp_path / "checkpoint", tmp_path / "artifact"  # neither is read: the guards come first
    mine = tmp_path / "mine.jsonl"
    mine.write_text(json.dumps({"state": "hi", "questions": {}}) + "\n")
    with pytest.raises(GateCasesError, match=r"mine.jsonl:1: 'questions' is empty"):
        build_artifact(checkpoint, BuildSpec.of(target, gate_cases=[mine]), out,
                       seams=BuildSeams(placement=CUDA_OFFERED))
    assert not out.exists()
    out.mkdir()
    (out / "model.onnx").write_bytes(b"")
    with pytest.raises(FileExistsError, match=r"is not empty; builds never overwrite an artifact"):
        build_artifact(checkpoint, BuildSpec(target), out, seams=BuildSeams(placement=CUDA_OFFERED))
    assert [p.name for p in out.iterdir()] == ["model.onnx"]


@pytest.mark.slow
def test_a_cuda_build_moved_to_the_cpu_provider_writes_the_cuda_block_and_gates_your_cases_smoke_only(
        tiny_modernbert: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Not the gate (that runs on the GPU): the recipe's cuda path with its gates on the CPU provider and a fake
    GPU, to show what the shared tail writes for a cuda target, users' gate cases included."""
    from laya_artifacts import build

    gate = build.run_gate
    monkeypatch.setattr(build, "run_gate", lambda artifact, goldens, target, **kw: gate(
        artifact, goldens, target, **{**kw, "device": "cpu"}))
    monkeypatch.setattr(build, "gpu_profile", lambda: {"gpu": {"name": "a fake GPU"}, "gpu_count": 1})
    mine = tmp_path / "mine.jsonl"
    mine.write_text(json.dumps({"id": "mine", "split": "confirmation", "state": "cancel my plan", "questions": {
        "cancel": {"type": "noul", "instructions": "Does the user want to cancel?"}}}) + "\n")
    goldens = write_goldens_file(golden_slice("tiny-modernbert", keep_case=lambda i, _r: i % 30 == 0), tmp_path / "g")
    out, report = build_artifact(tiny_modernbert[0], BuildSpec.of("cuda-fp32", goldens=goldens, gate_cases=[mine]),
                                 tmp_path / "a", seams=BuildSeams(placement=CUDA_OFFERED))
    assert report.passed and report.corpus["summary"]["user_rows_added"] == 1
    manifest = Manifest.load(out).raw
    config = manifest["configuration"]
    assert config["target"] == "cuda-fp32" and config["precision"] == {"weights": "fp32", "tf32": False}
    assert config["graph"]["optimized_offline"] is None and config["graph"]["fusion"]["MultiHeadAttention"] > 0
    assert not DecodeConfig.load(out).optimized_offline
    cuda = config["cuda"]
    assert cuda["build_gpu"]["gpu"] == {"name": "a fake GPU"} and cuda["provider_options"] == {"use_tf32": "0"}
    assert cuda["cpu_retry"]["provider"] == CPU_PROVIDER and cuda["cpu_retry"]["passed"]
    assert json.loads((out / "parity_report.json").read_text())["cpu_retry"]["passed"]
    assert "cpu retry (same graph on CPUExecutionProvider)" in (out / "parity_report.txt").read_text()
    assert set(manifest["files"]) == {GRAPH_FILE, TOKENIZER_FILE, DECODE_CONFIG_FILE, "parity_report.json",
                                      "parity_report.txt"}


def _types(model: Any) -> dict[str, int]:
    import onnx

    inferred = onnx.shape_inference.infer_shapes(model)
    values = [*inferred.graph.value_info, *inferred.graph.input, *inferred.graph.output]
    types = {v.name: v.type.tensor_type.elem_type for v in values}
    types.update({t.name: t.data_type for t in model.graph.initializer})
    return types


@pytest.fixture(scope="module")
def fp16_artifact(tiny_modernbert: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny ModernBERT's FP16 graph beside its tokenizer and decode config (an unpublished artifact)."""
    export = tiny_modernbert[1]
    out = tmp_path_factory.mktemp("fp16")
    convert_fp16(export / GRAPH_FILE, out / GRAPH_FILE)
    for name in (TOKENIZER_FILE, DECODE_CONFIG_FILE):
        shutil.copy(export / name, out / name)
    return out


@pytest.mark.slow
def test_the_fp16_graph_keeps_its_io_and_precision_critical_nodes_fp32(fp16_artifact: Path) -> None:
    import onnx
    from onnx import TensorProto

    model = onnx.load(str(fp16_artifact / GRAPH_FILE))
    assert {i.name: i.type.tensor_type.elem_type for i in model.graph.input} == {
        "input_ids": TensorProto.INT64, "attention_mask": TensorProto.INT64, "marker_pos": TensorProto.INT64,
        "marker_mask": TensorProto.BOOL, "qtype": TensorProto.INT64}
    assert {o.name: o.type.tensor_type.elem_type for o in model.graph.output} == {
        "logits": TensorProto.FLOAT, "act_logits": TensorProto.FLOAT}
    types = _types(model)
    critical = [n for n in model.graph.node if n.op_type in ("Softmax", "LayerNormalization", "Cos", "Sin")]
    assert {n.op_type for n in critical} == {"Softmax", "LayerNormalization", "Cos", "Sin"}
    for node in critical:
        assert {types[name] for name in [*node.input, *node.output] if name} == {TensorProto.FLOAT}, node.name
    initializers = {t.name: t.data_type for t in model.graph.initializer}
    encoder_weights = [initializers[i] for n in model.graph.node if n.op_type == "MatMul" and not keeps_fp32(n.name)
                       for i in n.input if i in initializers]
    assert encoder_weights and set(encoder_weights) == {TensorProto.FLOAT16}
    head_weights = [initializers[i] for n in model.graph.node if n.op_type in ("MatMul", "Gemm") and keeps_fp32(n.name)
                    for i in n.input if i in initializers]
    assert head_weights and set(head_weights) == {TensorProto.FLOAT}


@pytest.mark.slow
def test_no_fp32_tensor_is_rounded_through_fp16_and_back(fp16_artifact: Path) -> None:
    import onnx
    from onnx import TensorProto

    model = onnx.load(str(fp16_artifact / GRAPH_FILE))
    types, producer = _types(model), {o: n for n in model.graph.node for o in n.output}

    def to(node: Any) -> int:
        return next(int(a.i) for a in node.attribute if a.name == "to")

    trips = [n.name for n in model.graph.node if n.op_type == "Cast" and to(n) == TensorProto.FLOAT
             and n.input[0] in producer and producer[n.input[0]].op_type == "Cast"
             and to(producer[n.input[0]]) == TensorProto.FLOAT16
             and types.get(producer[n.input[0]].input[0]) == TensorProto.FLOAT]
    assert trips == []


@pytest.mark.slow
def test_fp16_on_the_cpu_provider_runs_finite_and_close_smoke_only(fp16_artifact: Path) -> None:
    """Not the gate (that runs on the GPU): the graph loads, answers every golden row finitely, and stays near."""
    report = run_gate(fp16_artifact, load_goldens(GOLDENS / "tiny-modernbert"), "cuda-fp16", device="cpu")
    assert report.rows > 0 and not [f for f in report.failures if "non-finite" in f or "differ" in f]
    assert report.max_probability_error < 0.1 and report.max_action_error < 0.1
    assert json.dumps(report.as_dict())   # the report a GPU build writes is serializable as is
