"""Building artifacts: the gate passes real builds on both splits of the corpus, fails broken ones (listing
every row), the precision search chooses on selection alone and never falls through on confirmation, and
the manifest describes exactly the configuration that passed. Goldens replay against upstream.

Model-running tests gate on slices of the committed goldens (`golden_slice`); the whole corpus is gated
once, by the FP32 build.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from laya_artifacts.build import GateFailed, build_artifact
from laya_artifacts.cli import main as cli
from laya_artifacts.goldens.record import load_goldens, record_goldens, token_digest, weights_sha256
from laya_artifacts.search import precision as search
from laya_artifacts.spec import BuildSeams, BuildSpec
from laya_serverless import Decider
from laya_serverless.artifact.layout import MANIFEST_FILE
from laya_serverless.artifact.manifest import Manifest
from laya_serverless.artifact.store import LocalStore
from laya_serverless.gate.replay import run_gate
from tests.conftest import GOLDENS, golden_slice, tiny_choice_slice, write_goldens_file

pytestmark = pytest.mark.slow


@pytest.fixture
def quick_timing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(search, "SPEED_CASES", 3)
    monkeypatch.setattr(search, "SPEED_RUNS", 2)


def fixed_speeds(ms: dict[str, float]) -> search.SpeedTimer:
    """A search timer that reports `ms[name]` for every pass: which graph is faster is then given, not raced."""
    def timer(names: Sequence[str], _deciders: Sequence[Any], _batch: Sequence[Any]) -> list[list[float]]:
        return [[ms[name]] * 2 for name in names]
    return timer


def _negate(goldens: dict[str, Any], split: str | None = None) -> dict[str, Any]:
    """A reference the checkpoint cannot meet (on one split, or on all)."""
    for row in goldens["rows"]:
        if split is None or row["split"] == split:
            row["logits"] = [[-v for v in logits] for logits in row.get("logits", [])]
    return goldens


@pytest.mark.int8
def test_int8_build_passes_and_its_manifest_holds_both_splits_and_the_search(tiny_int8: Path,
                                                                             tiny_int8_goldens: Path) -> None:
    import onnx

    manifest = Manifest.load(tiny_int8)
    config = manifest.raw["configuration"]
    assert config["target"] == "cpu-int8" and config["precision"]["weights"] == "8-bit weight-only"
    assert config["precision"]["recipe"]["name"] == "encoder-weight-only-8bit"
    assert config["precision"]["recipe"]["quantized_nodes"] > 0
    assert config["checkpoint"]["weights_sha256"] == load_goldens(GOLDENS / "tiny-modernbert")["checkpoint"][
        "weights_sha256"]
    assert config["graph"]["opset"] == 17 and "isa" in config["build_cpu"]
    parity = manifest.raw["parity"]
    assert parity["passed"] and set(parity["splits"]) == {"selection", "confirmation"}
    goldens = load_goldens(tiny_int8_goldens)
    for name, split in parity["splits"].items():
        assert split["passed"] and split["hard_mismatches"] == [] and split["failures"] == []
        assert split["rows"] == sum(len(r["questions"]) for r in goldens["rows"] if r["split"] == name) > 10
        assert split["max_probability_error"] <= 0.02
        assert split["median_probability_error"] <= split["p99_probability_error"] <= split["max_probability_error"]
    assert parity["corpus"]["sha256"] == goldens["corpus"]["sha256"] and parity["corpus"]["goldens_format"] == 2
    assert parity["corpus"]["summary"]["rows_by_type"] and parity["corpus"]["summary"]["rows_by_source"]
    found = parity["search"]
    assert found["chosen"] == "encoder-weight-only-8bit" and found["fp32_speed_ms"] > 0
    (candidate,) = found["candidates"]
    assert candidate["selection"]["passed"] and candidate["speed_ms"] > 0 and candidate["speedup"] > 0
    assert found["layer_mix"] == {"skipped": "not requested"} and "fastest" in found["why"]
    assert set(manifest.files) == {"model.onnx", "tokenizer.json", "decode_config.json", "parity_report.json",
                                   "parity_report.txt"}
    ops = {n.op_type for n in onnx.load(str(tiny_int8 / "model.onnx")).graph.node}
    assert "MatMulNBits" in ops, ops
    assert json.loads((tiny_int8 / "parity_report.json").read_text())["search"] == found


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


@pytest.mark.int8
def test_the_gate_fails_a_perturbed_artifact_and_lists_every_failing_row(tiny_int8: Path, tmp_path: Path) -> None:
    broken = _perturb_graph(tiny_int8, tmp_path / "broken", scale=-3.0)
    goldens = golden_slice("tiny-modernbert", keep_case=lambda i, _row: i % 10 == 0)
    report = run_gate(broken, goldens, "cpu-int8")
    assert not report.passed and report.max_probability_error > 0.1
    for split in report.splits.values():
        assert not split.passed and len(split.failures) >= 5  # every failing row, not only the first
        assert split.hard_mismatches, "a sign flip must show as hard top-1 mismatches in %s" % split.split
        assert all(m["split"] == split.split and m["case"].startswith(("corpus:", "edge:"))
                   for m in split.hard_mismatches)
    table = report.table()
    assert "FAILED" in table and "HARD: [selection]" in table and "FAIL: [confirmation]" in table


@pytest.mark.int8
def test_int8_is_refused_when_no_candidate_passes_selection(tiny_modernbert: tuple[Path, Path], tmp_path: Path,
                                                            quick_timing: None) -> None:
    goldens = _negate(golden_slice("tiny-modernbert", keep_case=lambda i, _row: i % 20 == 0), "selection")
    path = write_goldens_file(goldens, tmp_path / "goldens")
    said: list[str] = []
    with pytest.raises(GateFailed) as failed:
        build_artifact(tiny_modernbert[0],
                       BuildSpec.of("cpu-int8", goldens=path, exhaustive_search=True,
                                    candidates=["encoder-attention-output", "encoder-weight-only-8bit"]),
                       tmp_path / "a", seams=BuildSeams(progress=said.append))
    report = failed.value.report
    assert report.search["chosen"] is None and report.splits == {} and "no candidate passed" in report.search["why"]
    assert [c["name"] for c in report.search["candidates"]] == ["encoder-attention-output",
                                                                "encoder-weight-only-8bit"]
    assert all(not c["selection"]["passed"] and c["selection"]["hard_mismatches"] > 0 and c["speed_ms"] > 0
               for c in report.search["candidates"])
    progress = "\n".join(said)
    assert "encoder-attention-output on selection: max|dp|" in progress and "fp32 baseline:" in progress
    assert "build cpu-fp32" in str(failed.value)
    assert not (tmp_path / "a" / MANIFEST_FILE).exists() and "encoder-weight-only-8bit" in (
        tmp_path / "a" / "parity_report.txt").read_text()


def test_a_search_s_decision_is_kept_and_reused_until_research(tiny_modernbert: tuple[Path, Path], tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Choose once: a search that found nothing is recorded, and the next build of the same search fails at once
    (no candidate is quantized: the caller builds cpu-fp32); a record for another search is not used; --research
    searches again. A recorded choice is built and gated, not searched for."""
    from laya_artifacts.search import decision as decision_module
    from laya_artifacts.search.records import decision_key, find_record

    goldens = _negate(golden_slice("tiny-modernbert", keep_case=lambda i, _row: i % 20 == 0), "selection")
    path = write_goldens_file(goldens, tmp_path / "goldens")
    records, candidates = tmp_path / "records", ["encoder-weight-only-8bit"]
    speeds = fixed_speeds({"fp32": 10.0, "encoder-weight-only-8bit": 5.0, "encoder-attention-output": 5.0})
    with pytest.raises(GateFailed):
        build_artifact(tiny_modernbert[0],
                       BuildSpec.of("cpu-int8", goldens=path, candidates=candidates, search_records=records),
                       tmp_path / "a", seams=BuildSeams(timer=speeds))
    key = decision_key(tiny_modernbert[0], load_goldens(path), candidates, search.MIN_SPEEDUP)
    found = find_record(key, [records])
    assert found is not None and found[0]["chosen"] is None and "no candidate passed" in found[0]["why"]

    searched: list[str] = []
    real_search = decision_module.precision_search
    monkeypatch.setattr(decision_module, "precision_search", lambda *a, **k: searched.append("search") or real_search(
        *a, **k))
    said: list[str] = []
    with pytest.raises(GateFailed, match="search record"):
        build_artifact(tiny_modernbert[0],
                       BuildSpec.of("cpu-int8", goldens=path, candidates=candidates, search_records=records),
                       tmp_path / "b", seams=BuildSeams(timer=speeds, progress=said.append))
    assert searched == [] and any("not searching" in line and "search record" in line for line in said)
    assert not any(line.startswith("2/4 exporting") for line in said)   # nothing is even exported
    other = decision_key(tiny_modernbert[0], load_goldens(path), ["encoder-attention-output"], search.MIN_SPEEDUP)
    assert find_record(other, [records]) is None   # another search (other candidates) has a decision of its own
    with pytest.raises(GateFailed):
        build_artifact(tiny_modernbert[0],
                       BuildSpec.of("cpu-int8", goldens=path, candidates=candidates, search_records=records,
                                    research=True), tmp_path / "d", seams=BuildSeams(timer=speeds))
    assert searched == ["search"]

    passing = write_goldens_file(tiny_choice_slice(), tmp_path / "passing")
    first, _ = build_artifact(tiny_modernbert[0],
                              BuildSpec.of("cpu-int8", goldens=passing, candidates=candidates, min_speedup=0,
                                           search_records=records), tmp_path / "e", seams=BuildSeams(timer=speeds))
    again, report = build_artifact(tiny_modernbert[0],
                                   BuildSpec.of("cpu-int8", goldens=passing, candidates=candidates, min_speedup=0,
                                                search_records=records), tmp_path / "f", seams=BuildSeams(timer=speeds))
    assert searched == ["search", "search"] and report.passed and report.search["mode"] == "reused"
    assert Manifest.load(again).raw["configuration"]["precision"]["recipe"]["name"] == "encoder-weight-only-8bit"


@pytest.mark.int8
def test_the_layer_mix_adds_the_least_sensitive_layers_while_selection_passes(
        tiny_modernbert: tuple[Path, Path], tmp_path: Path, quick_timing: None) -> None:
    # wide choice questions (temperature 5 on this checkpoint): every layer's int8 error stays small
    goldens = golden_slice("tiny-modernbert", keep_case=lambda i, _row: i % 10 == 0,
                           keep_question=lambda q: q["type"] == "choice" and len(q["criteria"]) >= 11)
    said: list[str] = []
    out, report = build_artifact(tiny_modernbert[0],
                                 BuildSpec.of("cpu-int8", min_speedup=0,
                                              goldens=write_goldens_file(goldens, tmp_path / "g"),
                                              candidates=["layer-mix"]), tmp_path / "a",
                                 seams=BuildSeams(progress=said.append))
    mix = report.search["layer_mix"]
    assert [p["layer"] for p in mix["sensitivity"]] == [0, 1, 2, 3]
    order = sorted(mix["sensitivity"], key=lambda p: (p["hard_mismatches"], p["failures"] > 0,
                                                      p["max_probability_error"]))
    assert [step["layers"] for step in mix["greedy"]] == [sorted(p["layer"] for p in order[:n])
                                                          for n in range(1, len(mix["greedy"]) + 1)]
    assert report.search["chosen"] == "layer-mix" and report.passed
    recipe = Manifest.load(out).raw["configuration"]["precision"]["recipe"]
    assert recipe["name"] == "layer-mix" and recipe["layers"] == mix["greedy"][-1]["layers"]
    assert any(line.startswith("    layer 0 alone:") for line in said)


@pytest.mark.int8
def test_the_node_mix_adds_the_least_sensitive_matmuls_and_its_choice_is_reused(
        tiny_modernbert: tuple[Path, Path], tmp_path: Path, quick_timing: None) -> None:
    """Per-node sensitivity: every encoder MatMul alone on a slice of selection, then MatMuls added least sensitive
    first, each step gated on all of selection; the chosen nodes are the manifest's recipe, and a kept record
    builds exactly those nodes again without searching."""
    from laya_artifacts.search.quantize import PARTS, node_candidate
    from laya_artifacts.search.records import decision_key, find_record

    goldens = golden_slice("tiny-modernbert", keep_case=lambda i, _row: i % 10 == 0,
                           keep_question=lambda q: q["type"] == "choice" and len(q["criteria"]) >= 11)
    path, records = write_goldens_file(goldens, tmp_path / "g"), tmp_path / "records"
    said: list[str] = []
    out, report = build_artifact(tiny_modernbert[0],
                                 BuildSpec.of("cpu-int8", min_speedup=0, goldens=path, candidates=["node-mix"],
                                              search_records=records), tmp_path / "a",
                                 seams=BuildSeams(progress=said.append))
    mix = report.search["node_mix"]
    recipe = Manifest.load(out).raw["configuration"]["precision"]["recipe"]
    probed = {(p["layer"], p["part"]) for p in mix["sensitivity"]}   # every encoder MatMul, each once
    assert probed == {(layer, part) for layer in range(recipe["encoder_layers"]) for part in PARTS}
    assert len({p["node"] for p in mix["sensitivity"]}) == len(mix["sensitivity"])
    order = [p["node"] for p in sorted(mix["sensitivity"], key=lambda p: (
        p["hard_mismatches"], p["failures"] > 0, p["max_probability_error"])) if p["passed"]]
    assert [step["nodes"] for step in mix["greedy"]] == [sorted(order[:n]) for n in range(1, len(mix["greedy"]) + 1)]
    assert report.search["chosen"] == "node-mix" and report.passed
    passing = [step["nodes"] for step in mix["greedy"] if step["passed"]]
    assert recipe["name"] == "node-mix" and recipe["nodes"] == passing[-1]
    assert recipe["quantized_nodes"] == len(passing[-1]) and any("node " in line and " alone:" in line for line in said)

    key = decision_key(tiny_modernbert[0], load_goldens(path), ["node-mix"], 0)
    kept = find_record(key, [records])
    assert kept is not None and kept[0]["nodes"] == passing[-1]
    said.clear()
    _, again = build_artifact(tiny_modernbert[0],
                              BuildSpec.of("cpu-int8", min_speedup=0, goldens=path, candidates=["node-mix"],
                                           search_records=records), tmp_path / "b",
                              seams=BuildSeams(progress=said.append))
    assert again.search["mode"] == "reused" and not any(" alone:" in line for line in said)
    assert node_candidate(passing[-1]).nodes == tuple(passing[-1])


@pytest.mark.int8
def test_the_search_chooses_the_fastest_candidate_that_passes_selection(tiny_modernbert: tuple[Path, Path],
                                                                       tmp_path: Path) -> None:
    # Whether dynamic int8 (attention output) passes depends on the CPU's int8 kernels; weight-only 8-bit
    # passes on every class. The rule holds either way: of those that passed, the fastest is chosen.
    goldens = write_goldens_file(golden_slice("tiny-modernbert", keep_case=lambda i, _row: i % 16 == 0,
                                              keep_question=lambda q: q["type"] == "choice"), tmp_path / "g")
    speeds = fixed_speeds({"fp32": 10.0, "encoder-attention-output": 3.0, "encoder-weight-only-8bit": 5.0})
    _, report = build_artifact(tiny_modernbert[0],
                               BuildSpec.of("cpu-int8", goldens=goldens, min_speedup=1.5, exhaustive_search=True,
                                            candidates=["encoder-attention-output", "encoder-weight-only-8bit"]),
                               tmp_path / "a", seams=BuildSeams(timer=speeds))
    measured = {c["name"]: c for c in report.search["candidates"]}
    passed = [name for name, c in measured.items() if c["selection"]["passed"]]
    assert "encoder-weight-only-8bit" in passed and all(c["speed_ms"] for c in measured.values())
    assert report.search["chosen"] == min(passed, key=lambda name: measured[name]["speed_ms"])
    assert measured[report.search["chosen"]]["speedup"] >= 1.5 and report.passed


@pytest.mark.int8
def test_a_confirmation_failure_fails_int8_without_trying_the_next_candidate(
        tiny_modernbert: tuple[Path, Path], tmp_path: Path) -> None:
    goldens = _negate(golden_slice("tiny-modernbert", keep_case=lambda i, _row: i % 16 == 0,
                                   keep_question=lambda q: q["type"] == "choice"), "confirmation")
    path = write_goldens_file(goldens, tmp_path / "goldens")
    # weight-only 8-bit computes in FP32 (it passes these rows on every x86 class) and is made the faster one
    speeds = fixed_speeds({"fp32": 10.0, "encoder-weight-only-8bit": 4.0, "encoder-attention-output": 6.0})
    with pytest.raises(GateFailed) as failed:
        build_artifact(tiny_modernbert[0],
                       BuildSpec.of("cpu-int8", goldens=path, min_speedup=0,
                                    candidates=["encoder-weight-only-8bit", "encoder-attention-output"]),
                       tmp_path / "a", seams=BuildSeams(timer=speeds))
    report = failed.value.report
    assert report.search["chosen"] == "encoder-weight-only-8bit"
    skipped = {c["name"]: c.get("skipped") for c in report.search["candidates"]}
    assert "not gated" in (skipped["encoder-attention-output"] or "")  # the faster one passed: nothing slower is
    assert report.splits["selection"].passed and not report.splits["confirmation"].passed
    assert report.splits["confirmation"].hard_mismatches
    assert "rather than trying the next-fastest candidate" in report.notes[-1]
    assert not (tmp_path / "a" / MANIFEST_FILE).exists()


def test_a_build_that_fails_the_gate_writes_no_manifest(tiny_modernbert: tuple[Path, Path], tmp_path: Path) -> None:
    wrong = write_goldens_file(_negate(golden_slice("tiny-modernbert", keep_case=lambda i, _r: i % 30 == 0)),
                               tmp_path / "wrong")
    out = tmp_path / "artifact"
    with pytest.raises(GateFailed):
        build_artifact(tiny_modernbert[0], BuildSpec.of("cpu-fp32", goldens=wrong), out)
    assert not (out / MANIFEST_FILE).exists() and (out / "parity_report.txt").is_file()
    code = cli(["build", str(tiny_modernbert[0]), "--target", "cpu-fp32", "--goldens", str(wrong),
                "--out", str(tmp_path / "again"), "--publish", "--store", str(tmp_path / "store")])
    assert code == 2 and not (tmp_path / "store").exists()  # never published


def test_fp32_build_meets_the_fp32_tolerance_on_the_whole_corpus(tiny_modernbert: tuple[Path, Path],
                                                                 tmp_path: Path) -> None:
    out, report = build_artifact(tiny_modernbert[0],
                                 BuildSpec.of("cpu-fp32", goldens=GOLDENS / "tiny-modernbert" / "goldens.json"),
                                 tmp_path / "fp32")
    committed = load_goldens(GOLDENS / "tiny-modernbert")
    assert report.passed and report.rows == committed["corpus"]["summary"]["rows"] >= 500
    assert report.max_probability_error <= 1e-4 and report.near_tie_flips == []
    manifest = Manifest.load(out).raw
    precision = manifest["configuration"]["precision"]
    # the checkpoint's FP16 weights are stored in FP16 (exact) and restored at load: the gate ran on that graph
    assert precision["weights"] == "fp32" and precision["storage"]["fp16"] > 0
    assert precision["storage"]["restored_at_load_by"] == "ORT_ENABLE_BASIC"
    assert set(manifest["parity"]["splits"]) == {"selection", "confirmation"}
    assert manifest["parity"]["corpus"]["sha256"] == committed["corpus"]["sha256"]
    config = Decider.from_artifact(out).config
    assert config.optimized_offline and config.session_level == "ORT_ENABLE_BASIC"


def test_refusals_upstream_makes_are_made_identically(minilm: tuple[Path, Path]) -> None:
    goldens = golden_slice("minilm", keep_case=lambda _i, row: "refused" in row,
                           keep_question=lambda q: q["type"] == "choice" and len(q["criteria"]) >= 10)
    assert any("refused" in row for row in goldens["rows"])
    report = run_gate(minilm[1], goldens, "cpu-fp32")
    assert report.passed, report.table()
    assert sum(s.refusals_checked for s in report.splits.values()) == sum(len(r.get("refused", {}))
                                                                           for r in goldens["rows"]) > 0
    for row in goldens["rows"]:  # a runtime that answered instead would fail the gate
        for qid in row.get("refused", {}):
            row["refused"][qid] = "a different message"
    assert any("refused with" in f for f in run_gate(minilm[1], goldens, "cpu-fp32").failures)


def test_user_gate_cases_are_recorded_and_gated_in_their_split(tiny_modernbert: tuple[Path, Path],
                                                               tmp_path: Path) -> None:
    mine = tmp_path / "mine.jsonl"
    mine.write_text("\n".join(json.dumps(line) for line in [
        {"id": "mine-sel", "split": "selection", "state": "Our invoice shows the wrong VAT number.",
         "questions": {"team": {"type": "choice", "instructions": "Which team?", "criteria": ["billing", "tech"]}}},
        {"id": "mine-conf", "split": "confirmation", "state": [{"role": "user", "content": "cancel my plan"}],
         "questions": {"cancel": {"type": "noul", "instructions": "Does the user want to cancel?"}}},
    ]) + "\n")
    goldens = write_goldens_file(golden_slice("tiny-modernbert", keep_case=lambda i, _r: i % 30 == 0),
                                 tmp_path / "goldens")
    out, report = build_artifact(tiny_modernbert[0], BuildSpec.of("cpu-fp32", goldens=goldens, gate_cases=[mine]),
                                 tmp_path / "a")
    assert report.passed and report.corpus["summary"]["user_rows_added"] == 2
    before = load_goldens(goldens)
    for split in ("selection", "confirmation"):
        cases = sum(r["split"] == split for r in before["rows"])
        assert report.splits[split].cases == cases + 1
    assert report.corpus["sha256"] != before["corpus"]["sha256"]


# The test checkpoints' weights, the same on every CPU (AVX-512 VNNI and emulated Haswell checked 2026-12-01).
# A change to how they are made changes these on purpose: re-record goldens/ then (docs/artifacts.md#goldens).
PINNED_WEIGHTS = {"tiny-modernbert": "ad30b3e3c4bb12cbd09f74fb594667b1b92a63b03cb5a25bf4229c601306822d",
                  "minilm": "cf13c998523222cdd201f8df5073048ef6df03cbfd856e66f6ab92617e1a45a1"}


def test_the_test_checkpoints_are_pinned_bit_for_bit(request: pytest.FixtureRequest) -> None:
    for kind, pinned in PINNED_WEIGHTS.items():
        checkpoint, _ = request.getfixturevalue(kind.replace("-", "_"))
        assert weights_sha256(checkpoint) == pinned == load_goldens(GOLDENS / kind)["checkpoint"]["weights_sha256"]


def test_committed_goldens_replay_against_upstream(request: pytest.FixtureRequest) -> None:
    for kind in ("minilm", "tiny-modernbert"):
        checkpoint, _ = request.getfixturevalue(kind.replace("-", "_"))
        committed = load_goldens(GOLDENS / kind)
        # every 12th case and the edge cases: the whole corpus would take minutes with torch on two cores
        picked = [row for i, row in enumerate(committed["rows"]) if i % 12 == 0 or row["id"].startswith("edge:")]
        fresh = record_goldens(checkpoint, kind, cases=[{k: row[k] for k in (
            "id", "source", "lang", "split", "state", "questions", "controls")} for row in picked])
        # The checkpoints are the same bits on every CPU (checkpoints/random_weights); upstream's FP32 forward pass is
        # not: on the CPU family the goldens were recorded on its rows repeat to 1e-5, elsewhere to 1e-4.
        assert fresh["checkpoint"]["weights_sha256"] == committed["checkpoint"]["weights_sha256"], (
            "the test checkpoint no longer builds bit-identically; re-record goldens/%s" % kind)
        atol = 1e-5 if committed["reference"].get("cpu") == fresh["reference"]["cpu"] else 1e-4
        assert len(fresh["rows"]) == len(picked) >= 20
        for new, old in zip(fresh["rows"], picked, strict=True):
            assert new["token_ids_sha256"] == old["token_ids_sha256"] and new["markers"] == old["markers"], new["id"]
            assert new.get("refused") == old.get("refused"), new["id"]
            for a, b in zip(new["logits"], old["logits"], strict=True):
                assert np.allclose(a, b, atol=atol), new["id"]
    assert token_digest([101, 102]) == token_digest((101, 102)) != token_digest([102, 101])


@pytest.mark.int8
def test_minilm_int8_builds_and_publishes_through_the_cli(minilm: tuple[Path, Path], tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str],
                                                          quick_timing: None) -> None:
    store = tmp_path / "store"
    goldens = write_goldens_file(golden_slice("minilm", keep_case=lambda _i, row: row["id"].startswith("edge:")
                                              and row["id"] != "edge:collapsed-head"),
                                 tmp_path / "goldens")
    code = cli(["build", str(minilm[0]), "--name", "minilm", "--target", "cpu-int8", "--out", str(tmp_path / "a"),
                "--goldens", str(goldens), "--candidates", "encoder-weight-only-8bit", "--min-speedup", "0",
                "--publish", "--store", str(store), "--search-records", str(tmp_path / "records"),
                "--no-emulate-classes"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "1/4" in err and "3/4" in err and "4/4" in err and "PASSED" in err and "published minilm/cpu-int8" in err
    assert "encoder-weight-only-8bit on selection" in err and "confirming encoder-weight-only-8bit once" in err
    assert cli(["list", "--store", str(store)]) == 0
    listed = capsys.readouterr().out.split()
    assert listed[:2] == ["minilm", "cpu-int8"] and len(listed[2]) == 64
    decider = Decider.from_store(store, "minilm", "cpu-int8", cache_dir=tmp_path / "cache")
    answers = decider.predict("I was charged twice", {"x": {"type": "noul", "instructions": "refund?"}})["answers"]
    assert 0.0 <= answers["x"]["noul"] <= 1.0


@pytest.mark.int8
def test_import_regates_on_this_machine_before_publishing(tiny_int8: Path, tmp_path: Path) -> None:
    from laya_artifacts.deploy.publish import import_artifact, publish

    source, destination = LocalStore(tmp_path / "built-elsewhere"), LocalStore(tmp_path / "here")
    artifact_id = publish(tiny_int8, source)
    goldens = tiny_choice_slice()
    goldens["rows"] = goldens["rows"][::2]
    imported, report = import_artifact(source, "tiny-modernbert", "cpu-int8", goldens, destination, tmp_path / "c")
    assert imported == artifact_id and report.passed
    from laya_serverless.artifact.platform import cpu_profile, gate_record_key, int8_kernels

    record = destination.read(gate_record_key(artifact_id, int8_kernels(cpu_profile())))  # proven here, said so
    assert record is not None and json.loads(record[0])["artifact"] == artifact_id
    _negate(goldens)
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
    assert "the store folder %s does not exist" % (tmp_path / "store") in capsys.readouterr().err   # a typo's folder
    (tmp_path / "store").mkdir()
    assert cli(["verify", str(tmp_path / "store"), "--checkpoint", "nope"]) == 2
    assert "no artifact is published for checkpoint 'nope'" in capsys.readouterr().err


@pytest.mark.int8
def test_the_blockwise_int8_candidate_computes_in_int8_with_per_block_activation_scales(
        tiny_modernbert: tuple[Path, Path], tmp_path: Path) -> None:
    """`encoder-nbits-int8` is the weight-only graph with accuracy_level 4 on every encoder MatMul (ONNX Runtime
    then quantizes activations per block of 32 and computes in int8); the FP32-compute one leaves the level unset."""
    import onnx

    from laya_artifacts.export.onnx_export import GRAPH_FILE, export_checkpoint
    from laya_artifacts.search.quantize import FIXED_CANDIDATES, quantize_candidate

    export_checkpoint(tiny_modernbert[0], tmp_path / "raw")
    by_name = {c.name: c for c in FIXED_CANDIDATES}
    levels = {}
    for name in ("encoder-nbits-int8", "encoder-weight-only-8bit"):
        recipe = quantize_candidate(tmp_path / "raw" / GRAPH_FILE, tmp_path / (name + ".onnx"), by_name[name])
        nodes = [n for n in onnx.load(str(tmp_path / (name + ".onnx"))).graph.node if n.op_type == "MatMulNBits"]
        assert len(nodes) == recipe["quantized_nodes"] > 0
        levels[name] = {next((a.i for a in n.attribute if a.name == "accuracy_level"), 0) for n in nodes}
        assert recipe["accuracy_level"] == by_name[name].accuracy_level
    assert levels == {"encoder-nbits-int8": {4}, "encoder-weight-only-8bit": {0}}
