"""The parity gate: an artifact against the golden reference, with definitions fixed before measurement.

- probability error: max |dp| over options (temperature-scaled, option order) vs the goldens;
- action-probability error: likewise for `act_probability`;
- hard mismatch: top-1 differs while the reference's top-1/top-2 margin is >= 2x tolerance;
- near-tie flip: top-1 differs inside that band; listed row by row, never hidden;
- token ids and markers identical; all outputs finite; two runs bit-identical.

Every failing row is collected and reported at once; `passed` is the verdict.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from laya_serverless import Decider, InferenceError
from laya_serverless.core.decode import option_probabilities, temperature_for
from laya_serverless.core.providers import device_of_target
from laya_serverless.core.questions import parse_questions

TOLERANCES = {"cpu-fp32": 1e-4, "cpu-int8": 0.02, "cuda-fp16": 0.02, "cuda-fp32": 1e-4}


@dataclass
class GateReport:
    target: str
    tolerance: float
    rows: int = 0
    max_probability_error: float = 0.0
    max_action_error: float = 0.0
    hard_mismatches: list[dict[str, Any]] = field(default_factory=list)
    near_tie_flips: list[dict[str, Any]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.failures and not self.hard_mismatches and self.max_probability_error <= self.tolerance \
            and self.max_action_error <= self.tolerance

    def as_dict(self) -> dict[str, Any]:
        return {"target": self.target, "tolerance": self.tolerance, "passed": self.passed, "rows": self.rows,
                "max_probability_error": self.max_probability_error, "max_action_error": self.max_action_error,
                "hard_mismatches": self.hard_mismatches, "near_tie_flips": self.near_tie_flips,
                "failures": self.failures}

    def table(self) -> str:
        lines = [
            "parity gate (%s, tolerance %g): %s" % (self.target, self.tolerance, "PASSED" if self.passed else "FAILED"),
            "  rows compared            %d" % self.rows,
            "  max |dp|                 %.3g" % self.max_probability_error,
            "  max |d act_probability|  %.3g" % self.max_action_error,
            "  hard mismatches          %d" % len(self.hard_mismatches),
            "  near-tie flips           %d" % len(self.near_tie_flips),
        ]
        lines += ["  near tie: %(case)s/%(question)s margin %(margin).4f" % f for f in self.near_tie_flips]
        lines += ["  HARD: %(case)s/%(question)s ours %(ours)s vs reference %(reference)s margin %(margin).4f" % m
                  for m in self.hard_mismatches]
        lines += ["  FAIL: %s" % f for f in self.failures]
        return "\n".join(lines)


def _top_two_margin(p: np.ndarray) -> float:
    ordered = np.sort(p)[::-1]
    return float(ordered[0] - ordered[1]) if len(ordered) > 1 else 1.0


def run_gate(artifact_dir: Path, goldens: dict[str, Any], target: str, device: str | None = None) -> GateReport:
    """Gate the artifact in `artifact_dir` (not yet published, so not verified by manifest) against `goldens`,
    on the device its target runs on (a cuda target on the GPU, never moved), or on `device` when given."""
    report = GateReport(target=target, tolerance=TOLERANCES[target])
    decider = Decider.from_artifact(artifact_dir, verify=False, device=device or device_of_target(target))
    config = decider.config
    for row in goldens["rows"]:
        case = row["id"]
        questions = parse_questions(row["questions"])
        max_len = row["controls"].get("max_len", config.max_len)
        head_max_len = row["controls"].get("head_max_len", config.head_max_len)
        built = decider.rows_for(row["state"], questions, max_len, head_max_len)
        if [r.ids for r in built] != row["token_ids"] or [r.markers for r in built] != row["markers"]:
            report.failures.append("%s: token ids or markers differ from the reference" % case)
            continue
        try:
            logits, act = decider.run_rows(built, questions)
            again_logits, again_act = decider.run_rows(built, questions)
        except InferenceError as exc:  # non-finite outputs among them
            report.failures.append("%s: %s" % (case, exc))
            continue
        if not (np.array_equal(logits, again_logits) and np.array_equal(act, again_act)):
            report.failures.append("%s: two runs of the same input are not bit-identical" % case)
        for j, question in enumerate(questions):
            report.rows += 1
            k = len(row["markers"][j])
            t = temperature_for(config, question.type_index, k)
            ours = option_probabilities(logits[j, :k], t, question.option_order)
            reference = option_probabilities(np.asarray(row["logits"][j], dtype=np.float32), t, question.option_order)
            p_error = float(np.abs(ours - reference).max())
            a_error = abs(float(act[j, 0]) - row["act_probabilities"][j][0])
            report.max_probability_error = max(report.max_probability_error, p_error)
            report.max_action_error = max(report.max_action_error, a_error)
            if p_error > report.tolerance or a_error > report.tolerance:
                report.failures.append("%s/%s: |dp| %.3g, |d act| %.3g over %g"
                                       % (case, question.qid, p_error, a_error, report.tolerance))
            if int(ours.argmax()) != int(reference.argmax()):
                margin = _top_two_margin(reference)
                flip = {"case": case, "question": question.qid, "ours": int(ours.argmax()),
                        "reference": int(reference.argmax()), "margin": margin}
                (report.near_tie_flips if margin < 2 * report.tolerance else report.hard_mismatches).append(flip)
    return report
