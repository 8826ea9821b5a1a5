"""From a question's option logits to its answer object: the only place answers are built.

Numerics follow upstream where it matters for the 4th decimal: temperature-scaled softmax in
float32, score expectation in float64, entropy summed in float32.

One deliberate deviation: emitted probabilities are rounded with largest-remainder rounding to
4 decimals, so they sum to exactly 1, and `choice` is the first maximum of the emitted values.
Strict Jev clients check both; upstream's independent `round()` can break either.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..artifact.layout import DecodeConfig
from .questions import Question, render_value

MODEL_NAME = "laya-rl-agent"
DECIMALS = 4
_UNITS = 10**DECIMALS
_SIZE_BUCKETS = ((2, "2"), (5, "3-5"), (10, "6-10"))
_TYPE_NAMES = ("choice", "score", "noul")


def size_bucket(n_options: int) -> str:
    """The option-count bucket shared by temperatures and abstention thresholds: 2, 3-5, 6-10, 11+."""
    return next((name for limit, name in _SIZE_BUCKETS if n_options <= limit), "11+")


def temperature_bucket(type_index: int, n_options: int) -> str:
    return "%s:%s" % (_TYPE_NAMES[type_index], size_bucket(n_options))


def temperature_for(config: DecodeConfig, type_index: int, n_options: int) -> float:
    bucket = temperature_bucket(type_index, n_options)
    return config.temperature_by_options.get(bucket, config.temperature[type_index])


def option_probabilities(slot_logits: np.ndarray, temperature: float, order: tuple[int, ...] | None) -> np.ndarray:
    """Softmax of the slot logits at `temperature` (float32), put back into option order."""
    z: np.ndarray = np.asarray(slot_logits, dtype=np.float32) / temperature
    p: np.ndarray = np.exp(z - z.max())
    p /= p.sum()
    if order is None or len(order) != len(p):
        return p
    by_option = np.empty_like(p)
    by_option[np.asarray(order, dtype=int)] = p
    return by_option


def softmax_rows(logits: np.ndarray) -> np.ndarray:
    e: np.ndarray = np.exp(logits - np.max(logits, axis=-1, keepdims=True))
    return np.asarray(e / np.sum(e, axis=-1, keepdims=True))


def entropy_confidence(p: np.ndarray) -> float:
    """1 - H(p)/ln k in [0, 1]; 1.0 when there are fewer than two options."""
    k = len(p)
    if k < 2:
        return 1.0
    entropy = -float((p * np.log(np.clip(p, 1e-12, 1.0))).sum())
    return min(1.0, max(0.0, 1.0 - entropy / math.log(k)))


def max_probability(p: np.ndarray) -> float:
    if len(p) < 1:
        return 1.0
    return min(1.0, max(0.0, float(p.max())))


def rounded_distribution(p: np.ndarray) -> list[int]:
    """Largest-remainder rounding to 1e-4 units: the units always sum to 10 000."""
    scaled = np.asarray(p, dtype=np.float64) * (_UNITS / max(float(np.sum(p, dtype=np.float64)), 1e-30))
    units = np.floor(scaled).astype(np.int64)
    missing = _UNITS - int(units.sum())
    if missing > 0:
        # Stable sort: among equal remainders the earlier option gets the unit first.
        for i in np.argsort(-(scaled - units), kind="stable")[:missing]:
            units[i] += 1
    return [int(u) for u in units]


def _units_to_float(units: int) -> float:
    return float(round(units / _UNITS, DECIMALS))


def build_answer(question: Question, p: np.ndarray, act_probability: float) -> dict[str, Any]:
    """The answer object of one question, with keys in the protocol's emission order."""
    answer_confidence = round(max_probability(p), DECIMALS)
    action = {"act_probability": round(float(act_probability), DECIMALS)}
    if question.qtype == "noul":
        p_true = float(p[1])
        return {
            "type": "noul",
            "noul": round(p_true, DECIMALS),
            "confidence": round(max(p_true, 1.0 - p_true), DECIMALS),
            "answer_confidence": answer_confidence,
            "action": action,
        }
    units = rounded_distribution(p)
    emitted = [_units_to_float(u) for u in units]
    confidence = round(entropy_confidence(p), DECIMALS)
    if question.qtype == "choice":
        best = units.index(max(units))
        return {
            "type": "choice",
            "choice": question.keys[best],
            "probabilities": dict(zip(question.keys, emitted, strict=True)),
            "confidence": confidence,
            "answer_confidence": answer_confidence,
            "action": action,
        }
    return {
        "type": "score",
        "score": round(float((np.arange(len(p)) * p).sum()), DECIMALS),
        "legend": {str(i): render_value(level) for i, level in enumerate(question.keys)},
        "probabilities": {str(i): v for i, v in enumerate(emitted)},
        "confidence": confidence,
        "answer_confidence": answer_confidence,
        "action": action,
    }
