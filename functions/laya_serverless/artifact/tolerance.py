"""The FP32 gate's tolerance when a checkpoint's own FP32 arithmetic is too coarse for the fixed one.

The FP32 targets are gated at `GATE_TOLERANCES` (1e-4). A deep, wide checkpoint can miss it with an exact
export: ONNX Runtime and PyTorch are two FP32 evaluations of one function, each off the exact answer by its
own rounding. Where the fixed tolerance refuses an FP32 export on |dp| alone (no hard mismatch, no other
failure), the build measures that rounding: upstream's model in float64 on the rows that missed, against the
PyTorch FP32 reference (the spread), and derives

    tolerance = min(CEILING, max(base, FACTOR x spread))

FACTOR (4) and CEILING (1e-3) were fixed before any measurement: |ort - pt| <= |ort - f64| + |pt - f64|, so
an implementation as exact as PyTorch's sits within 2 x spread; 4 leaves ONNX Runtime's other summation order
twice PyTorch's error. The ceiling keeps an FP32 gate 20 times tighter than int8's. The derivation is recorded
in the gate report (and so the manifest) and is accepted only when it is complete and consistent
(`derivation_refusal`): a derived tolerance is never applied, or believed, silently.
"""

from __future__ import annotations

import math
from typing import Any

from .targets import CPU_FP32, CUDA_FP32, GATE_TOLERANCES

FACTOR = 4.0
CEILING = 1e-3
RULE = "min(ceiling, max(base, factor x spread)); spread = max |dp| or |d act| of PyTorch FP32 vs float64"
DERIVABLE = (CPU_FP32, CUDA_FP32)


def derived_tolerance(spread: float, target: str = CPU_FP32) -> float:
    """The tolerance the rule gives for a measured `spread` (module docstring)."""
    return min(CEILING, max(GATE_TOLERANCES[target], FACTOR * spread))


def derivation(target: str, rows: list[str], spreads: list[float], reference: dict[str, Any]) -> dict[str, Any]:
    """What a gate report records: the rows measured, each row's spread, the rule, its constants and the result."""
    if target not in DERIVABLE:
        raise ValueError("a tolerance is derived for %s only, not %r" % (", ".join(DERIVABLE), target))
    if not rows or len(rows) != len(spreads):
        raise ValueError("a derivation needs one spread per measured row")
    spread = max(spreads)
    return {"rule": RULE, "factor": FACTOR, "base": GATE_TOLERANCES[target], "ceiling": CEILING, "rows": rows,
            "row_spreads": spreads, "spread": spread, "tolerance": derived_tolerance(spread, target),
            "reference": reference}


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value >= 0


def derivation_refusal(found: Any, target: str, tolerance: Any) -> str | None:
    """Why a recorded derivation does not justify `tolerance` for `target` (None when it does)."""
    if not isinstance(found, dict):
        return "its tolerance derivation is not an object"
    if target not in DERIVABLE:
        return "a tolerance is derived for %s only, not %r" % (", ".join(DERIVABLE), target)
    expected = {"rule": RULE, "factor": FACTOR, "base": GATE_TOLERANCES[target], "ceiling": CEILING}
    if any(found.get(k) != v for k, v in expected.items()):
        return "its derivation names another rule or constants than %s" % expected
    rows, spreads = found.get("rows"), found.get("row_spreads")
    if not isinstance(rows, list) or not rows or not all(isinstance(r, str) for r in rows) or \
            not isinstance(spreads, list) or len(spreads) != len(rows) or not all(_number(s) for s in spreads):
        return "its derivation does not list the measured rows with one spread each"
    if found.get("spread") != max(spreads) or not _number(found.get("tolerance")):
        return "its derivation's spread is not the largest of its rows'"
    if not math.isclose(found["tolerance"], derived_tolerance(max(spreads), target), rel_tol=1e-12) \
            or tolerance != found["tolerance"]:
        return "its tolerance %r is not what the rule gives for spread %r" % (tolerance, found.get("spread"))
    return None


def report_tolerance(report: dict[str, Any], target: str) -> tuple[float | None, str | None]:
    """(the tolerance a gate report's figures are judged at, why none is) for a recorded report: the target's own,
    or a derived one whose derivation is recorded and consistent."""
    fixed = GATE_TOLERANCES.get(target)
    found = report.get("tolerance_derivation")
    if found is None:
        return fixed, None if fixed is not None else "no tolerance for target %r" % target
    why = derivation_refusal(found, target, report.get("tolerance"))
    return (None, why) if why else (float(found["tolerance"]), None)
