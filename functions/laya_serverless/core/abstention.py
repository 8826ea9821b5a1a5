"""The abstention report (`min_confidence`): validation with the protocol's messages, and the report.

It never removes or changes an answer; it reports on every answer whether it passed,
abstained (`low_confidence: true`), or carried no usable number. With no threshold it writes
nothing at all: absence is the report.
"""

from __future__ import annotations

import math
from typing import Any

from ..errors import QuestionError
from .decode import size_bucket

Threshold = float | dict[str, float]
DEFAULT_KEY = "default"
_AT = ("min_confidence",)
BUCKET_KEYS = frozenset("%s:%s" % (t, s) for t in ("choice", "score", "noul") for s in ("2", "3-5", "6-10", "11+"))


def _one_threshold(value: Any) -> float:
    try:  # an integer too large for a float is refused like any other out-of-range number
        number = float(value) if isinstance(value, int | float) and not isinstance(value, bool) else math.nan
    except OverflowError:
        number = math.nan
    if not math.isfinite(number) or number < 0.0 or number > 1.0:
        raise QuestionError("min_confidence must be a float in [0.0, 1.0], got %r" % (value,), location=_AT)
    return number


def check_min_confidence(value: Any) -> Threshold:
    """A number in [0, 1], or a non-empty map of bucket (e.g. 'choice:3-5') or 'default' to one."""
    if not isinstance(value, dict):
        return _one_threshold(value)
    if not value:
        raise QuestionError("a min_confidence map must be a non-empty dict of bucket -> float, got %r" % (value,),
                            location=_AT)
    checked: dict[str, float] = {}
    for key, threshold in value.items():
        if not isinstance(key, str) or (key not in BUCKET_KEYS and key != DEFAULT_KEY):
            raise QuestionError("min_confidence map keys must be a bucket like 'choice:3-5' or "
                                "'default', got %r" % (key,), location=_AT)
        checked[key] = _one_threshold(threshold)
    return checked


def _finite_number(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _bucket(answer: dict[str, Any]) -> str | None:
    qtype = answer.get("type")
    if qtype not in ("choice", "score", "noul"):
        return None
    probabilities = answer.get("probabilities")
    if isinstance(probabilities, dict) and probabilities:
        k = len(probabilities)
    elif qtype == "noul":
        k = 2
    else:
        return None
    return "%s:%s" % (qtype, size_bucket(k))


def threshold_for(answer: dict[str, Any], threshold: Threshold) -> float:
    if not isinstance(threshold, dict):
        return threshold
    bucket = _bucket(answer)
    if bucket is not None and bucket in threshold:
        return threshold[bucket]
    return threshold.get(DEFAULT_KEY, 0.0)


def apply_abstention(results: list[dict[str, Any]], threshold: Threshold | None) -> None:
    """Annotate every answer of every result in place; nothing when `threshold` is None."""
    if threshold is None:
        return
    for result in results:
        for answer in result.get("answers", {}).values():
            number = _finite_number(answer.get("answer_confidence"))
            if number is None:
                number = _finite_number(answer.get("confidence"))
            limit = threshold_for(answer, threshold)
            answer.pop("low_confidence", None)
            if number is None:
                answer["abstention"] = "unevaluated"
            elif number < limit:
                answer["low_confidence"] = True
                answer["abstention"] = "abstained"
            else:
                answer["abstention"] = "passed"
            answer["abstention_threshold"] = float(limit)
