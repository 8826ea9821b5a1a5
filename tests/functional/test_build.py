"""Building artifacts: the gate passes real builds, fails broken ones (listing every row), and the
manifest describes exactly the configuration that passed. Goldens replay against upstream.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from laya_artifacts.build import GateFailed, build_artifact
from laya_artifacts.cli import main as cli
from laya_artifacts.goldens import load_goldens, record_goldens
from laya_artifacts.parity import run_gate
from laya_serverless import Decider
from laya_serverless.artifact.layout import MANIFEST_FILE
from laya_serverless.artifact.manifest import Manifest
from laya_serverless.artifact.store import LocalStore

from ..conftest import GOLDENS

pytestmark = pytest.mark.slow


def test_int8_build_passes_and_its_manifest_pins_the_configuration(tiny_int8: Path) -> None:
    import onnx

    manifest = Manifest.load(tiny_int8)
    config = manifest.raw["configuration"]
    assert config["target"] == "cpu-int8" and config["precision"]["weights"] == "int8"
    assert config["precision"]["recipe"]["quantized_nodes"] > 0
    assert config["checkpoint"]["weights_sha256"] == load_goldens(GOLDENS / "tiny-modernbert")["checkpoint"][
        "weights_sha256"]
    assert config["graph"]["opset"] == 17 and "isa" in config["build_cpu"]
    parity = manifest.raw["parity"]
    assert parity["passed"] and parity["max_probability_error"] <= 0.02 and parity["hard_mismatches"] == 0
    assert set(manifest.files) == {"model.onnx", "tokenizer.json", "decode_config.json", "parity_report.json",
                                   "parity_report.txt"}
    ops = {n.op_type for n in onnx.load(str(tiny_int8 / "model.onnx")).graph.node}
    assert any("Integer" in op or "Quant" in op for op in ops), ops
    report = json.loads((tiny_int8 / "parity_report.json").read_text())
    assert report["recipe_attempts"][-1]["passed"] and all(not a["passed"] for a in report["recipe_attempts"][:-1])


def _perturb_graph(artifact: Path, out: Path, scale: float) -> Path:
    """Copy an artifact and scale the scorer's output weights: a broken export the gate must catch."""
    import onnx
    from onnx import numpy_helper

    shutil.copytree(artifact, out)
    model = onnx.load(str(out / "model.onnx"))
    touched = 0
    for init in model.graph.initializer:
        values = numpy_helper.to_array(init)
        if values.dtype == np.float32 and values.ndim == 2 and 1 in values.shape and values.size > 16:
            init.CopyFrom(numpy_helper.from_array(values * scale, init.name))
            touched += 1
    assert touched, "found no scorer weight to perturb"
    onnx.save(model, str(out / "model.onnx"))
    return out


def test_the_gate_fails_a_perturbed_artifact_and_lists_every_failing_row(tiny_int8: Path, tmp_path: Path) -> None:
    broken = _perturb_graph(tiny_int8, tmp_path / "broken", scale=-3.0)
    report = run_gate(broken, load_goldens(GOLDENS / "tiny-modernbert"), "cpu-int8")
    assert not report.passed
    assert report.max_probability_error > 0.1
    assert len(report.failures) >= 5  # every failing row, not only the first
    assert report.hard_mismatches, "a sign flip must show as hard top-1 mismatches"
    assert "FAILED" in report.table() and "HARD:" in report.table()


def test_a_build_that_fails_the_gate_writes_no_manifest(tiny_modernbert: tuple[Path, Path], tmp_path: Path) -> None:
    goldens = load_goldens(GOLDENS / "tiny-modernbert")
    for row in goldens["rows"]:  # a reference the checkpoint cannot meet
        row["logits"] = [[-v for v in logits] for logits in row["logits"]]
    wrong = tmp_path / "wrong-goldens.json"
    wrong.write_text(json.dumps(goldens))
    out = tmp_path / "artifact"
    with pytest.raises(GateFailed):
        build_artifact(tiny_modernbert[0], "cpu-fp32", out, goldens_path=wrong)
    assert not (out / MANIFEST_FILE).exists() and (out / "parity_report.txt").is_file()
    code = cli(["build", str(tiny_modernbert[0]), "--target", "cpu-fp32", "--goldens", str(wrong),
                "--out", str(tmp_path / "again"), "--publish", "--store", str(tmp_path / "store")])
    assert code == 2 and not (tmp_path / "store").exists()  # never published


def test_fp32_build_meets_the_fp32_tolerance(tiny_modernbert: tuple[Path, Path], tmp_path: Path) -> None:
    out, report = build_artifact(tiny_modernbert[0], "cpu-fp32", tmp_path / "fp32",
                                 goldens_path=GOLDENS / "tiny-modernbert" / "goldens.json")
    assert report.passed and report.max_probability_error <= 1e-4 and report.near_tie_flips == []
    assert Manifest.load(out).raw["configuration"]["precision"] == {"weights": "fp32"}
    assert Decider.from_artifact(out).config.optimized_offline


@pytest.mark.parametrize("kind", ["minilm", "tiny-modernbert"])
def test_committed_goldens_replay_against_upstream(kind: str, request: pytest.FixtureRequest) -> None:
    checkpoint, _ = request.getfixturevalue(kind.replace("-", "_"))
    committed = load_goldens(GOLDENS / kind)
    fresh = record_goldens(checkpoint, kind)
    # tiny-modernbert is seeded random init only: bit-identical on any CPU. minilm's scorer is derived from
    # encoder forward passes (a principal direction), which amplifies last-bit differences between CPU
    # families (an AMD EPYC host moved its logits by up to 2.4e-4 against goldens recorded elsewhere). So
    # minilm is held bit-identical only on the CPU family its goldens were recorded on; elsewhere its rows
    # are the check, at 1e-3 (a change to how the checkpoint is built moves them by far more).
    exact = kind == "tiny-modernbert" or committed["reference"].get("cpu") == fresh["reference"]["cpu"]
    if exact:
        assert fresh["checkpoint"]["weights_sha256"] == committed["checkpoint"]["weights_sha256"], (
            "the test checkpoint no longer builds bit-identically; re-record goldens/%s" % kind)
    atol = 1e-5 if exact else 1e-3
    assert len(fresh["rows"]) == len(committed["rows"]) >= 13
    for new, old in zip(fresh["rows"], committed["rows"], strict=True):
        assert new["token_ids"] == old["token_ids"] and new["markers"] == old["markers"], new["id"]
        for a, b in zip(new["logits"], old["logits"], strict=True):
            assert np.allclose(a, b, atol=atol), new["id"]


def test_minilm_int8_builds_and_publishes_through_the_cli(minilm: tuple[Path, Path], tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "store"
    code = cli(["build", str(minilm[0]), "--name", "minilm", "--target", "cpu-int8", "--out", str(tmp_path / "a"),
                "--goldens", str(GOLDENS / "minilm" / "goldens.json"), "--publish", "--store", str(store)])
    assert code == 0
    err = capsys.readouterr().err
    assert "1/4" in err and "3/4" in err and "4/4" in err and "PASSED" in err and "published minilm/cpu-int8" in err
    assert cli(["list", "--store", str(store)]) == 0
    listed = capsys.readouterr().out.split()
    assert listed[:2] == ["minilm", "cpu-int8"] and len(listed[2]) == 64
    decider = Decider.from_store(store, "minilm", "cpu-int8", cache_dir=tmp_path / "cache")
    answers = decider.predict("I was charged twice", {"x": {"type": "noul", "instructions": "refund?"}})["answers"]
    assert 0.0 <= answers["x"]["noul"] <= 1.0


def test_import_regates_on_this_machine_before_publishing(tiny_int8: Path, tmp_path: Path) -> None:
    from laya_artifacts.publish import import_artifact, publish

    source, destination = LocalStore(tmp_path / "built-elsewhere"), LocalStore(tmp_path / "here")
    artifact_id = publish(tiny_int8, source)
    goldens = load_goldens(GOLDENS / "tiny-modernbert")
    imported, report = import_artifact(source, "tiny-modernbert", "cpu-int8", goldens, destination, tmp_path / "c")
    assert imported == artifact_id and report.passed
    for row in goldens["rows"]:
        row["logits"] = [[-v for v in logits] for logits in row["logits"]]
    from laya_serverless import ArtifactError

    with pytest.raises(ArtifactError, match="fails the parity gate on this machine"):
        import_artifact(source, "tiny-modernbert", "cpu-int8", goldens, LocalStore(tmp_path / "x"), tmp_path / "c")
    assert not (tmp_path / "x").exists()


def test_cli_refuses_bad_input_with_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(["build", str(tmp_path / "missing"), "--target", "cpu-int8"]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert cli(["verify", str(tmp_path)]) == 2
    assert "manifest.json is missing" in capsys.readouterr().err
    assert cli(["verify", str(tmp_path / "store"), "--checkpoint", "nope"]) == 2
    assert "no artifact is published for checkpoint 'nope'" in capsys.readouterr().err
