"""What an answered decision request tells the metrics: inference time, rows decided, input tokens."""

from __future__ import annotations

from typing import Any

from .. import observe


def answered(payload: dict[str, Any], elapsed_ms: float) -> None:
    """Record one answered request, single (`answers`, `usage`) or batch (`results`, `total_usage`)."""
    results = payload.get("results", [payload])
    usage = payload.get("total_usage") or payload.get("usage") or {}
    observe.metric(observe.INFERENCE_MS, elapsed_ms)
    observe.metric(observe.ROWS, sum(len(r.get("answers") or {}) for r in results))
    observe.metric(observe.INPUT_TOKENS, usage.get("input_tokens", 0))
