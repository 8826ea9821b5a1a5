"""What an int8 search says of its choice, in the words a user reads."""

from __future__ import annotations

from collections.abc import Sequence

# A timed candidate as the verdict reads it: (name, median ms per pass).
Timed = tuple[str, float]


def verdict(chosen: Timed | None, passing: Sequence[Timed], fp32_ms: float, min_speedup: float | None,
            noise: float, too_slow: Sequence[str] = (), timed: Sequence[Timed] = ()) -> str:
    """The verdict in the words a user reads: gate failed, or passed but not faster (with the figures), or chosen.
    `passing`: the timed candidates that passed selection; `too_slow`: those not gated for speed."""
    if chosen is not None:
        return "fastest of the candidates that passed selection (%s): %.1f ms, x%.3f vs fp32 (noise +-%.3f)" % (
            ", ".join(name for name, _ms in passing), chosen[1], fp32_ms / chosen[1], noise)
    if not passing and too_slow and len(too_slow) == len(timed):   # nothing was gated: speed alone refused
        name, ms = min(timed, key=lambda t: t[1])
        return "not faster than FP32: no candidate reached x%g (fastest %s x%.3f, this run's FP32 timing noise " \
               "+-%.3f); none was gated" % (min_speedup or 0, name, fp32_ms / ms, noise)
    if not passing:
        return "gate failed: no candidate passed selection%s" % (
            "; %s not gated: below x%g vs fp32 on this machine" % (", ".join(too_slow), min_speedup or 0)
            if too_slow else "")
    best, best_ms = min(passing, key=lambda t: t[1])
    speedup, rule = fp32_ms / best_ms, min_speedup or 0
    return "gate passed (%s), but not faster than FP32: %s x%.3f %s x%.2f (this run's FP32 timing noise +-%.3f)" % (
        ", ".join(name for name, _ms in passing), best, speedup,
        "<" if speedup < rule else "is within the noise of", rule, noise)
