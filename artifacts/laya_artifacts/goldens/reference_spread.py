"""The FP32 reference's own rounding, measured: upstream's model in float64 against its PyTorch FP32 goldens.

When an exact FP32 export misses the FP32 gate on |dp| alone (no hard mismatch, no other failure), the
build measures how far PyTorch's FP32 answers sit from float64 on the cases that missed, and gates again at
the tolerance derived from that spread (`laya_serverless.artifact.tolerance`: the rule, its constants and why).
The report, and so the manifest, records the derivation; nothing is loosened silently.
"""

from __future__ import annotations

import dataclasses
import gc
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from laya_artifacts.goldens.record import _encode_case
from laya_serverless.artifact.layout import DecodeConfig
from laya_serverless.artifact.tolerance import DERIVABLE, derivation, derivation_refusal
from laya_serverless.core.decode import option_probabilities, temperature_for
from laya_serverless.core.questions import parse_questions
from laya_serverless.gate.replay import GateReport, SplitReport, run_gate

_OVER = ": |dp| "  # how `gate_rows` words a row over the tolerance


def tolerance_misses_only(report: GateReport) -> bool:
    """Whether `report` failed on rows over the tolerance alone: a derived tolerance can speak to nothing else."""
    splits: Sequence[SplitReport] = list(report.splits.values())
    return not report.passed and bool(splits) and all(
        not s.hard_mismatches and all(_OVER in f for f in s.failures) for s in splits)


def missed_cases(report: GateReport, goldens: dict[str, Any]) -> list[dict[str, Any]]:
    """The golden cases holding a row over the tolerance, in golden order."""
    heads = [f.split(_OVER)[0] for s in report.splits.values() for f in s.failures if _OVER in f]
    return [row for row in goldens["rows"] if any(h.startswith(row["id"] + "/") for h in heads)]


def float64_answers(checkpoint_dir: Path, cases: Sequence[dict[str, Any]]) -> dict[str, tuple[Any, Any]]:
    """{case id: (option logits, action probabilities)} from upstream's model run in float64, the cases encoded
    exactly as the goldens were (`record._encode_case`)."""
    import laya
    import torch
    from laya.common import collate_items

    agent = laya.Agent(str(checkpoint_dir), device="cpu")
    agent.model.double()
    found: dict[str, tuple[Any, Any]] = {}
    try:
        for case in cases:
            _, items, _refused = _encode_case(agent, case)
            if not items:
                continue
            batch = collate_items([items], agent.tok.pad_token_id)
            with torch.no_grad():
                logits, act = agent.model(batch["input_ids"], batch["attention_mask"], batch["marker_pos"],
                                          batch["marker_mask"], batch["qtype"])
            found[case["id"]] = (logits.double().numpy(), torch.softmax(act.double(), -1).numpy())
    finally:
        del agent  # the float64 model is twice the FP32 one: gone before the next gate opens its session
        gc.collect()
    return found


def row_spreads(config: Any, cases: Sequence[dict[str, Any]],
                answers: dict[str, tuple[Any, Any]]) -> tuple[list[str], list[float]]:
    """(row names `case/question`, max |dp| or |d act| of each row's FP32 golden against float64)."""
    names: list[str] = []
    spreads: list[float] = []
    for case in cases:
        if case["id"] not in answers:
            continue
        logits, act = answers[case["id"]]
        refused = case.get("refused", {})
        questions = parse_questions({q: d for q, d in case["questions"].items() if q not in refused})
        for j, question in enumerate(questions):
            k = len(case["markers"][j])
            t = temperature_for(config, question.type_index, k)
            exact = option_probabilities(logits[j, :k], t, question.option_order)
            fp32 = option_probabilities(np.asarray(case["logits"][j], dtype=np.float32), t, question.option_order)
            names.append("%s/%s" % (case["id"], question.qid))
            spreads.append(max(float(np.abs(fp32 - exact).max()),
                               abs(float(act[j, 0]) - case["act_probabilities"][j][0])))
    return names, spreads


def gate_with_derived_tolerance(report: GateReport, checkpoint_dir: Path, artifact_dir: Path,
                                goldens: dict[str, Any], target: str, threads: int,
                                progress: Callable[[str], None] = lambda _m: None) -> GateReport:
    """`report` itself unless it is an FP32 gate that missed on |dp| alone; then the spread of the missed cases,
    the derived tolerance, and the whole gate again at it, its report carrying the derivation."""
    if target not in DERIVABLE or not tolerance_misses_only(report):
        return report
    cases = missed_cases(report, goldens)
    progress("    the FP32 gate missed %g on |dp| alone (max %.3g, 0 hard): measuring PyTorch FP32 against float64 on "
             "the %d case(s) that missed" % (report.tolerance, report.max_probability_error, len(cases)))
    config = DecodeConfig.load(artifact_dir)  # the temperatures only: no second session of the graph
    rows, spreads = row_spreads(config, cases, float64_answers(checkpoint_dir, cases))
    import torch

    found = derivation(target, rows, spreads, {"upstream": "laya on PyTorch CPU", "precision": "float64",
                                               "against": "the goldens (PyTorch CPU FP32)", "torch": torch.__version__})
    if found["tolerance"] <= report.tolerance:
        report.notes.append("no tolerance derived: PyTorch FP32 is within %.3g of float64 on the %d row(s) that missed "
                            "(%s gives %g); the export is less exact than the reference" % (
                                found["spread"], len(rows), found["rule"], found["tolerance"]))
        return report
    again = judged_again(report, found)
    if again is not None:
        progress("    spread %.3g over %d row(s): tolerance %g (%s); every row of the first pass is within it: judged "
                 "again at it, not run again" % (found["spread"], len(rows), found["tolerance"], found["rule"]))
        return again
    progress("    spread %.3g over %d row(s): tolerance %g (%s); gating both splits again at it"
             % (found["spread"], len(rows), found["tolerance"], found["rule"]))
    return run_gate(artifact_dir, goldens, target, threads=threads, derivation=found, progress=progress)


def judged_again(report: GateReport, found: dict[str, Any]) -> GateReport | None:
    """`report`'s rows judged at the derived tolerance, where that verdict needs no second pass: the same graph gives
    the same answers, and a report that missed on |dp| alone (no hard mismatch, every failure a row over the
    tolerance) passes a looser tolerance exactly when its largest |dp| and |d act| are within it. None otherwise
    (some row stays over it: the full gate at the derived tolerance says which)."""
    tolerance = float(found["tolerance"])
    splits = report.splits.values()
    if derivation_refusal(found, report.target, tolerance) or not tolerance_misses_only(report) or any(
            s.max_probability_error > tolerance or s.max_action_error > tolerance for s in splits):
        return None
    # Every failure was a row over the old tolerance and is within the new one; a flip that was a near tie stays
    # one (its margin is under twice a smaller tolerance), and there was no hard mismatch to reclassify.
    return dataclasses.replace(report, tolerance=tolerance, tolerance_derivation=found, notes=list(report.notes),
                               splits={name: dataclasses.replace(s, tolerance=tolerance, failures=[])
                                       for name, s in report.splits.items()})
