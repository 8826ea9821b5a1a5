"""The fused export on both test architectures: what it fuses, and that it changes no decision."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from laya_artifacts.export.onnx_export import FUSION_RECORD
from laya_artifacts.goldens.record import load_goldens
from laya_serverless import Decider
from laya_serverless.core.decode import DECIMALS
from laya_serverless.gate.replay import run_gate
from tests.conftest import GOLDENS

QUESTIONS = {
    "team": {"type": "choice", "instructions": "Which team should handle this?",
             "criteria": {"billing": "payments and refunds", "tech": "bugs and outages", "other": ""}},
    "urgent": {"type": "noul", "instructions": "Is it urgent?"},
}


def _attention_layers(checkpoint: Path) -> int:
    encoder = json.loads((checkpoint / "encoder" / "config.json").read_text())
    head = json.loads((checkpoint / "rl_agent_config.json").read_text())
    return int(encoder["num_hidden_layers"]) + int(head.get("head_layers", 2))


@pytest.mark.parametrize("kind", ["minilm", "tiny_modernbert"])
def test_every_attention_is_one_multi_head_attention_and_no_nan_guard_is_left(
        kind: str, request: pytest.FixtureRequest) -> None:
    import onnx

    checkpoint, export = request.getfixturevalue(kind)
    ops = [node.op_type for node in onnx.load(str(export / "model.onnx")).graph.node]
    fusion = json.loads((export / FUSION_RECORD).read_text())
    assert ops.count("MultiHeadAttention") == fusion["attention"] == _attention_layers(checkpoint)
    assert fusion["unfused_attention"] == 0
    assert "IsNaN" not in ops and "If" not in ops and ops.count("Softmax") == 1  # the decision head's own


def test_padded_rows_beside_a_state_longer_than_the_sliding_window_change_nothing(
        tiny_modernbert: tuple[Path, Path]) -> None:
    """Without the NaN guards, a padded row whose window holds only padding must stay finite and unread."""
    decider = Decider.from_artifact(tiny_modernbert[1], verify=False)
    window = json.loads((tiny_modernbert[0] / "encoder" / "config.json").read_text())["local_attention"]
    long_state = " ".join("word%d" % i for i in range(4 * window))  # several windows past the short one
    states = ["short.", long_state, "a little longer, but still under one window."]
    batched = decider.predict_batch(states, QUESTIONS)
    for state, answer in zip(states, batched, strict=True):
        alone = decider.predict(state, QUESTIONS)
        assert np.allclose(_numbers(answer), _numbers(alone), atol=2 * 10.0 ** -DECIMALS), state[:20]


def _numbers(answers: dict[str, Any]) -> list[float]:
    """Every probability and act probability of one state's answers, in question order."""
    found: list[float] = []
    for qid in QUESTIONS:
        answer = answers["answers"][qid]
        found.extend(answer["probabilities"].values() if "probabilities" in answer else [answer["noul"]])
        found.append(answer["action"]["act_probability"])
    return found


@pytest.mark.slow
def test_fused_minilm_meets_the_fp32_tolerance_on_the_whole_corpus(minilm: tuple[Path, Path]) -> None:
    # tiny-modernbert's twin, through the whole build, is test_build.py's whole-corpus FP32 test; this one
    # gates the fixture's export directly (every core, one run per row) to keep the suite's time down.
    report = run_gate(minilm[1], load_goldens(GOLDENS / "minilm"), "cpu-fp32", repeat=False, threads=None)
    assert report.passed and report.rows >= 500, report.table()
    assert report.max_probability_error <= 1e-4 and report.near_tie_flips == []
