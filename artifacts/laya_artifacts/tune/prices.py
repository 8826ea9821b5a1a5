"""What a decision costs on Lambda: a dated price table (shipped, or the user's file) and the arithmetic on it.

Lambda bills each request a fixed fee plus its duration, rounded up to the billing granularity, times the
memory in GB (MB / 1024) times the architecture's price per GB-second. Cost per 1M decisions divides that by
the decisions a request carries (questions x states), so packing questions into one request shows up here.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from laya_artifacts.errors import PriceError

DEFAULT_PRICES = Path(__file__).resolve().parent / "tune_data" / "prices.json"
ARCHES = ("x86_64", "arm64")
MEASURED_ARCH = "x86_64"   # the only architecture this command can time here


@dataclass(frozen=True)
class Prices:
    date: str
    source: str
    request_usd_per_million: float
    gb_second_usd: dict[str, float]
    billing_granularity_ms: float = 1.0
    arm64_time_factor: float = 1.0
    arm64_time_basis: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path | None = None, arm64_time_factor: float | None = None) -> Prices:
        """The shipped table (`tune_data/prices.json`), or `path`; `arm64_time_factor` overrides the file's."""
        source = path or DEFAULT_PRICES
        try:
            raw = json.loads(Path(source).read_text())
        except (OSError, ValueError) as exc:
            raise PriceError("price file %s cannot be read: %s" % (source, exc)) from None
        if not isinstance(raw, dict):
            raise PriceError("price file %s must hold a JSON object" % source)
        for key in ("date", "request_usd_per_million", "gb_second_usd"):
            if key not in raw:
                raise PriceError("price file %s has no %r" % (source, key))
        per_gb = raw["gb_second_usd"]
        if not isinstance(per_gb, dict) or not per_gb or not all(
                isinstance(v, int | float) and v > 0 for v in per_gb.values()):
            raise PriceError("price file %s: 'gb_second_usd' must map architectures to positive prices" % source)
        factor = raw.get("arm64_time_factor", 1.0) if arm64_time_factor is None else arm64_time_factor
        if not isinstance(factor, int | float) or not factor > 0:
            raise PriceError("the arm64 time factor must be a positive number, got %r" % factor)
        basis = str(raw.get("arm64_time_basis", ""))
        if arm64_time_factor is not None:
            basis = "given on the command line (--arm64-time-factor %g): arm64 time = x86_64 time x %g" % (
                factor, factor)
        known = {"date", "source", "request_usd_per_million", "gb_second_usd", "billing_granularity_ms",
                 "arm64_time_factor", "arm64_time_basis", "currency"}
        return cls(date=str(raw["date"]), source=str(raw.get("source", source)),
                   request_usd_per_million=float(raw["request_usd_per_million"]),
                   gb_second_usd={str(k): float(v) for k, v in per_gb.items()},
                   billing_granularity_ms=float(raw.get("billing_granularity_ms", 1.0)),
                   arm64_time_factor=float(factor), arm64_time_basis=basis,
                   extra={k: v for k, v in raw.items() if k not in known})

    def time_factor(self, arch: str) -> float:
        """How the measured (x86_64) time is scaled for `arch`: 1 for the measured one."""
        return 1.0 if arch == MEASURED_ARCH else self.arm64_time_factor

    def billed_ms(self, duration_ms: float) -> float:
        step = self.billing_granularity_ms
        return math.ceil(duration_ms / step - 1e-9) * step

    def request_usd(self, duration_ms: float, memory_mb: int, arch: str) -> float:
        """One request's bill: the request fee plus its billed duration at `memory_mb` on `arch`."""
        if arch not in self.gb_second_usd:
            raise PriceError("the price table (%s) has no GB-second price for %r" % (self.date, arch))
        gb_seconds = self.billed_ms(duration_ms) / 1000 * memory_mb / 1024
        return self.request_usd_per_million / 1e6 + gb_seconds * self.gb_second_usd[arch]

    def per_million_decisions(self, durations_ms: Sequence[float], decisions: Sequence[int], memory_mb: int,
                              arch: str) -> float:
        """USD per 1M decisions over requests that took `durations_ms` (measured on x86_64) and carried
        `decisions` each; another architecture's durations are the measured ones times its factor."""
        if not durations_ms or len(durations_ms) != len(decisions) or sum(decisions) <= 0:
            raise PriceError("need one decision count per timed request, and at least one decision")
        factor = self.time_factor(arch)
        total = sum(self.request_usd(ms * factor, memory_mb, arch) for ms in durations_ms)
        return total / sum(decisions) * 1e6

    def describe(self) -> dict[str, Any]:
        return {"date": self.date, "source": self.source, "request_usd_per_million": self.request_usd_per_million,
                "gb_second_usd": dict(self.gb_second_usd), "billing_granularity_ms": self.billing_granularity_ms,
                "arm64_time_factor": self.arm64_time_factor, "arm64_time_basis": self.arm64_time_basis}
