"""Quantization-aware fine-tuning (`laya_artifacts.qat.finetune`): the scheme it trains under is the artifact's own,
its data never leave the selection split, it resumes where it stopped, and a tuned copy is gated against the
original's goldens, never its own. The model-running tests use the tiny ModernBERT and a few steps."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from laya_artifacts.qat.build_plan import check_reference, prepare_build
from laya_artifacts.qat.data import held_out, selection_cases, training_cases
from laya_artifacts.qat.finetune import QAT_RECORD, QatSettings, fine_tune
from laya_artifacts.qat.scheme import quantized_linears
from laya_serverless.gate.splits import split_for
from tests.conftest import GOLDENS, golden_slice, write_goldens_file

TINY_GOLDENS = GOLDENS / "tiny-modernbert" / "goldens.json"


def _goldens() -> dict[str, Any]:
    return json.loads(TINY_GOLDENS.read_text(encoding="utf-8"))


def test_the_training_data_come_from_the_selection_split_only() -> None:
    goldens = _goldens()
    cases, info = training_cases(goldens, seed=0)
    confirmation = [row for row in goldens["rows"] if split_for(row["id"]) == "confirmation"]
    assert confirmation and info["selection_cases"] and info["generated_cases"]
    assert all(split_for(c["id"]) == "selection" for c in cases if c["origin"] == "selection")
    selection_ids = {c["id"] for c in selection_cases(goldens)}
    assert {c["id"].split(":", 1)[1].rsplit(":", 1)[0] for c in cases if c["origin"] == "generated"} <= selection_ids
    # no confirmation state is read (the corpus's edge cases share one state across both splits: those stay)
    texts = {json.dumps(row["state"], sort_keys=True) for row in confirmation} - {
        json.dumps(c["state"], sort_keys=True) for c in selection_cases(goldens)}
    assert texts and not any(json.dumps(c["state"], sort_keys=True) in texts for c in cases)
    # seeded: the same goldens and seed give the same data, another seed other questions
    assert training_cases(goldens, seed=0)[0] == cases
    assert training_cases(goldens, seed=1)[0] != cases


def test_a_part_of_the_generated_cases_is_measured_never_trained_on() -> None:
    """The fine-tune's own overfit check: one generated case in `held_out_every`, the same ones each run, never
    chosen by a training step; selection cases are always trained on."""
    from laya_artifacts.qat.finetune import _Example, training_order

    cases, _ = training_cases(_goldens(), seed=0)
    settings = QatSettings(steps=5 * len(cases))
    examples = [_Example(c["id"], c["origin"], {}, None, None, None, 1) for c in cases]
    held = {i for i, c in enumerate(cases) if held_out(c["id"], settings.held_out_every)}
    generated = [c for c in cases if c["origin"] == "generated"]
    assert held and all(cases[i]["origin"] == "generated" for i in held)
    assert 0.1 < len(held) / len(generated) < 0.3
    order = training_order(examples, settings)
    assert len(order) >= settings.steps and not held & set(order)
    assert set(order) == set(range(len(cases))) - held  # everything else is trained on
    assert not any(held_out(c["id"], 0) for c in cases)  # 0: nothing held out


def test_a_tuned_copy_is_gated_against_its_original_s_goldens_only() -> None:
    record = {"reference_weights_sha256": "a" * 64, "tuned_weights_sha256": "b" * 64}
    check_reference(record, {"checkpoint": {"weights_sha256": "a" * 64}})
    for recorded in ("b" * 64, None):
        with pytest.raises(ValueError, match="quantization-aware copy of weights aaaaaaaaaaaa.*original's goldens"):
            check_reference(record, {"checkpoint": {"weights_sha256": recorded}})


@pytest.mark.parametrize(("target", "record", "message"), [
    ("cpu-fp32", None, "quantization-aware fine-tuning is for cpu-int8; cpu-fp32 builds the original"),
    ("cpu-int8", {"reference_weights_sha256": "a" * 64}, "already a quantization-aware copy"),
])
def test_bad_quantization_aware_builds_are_refused(tmp_path: Path, target: str, record: dict[str, Any] | None,
                                                   message: str) -> None:
    if record is not None:
        (tmp_path / QAT_RECORD).write_text(json.dumps(record))
    with pytest.raises(ValueError, match=message):
        prepare_build(tmp_path, {}, target, None, QatSettings(), tmp_path / "out")


def test_the_fake_quantization_is_onnxruntime_s_dynamic_int8(tmp_path: Path) -> None:
    """One encoder Linear under the QAT modules answers as the graph `quantize_dynamic` writes with the recipe's
    arguments (per-channel 7-bit QInt8 weights, dynamic uint8 activations), far closer than FP32 does."""
    import numpy as np
    import onnxruntime as ort
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from laya_artifacts.qat.scheme import attach_fake_quant
    from laya_artifacts.search.quantize import REDUCE_RANGE

    torch.manual_seed(0)
    model = torch.nn.Module()
    model.encoder = torch.nn.Module()
    model.encoder.layers = torch.nn.ModuleList([torch.nn.Module()])
    model.encoder.layers[0].mlp = torch.nn.Module()
    model.encoder.layers[0].mlp.Wo = torch.nn.Linear(96, 64)
    linear = model.encoder.layers[0].mlp.Wo
    x = torch.randn(3, 17, 96) * torch.linspace(0.2, 3.0, 96)  # uneven channels, as encoder activations are
    graph, quantized = tmp_path / "linear.onnx", tmp_path / "linear-int8.onnx"
    with warnings.catch_warnings():  # the TorchScript exporter's deprecation notice; the project exports so
        warnings.simplefilter("ignore")
        torch.onnx.export(linear, (x,), str(graph), dynamo=False, opset_version=17, input_names=["x"],
                          output_names=["y"], dynamic_axes={"x": {0: "b", 1: "t"}})
    quantize_dynamic(str(graph), str(quantized), weight_type=QuantType.QInt8, per_channel=True,
                     reduce_range=REDUCE_RANGE, op_types_to_quantize=["MatMul"],
                     extra_options={"MatMulConstBOnly": True})
    ours = ort.InferenceSession(str(quantized), providers=["CPUExecutionProvider"]).run(None, {"x": x.numpy()})[0]
    with torch.no_grad():
        fp32 = linear(x).numpy()
        assert attach_fake_quant(model) == ["encoder.layers.0.mlp.Wo"]
        fake = model.encoder.layers[0].mlp.Wo(x).numpy()
    int8_error, fake_error = np.abs(ours - fp32).max(), np.abs(ours - fake).max()
    assert int8_error > 1e-3  # quantization is visible at all
    assert fake_error < int8_error / 50, (fake_error, int8_error)


@pytest.mark.slow
def test_the_fake_quantized_linears_are_the_exported_encoder_matmuls(tiny_modernbert: tuple[Path, Path]) -> None:
    from laya_artifacts.export.onnx_export import load_reference
    from laya_artifacts.qat.scheme import _node_name
    from laya_artifacts.search.quantize import encoder_matmuls

    checkpoint, export = tiny_modernbert
    model, _, _ = load_reference(checkpoint)
    names = quantized_linears(model)
    assert sorted(_node_name(n) for n in names) == sorted(encoder_matmuls(export / "model.onnx").nodes)


class _Stop(Exception):
    pass


def _small_goldens(tmp_path: Path) -> Path:
    return write_goldens_file(golden_slice("tiny-modernbert", keep_case=lambda i, _row: i % 6 == 0), tmp_path)


@pytest.mark.slow
def test_a_stopped_fine_tune_resumes_to_the_same_weights(tiny_modernbert: tuple[Path, Path],
                                                          tmp_path: Path) -> None:
    from laya_artifacts.goldens.record import load_goldens, weights_sha256

    checkpoint = tiny_modernbert[0]
    goldens = load_goldens(_small_goldens(tmp_path / "goldens"))
    settings = QatSettings(steps=8, accumulate=2, save_every=4, log_every=2, threads=1, generated_per_case=1,
                           lr=1e-4)
    whole = fine_tune(checkpoint, goldens, settings, tmp_path / "whole")

    def stop_after_six(message: str) -> None:
        if "step 6/8" in message:
            raise _Stop

    with pytest.raises(_Stop):
        fine_tune(checkpoint, goldens, settings, tmp_path / "stopped", stop_after_six)
    assert (tmp_path / "stopped" / "qat_state.pt").is_file()
    said: list[str] = []
    resumed = fine_tune(checkpoint, goldens, QatSettings(**{**settings.__dict__, "resume": True}),
                        tmp_path / "stopped", said.append)
    assert any("resuming at step 4/8" in m for m in said)
    assert weights_sha256(resumed) == weights_sha256(whole) != weights_sha256(checkpoint)
    record = json.loads((resumed / QAT_RECORD).read_text())
    assert record["reference_weights_sha256"] == weights_sha256(checkpoint)
    assert record["tuned_weights_sha256"] == weights_sha256(resumed)
    assert record["steps"] == 8 and record["seed"] == 0 and record["data"]["selection_cases"] > 0
    # a finished copy with the same recipe is reused, not trained again
    again: list[str] = []
    assert fine_tune(checkpoint, goldens, settings, tmp_path / "whole", again.append) == whole
    assert any("reusing the tuned copy" in m for m in again)


@pytest.mark.slow
@pytest.mark.int8
def test_a_quantization_aware_build_gates_the_copy_against_the_original(
        tiny_modernbert: tuple[Path, Path], tmp_path: Path) -> None:
    """Published or refused, the gate's reference is the original: its goldens, its hash in the manifest or the
    report, the fine-tune's trade-off beside the gate's figures."""
    from laya_artifacts.build import GateFailed, build_artifact
    from laya_artifacts.goldens.record import weights_sha256
    from laya_artifacts.search import precision as search
    from laya_artifacts.spec import BuildSeams, BuildSpec
    from tests.functional.laya_artifacts.test_build import fixed_speeds

    checkpoint = tiny_modernbert[0]
    goldens = _small_goldens(tmp_path / "goldens")
    out = tmp_path / "artifact"
    said: list[str] = []
    settings = QatSettings(steps=8, accumulate=2, threads=1, generated_per_case=1, lr=1e-4,
                           work_dir=tmp_path / "qat")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(search, "SPEED_CASES", 2)
        try:
            build_artifact(checkpoint,
                           BuildSpec.of("cpu-int8", goldens=goldens, quantization_aware=settings,
                                        candidates=["encoder"], min_speedup=0), out,
                           seams=BuildSeams(progress=said.append, timer=fixed_speeds({"fp32": 100.0, "encoder": 50.0})))
        except GateFailed as exc:
            assert exc.report.notes[0].startswith("quantization-aware fine-tune (8 steps, head)")
            assert (out / "parity_report.txt").is_file()
        else:
            manifest = json.loads((out / "manifest.json").read_text())
            assert manifest["configuration"]["checkpoint"]["reference_weights_sha256"] == weights_sha256(checkpoint)
            tuned = manifest["configuration"]["quantization_aware"]
            assert tuned["tuned_weights_sha256"] == manifest["configuration"]["checkpoint"]["weights_sha256"]
    record = json.loads((tmp_path / "qat" / "checkpoint" / QAT_RECORD).read_text())
    assert record["reference_weights_sha256"] == weights_sha256(checkpoint)
    assert any("quantization-aware fine-tune of a copy" in m for m in said)
