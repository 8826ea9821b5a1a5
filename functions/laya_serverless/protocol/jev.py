"""Shaping answers for Jev clients: `x_jev_confidence` (full mode) and the strict projection.

Both work on finished results and never recompute a value the decider produced.
"""

from __future__ import annotations

import math
from typing import Any


def jev_confidence(answer: dict[str, Any]) -> float | None:
    """TypeSafe Jev's confidence for a choice or score answer, from its (rounded) probabilities.

    choice: (max p - 1/n) / (1 - 1/n); score: max(0, 1 - spread around the mode / the uniform
    spread). None when the answer has no usable probabilities (noul, non-numbers, negatives).
    """
    kind, probabilities = answer.get("type"), answer.get("probabilities")
    if kind not in ("choice", "score") or not isinstance(probabilities, dict) or not probabilities:
        return None
    try:
        ordered = [probabilities[k] for k in sorted(probabilities, key=int)] if kind == "score" \
            else list(probabilities.values())
        p = [float(v) for v in ordered]
    except (TypeError, ValueError):
        return None
    if any(isinstance(v, bool) for v in probabilities.values()) or not all(math.isfinite(v) and v >= 0.0 for v in p):
        return None
    n = len(p)
    if n == 1:
        return 1.0
    total = sum(p)
    p = [v / total for v in p] if total else [1.0 / n] * n
    if kind == "choice":
        return (max(p) - 1.0 / n) / (1.0 - 1.0 / n)
    mode = max(range(n), key=p.__getitem__)
    spread = sum(v * abs(i - mode) for i, v in enumerate(p))
    uniform = sum(abs(i - (n - 1) / 2) for i in range(n)) / n
    return max(0.0, 1.0 - spread / uniform)


def with_jev_confidence(result: dict[str, Any]) -> dict[str, Any]:
    """A copy of `result` whose choice and score answers end with `x_jev_confidence`."""
    answers = result.get("answers")
    if not isinstance(answers, dict):
        return result
    shaped = {}
    for qid, answer in answers.items():
        value = jev_confidence(answer) if isinstance(answer, dict) else None
        shaped[qid] = answer if value is None else {**answer, "x_jev_confidence": round(value, 4)}
    return {**result, "answers": shaped}


def _confidence(answer: dict[str, Any], formula: str) -> Any:
    """Laya's `confidence` as decoded, or (formula "jev") TypeSafe Jev's over the answer's probabilities."""
    if formula == "jev":
        value = jev_confidence(answer)
        if value is not None:
            return round(value, 4)
    return answer["confidence"]


def strict_projection(result: dict[str, Any], confidence: str = "laya") -> dict[str, Any]:
    """Only the keys the strict Jev contract defines, in its order (`type` kept on every answer)."""
    answers: dict[str, Any] = {}
    for qid, answer in (result.get("answers") or {}).items():
        kind = answer.get("type") if isinstance(answer, dict) else None
        if kind == "choice":
            answers[qid] = {"type": "choice", "choice": answer["choice"], "confidence": _confidence(answer, confidence),
                            "probabilities": answer["probabilities"]}
        elif kind == "score":
            answers[qid] = {"type": "score", "score": answer["score"], "confidence": _confidence(answer, confidence),
                            "probabilities": answer["probabilities"], "legend": answer["legend"]}
        elif kind == "noul":
            answers[qid] = {"type": "noul", "noul": answer["noul"]}
        else:
            answers[qid] = answer
    usage = result.get("usage") or {}
    return {"model": result["model"], "answers": answers,
            "usage": {"input_tokens": usage.get("input_tokens", 0), "output_tokens": usage.get("output_tokens", 0)}}
