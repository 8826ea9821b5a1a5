"""The `demo` checkpoint the pipeline ships: its head is package data, verified by hash before assembly."""

from __future__ import annotations

import ast
import json
import shutil
import tomllib
from pathlib import Path

import pytest

from laya_artifacts.checkpoints import demo
from tests.paths import ROOT
from tests.prerequisites import qemu_needed, require


def test_the_shipped_head_is_package_data_and_matches_its_recorded_hash():
    assert demo.MODEL_DIR.parent == Path(demo.__file__).resolve().parent   # inside the package, not the checkout
    meta = demo.demo_config()
    assert meta["name"] == demo.DEMO_NAME
    assert demo.sha256_file(demo.MODEL_DIR / demo.HEAD_FILE) == meta["head_sha256"]
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "demo_model/*" in package_data["laya_artifacts.checkpoints"]   # a wheel carries both files


def test_the_pipeline_never_imports_the_training_research():
    """laya_training (research/) imports laya_artifacts.checkpoints.demo, never the other way round."""
    for path in sorted((ROOT / "artifacts" / "laya_artifacts").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            assert not any(name.split(".")[0] == "laya_training" for name in names), path


def test_assembly_refuses_a_tampered_head_or_a_different_encoder(tmp_path, monkeypatch):
    shipped = tmp_path / "demo"
    shutil.copytree(demo.MODEL_DIR, shipped)
    head = shipped / demo.HEAD_FILE
    head.write_bytes(head.read_bytes()[:-1] + bytes([head.read_bytes()[-1] ^ 1]))
    with pytest.raises(demo.DemoError, match="does not match the sha256"):
        demo.assemble_demo(tmp_path / "out", shipped)
    shutil.copy(demo.MODEL_DIR / demo.HEAD_FILE, head)
    other = tmp_path / "other.safetensors"
    other.write_bytes(b"not the MiniLM weights")
    monkeypatch.setattr(demo, "encoder_weights", lambda: other)
    with pytest.raises(demo.DemoError, match="not the one the demo head was trained on"):
        demo.assemble_demo(tmp_path / "out", shipped)
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_make_checkpoint_demo_assembles_the_shipped_head(tmp_path):
    from laya_artifacts.cli import main

    out = tmp_path / "checkpoint"
    assert main(["make-checkpoint", "demo", "--out", str(out)]) == 0
    assert (out / "rl_agent_config.json").is_file()
    source = json.loads((out / "laya_serverless_source.json").read_text())
    assert source == {"kind": demo.DEMO_NAME, "head_sha256": demo.demo_config()["head_sha256"]}


def test_the_shipped_search_record_decides_the_demo_s_default_search_here(tmp_path):
    """`make serve` does no int8 work on any x86 class: the shipped record has the key this checkout computes for
    the demo's default search (weights, built-in corpus, this onnxruntime, candidates, recipe), and is a clear
    refusal, usable on every class of its arithmetic. A new candidate, corpus or onnxruntime fails this test
    until the record is made again (`laya-artifacts build <demo> --target cpu-int8 --research`)."""
    import platform

    from laya_artifacts.goldens.corpus import builtin_cases, corpus_sha256
    from laya_artifacts.search import precision as search
    from laya_artifacts.search.records import SHIPPED, decision_key, find_record
    from laya_serverless.artifact.targets import GATE_TOLERANCES

    if platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("the shipped record is for x86 (arm64 searches once)")
    checkpoint = demo.demo_checkpoint(tmp_path)
    goldens = {"corpus": {"sha256": corpus_sha256(builtin_cases())}}
    key = decision_key(checkpoint, goldens, list(search.CANDIDATE_NAMES), search.MIN_SPEEDUP)
    found = find_record(key, [SHIPPED], GATE_TOLERANCES["cpu-int8"])
    assert found is not None, "no shipped record for %s" % key
    assert found[0]["chosen"] is None and found[0]["passed"] == []


def test_an_avx2_cpu_reads_the_shipped_refusal_too(tmp_path):
    """The record was made on one x86 class; run as an AVX2-only CPU (qemu -cpu Haswell, which the search's
    class detection sees through cpuid) the lookup still finds it: a clear refusal holds on every x86 class."""
    import json
    import subprocess
    import sys

    from laya_artifacts.goldens.corpus import builtin_cases, corpus_sha256
    from laya_artifacts.search import emulated
    from laya_artifacts.search import precision as search
    from laya_artifacts.search.records import decision_key

    require(qemu_needed())
    key = decision_key(demo.demo_checkpoint(tmp_path), {"corpus": {"sha256": corpus_sha256(builtin_cases())}},
                       list(search.CANDIDATE_NAMES), search.MIN_SPEEDUP)
    lookup = ("import json, sys\n"
              "from laya_serverless.artifact.platform import cpu_profile, int8_kernels\n"
              "from laya_artifacts.search.records import SHIPPED, find_record\n"
              "found = find_record(json.loads(sys.argv[1]), [SHIPPED], 0.02)\n"
              "print(json.dumps([int8_kernels(cpu_profile()), None if found is None else found[0]['int8_kernels']]))")
    run = subprocess.run([emulated.QEMU, "-cpu", emulated.AVX2_CPU, sys.executable, "-c", lookup, json.dumps(key)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    here, recorded_on = json.loads(run.stdout.strip().splitlines()[-1])
    assert here == "avx2" and recorded_on is not None   # recorded on amx-int8 (2026-12-02)


@pytest.mark.slow
def test_the_shipped_demo_goldens_are_the_assembled_demo_s_and_replay_against_upstream(tmp_path):
    """`make serve` gates the demo on the goldens the package ships instead of recording them (a minute with
    torch): they must be for exactly the assembled weights, and upstream must still give their answers."""
    import numpy as np

    from laya_artifacts.goldens.record import load_goldens, record_goldens, shipped_goldens

    checkpoint = demo.demo_checkpoint(tmp_path)
    found = shipped_goldens(checkpoint)
    assert found is not None, "no shipped goldens for the demo's weights: re-record them (docs/artifacts.md#goldens)"
    shipped = load_goldens(found)
    picked = [row for i, row in enumerate(shipped["rows"]) if i % 24 == 0]   # 7 of 148 cases, about 3 s of torch
    fresh = record_goldens(checkpoint, demo.DEMO_NAME, cases=[{k: row[k] for k in (
        "id", "source", "lang", "split", "state", "questions", "controls")} for row in picked])
    atol = 1e-5 if shipped["reference"]["cpu"] == fresh["reference"]["cpu"] else 1e-4
    for new, old in zip(fresh["rows"], picked, strict=True):
        assert new["token_ids_sha256"] == old["token_ids_sha256"] and new.get("refused") == old.get("refused")
        for a, b in zip(new["logits"] + new["act_probabilities"], old["logits"] + old["act_probabilities"],
                        strict=True):
            assert np.allclose(a, b, atol=atol), new["id"]
