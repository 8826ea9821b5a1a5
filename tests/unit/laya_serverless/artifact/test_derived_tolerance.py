"""A derived FP32 tolerance: the rule (fixed constants), and a gate record that claims one is believed only when its
derivation is recorded and consistent with the rule."""

from __future__ import annotations

import json
from typing import Any

import pytest

from laya_serverless.artifact.platform import gate_record, record_refusal
from laya_serverless.artifact.tolerance import CEILING, FACTOR, derivation, derivation_refusal, derived_tolerance

REFERENCE = {"precision": "float64"}


def test_the_rule_never_goes_below_the_target_s_tolerance_nor_above_the_ceiling() -> None:
    assert FACTOR == 4.0 and CEILING == 1e-3
    assert derived_tolerance(1e-6) == 1e-4                       # a tight reference keeps the fixed tolerance
    assert derived_tolerance(4e-5) == pytest.approx(1.6e-4)      # 4 x the spread
    assert derived_tolerance(1e-2) == 1e-3                       # never looser than the ceiling
    with pytest.raises(ValueError, match="derived for cpu-fp32, cuda-fp32 only"):
        derivation("cpu-int8", ["c/q"], [1e-5], REFERENCE)
    with pytest.raises(ValueError, match="one spread per measured row"):
        derivation("cpu-fp32", ["c/q", "c/r"], [1e-5], REFERENCE)


def _record(report: dict[str, Any]) -> bytes:
    return gate_record("a" * 64, {"isa": ["avx2"]}, report, kernels="avx2")


def _report(**changes: Any) -> dict[str, Any]:
    found = derivation("cpu-fp32", ["case/q1", "case/q2"], [3e-5, 5e-5], REFERENCE)
    report = {"target": "cpu-fp32", "passed": True, "rows": 630, "max_probability_error": 1.45e-4,
              "max_action_error": 1e-6, "tolerance": found["tolerance"], "tolerance_derivation": found}
    report.update(changes)
    return report


def test_a_gate_record_with_a_consistent_derivation_is_believed_at_its_derived_tolerance() -> None:
    assert _report()["tolerance"] == pytest.approx(2e-4)
    assert record_refusal(_record(_report()), "a" * 64, "avx2", "cpu-fp32") is None
    plain = {k: v for k, v in _report().items() if k not in ("tolerance", "tolerance_derivation")}
    assert "not within the gate's tolerance 0.0001" in str(record_refusal(_record(plain), "a" * 64, "avx2", "cpu-fp32"))


@pytest.mark.parametrize("change, why", [
    (lambda r: r.update(tolerance=3e-4), "not what the rule gives"),
    (lambda r: r["tolerance_derivation"].update(tolerance=3e-4), "not what the rule gives"),
    (lambda r: r["tolerance_derivation"].update(factor=10.0), "another rule or constants"),
    (lambda r: r["tolerance_derivation"].update(ceiling=1.0), "another rule or constants"),
    (lambda r: r["tolerance_derivation"].update(row_spreads=[3e-5]), "one spread each"),
    (lambda r: r["tolerance_derivation"].update(rows=[]), "one spread each"),
    (lambda r: r["tolerance_derivation"].update(spread=1e-4), "not the largest"),
    (lambda r: r["tolerance_derivation"].update(row_spreads=[3e-5, float("nan")]), "one spread each"),
    (lambda r: r.update(tolerance_derivation="4 x spread"), "not an object"),
    (lambda r: r.update(max_probability_error=2.5e-4), "not within the gate's tolerance"),
])
def test_a_derivation_that_does_not_add_up_is_refused(change: Any, why: str) -> None:
    report = _report()
    change(report)
    assert why in str(record_refusal(_record(report), "a" * 64, "avx2", "cpu-fp32"))


def test_int8_never_takes_a_derived_tolerance() -> None:
    report = _report(target="cpu-int8")
    assert "derived for cpu-fp32, cuda-fp32 only" in str(derivation_refusal(report["tolerance_derivation"],
                                                                            "cpu-int8", report["tolerance"]))
    assert "derived for" in str(record_refusal(_record(report), "a" * 64, "avx2", "cpu-int8"))
    assert json.loads(_record(_report()))["report"]["tolerance_derivation"]["rule"].startswith("min(ceiling")


def test_a_deploy_time_regate_records_its_derivation_and_the_runtime_believes_it(tmp_path: Any,
                                                                                  monkeypatch: Any) -> None:
    from laya_serverless.artifact import platform as platform_module
    from laya_serverless.artifact.store import LocalStore
    from laya_serverless.gate import regate
    from laya_serverless.gate.replay import GateReport, SplitReport

    found = derivation("cpu-fp32", ["case/q1"], [5e-5], REFERENCE)
    split = SplitReport(split="selection", tolerance=found["tolerance"], rows=3, cases=1, errors=[1.45e-4])
    report = GateReport(target="cpu-fp32", tolerance=found["tolerance"], splits={"selection": split},
                        tolerance_derivation=found)
    monkeypatch.setattr(regate, "cpu_profile", lambda: {"isa": ["avx2"]})
    monkeypatch.setattr(regate, "int8_kernels", lambda _profile: "avx2")
    store = LocalStore(tmp_path)
    key = regate.record_gate(store, "a" * 64, report)
    assert json.loads(store.read(key)[0])["report"]["tolerance_derivation"] == found   # type: ignore[index]
    assert platform_module.proven_by_record(store, "a" * 64, "avx2", "cpu-fp32") is None
