"""Observability seams: named spans and metrics, no-ops until an entry point installs a backend.

The runtime calls `span("fetch")` and `metric(INFERENCE_MS, ms)` wherever the work happens; only
the Lambda entry point installs a backend (Powertools: X-Ray subsegments, EMF metrics, see
`powertools`). Locally nothing is installed, so tracing and metrics cost nothing and print
nothing. No third-party import here: the runtime must not need Powertools to run.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

# Metric names (the CloudWatch namespace is the stack's, infra/laya_infra/constants.py).
INFERENCE_MS = "InferenceMs"
ROWS = "Rows"  # question rows decided (states x questions)
INPUT_TOKENS = "InputTokens"
REFUSED_ARTIFACTS = "RefusedArtifacts"  # refused at load (missing, failed verification, unproven int8)
CLASS_SWITCHES = "ClassSwitches"  # artifacts chosen again after a restore on another CPU class (assembly/reclass)
ADMISSION_REFUSALS = "AdmissionRefusals"  # 503 server busy: reading gate or admission full
UNSUPPORTED_EVENTS = "UnsupportedEvents"
HTTP_EVENTS = "HttpEvents"
COLD_STARTS = "ColdStarts"
# Span names: the X-Ray subsegments of a cold start and of a request.
FETCH, VERIFY, SESSION, INFERENCE, WARM = "fetch", "verify", "session", "inference", "warm"
UNITS = {INFERENCE_MS: "Milliseconds"}


class Backend(Protocol):
    def span(self, name: str, started: float, ended: float, failed: bool) -> None: ...

    def metric(self, name: str, value: float, unit: str) -> None: ...


class _Nothing:
    def span(self, name: str, started: float, ended: float, failed: bool) -> None:
        return None

    def metric(self, name: str, value: float, unit: str) -> None:
        return None


_backend: Backend = _Nothing()


def install(backend: Backend | None) -> None:
    """Send spans and metrics to `backend` from now on (None: back to no-ops)."""
    global _backend
    _backend = backend if backend is not None else _Nothing()


@contextmanager
def span(name: str) -> Iterator[None]:
    """Time a phase (wall clock, epoch seconds) and hand it to the backend when it ends."""
    started, failed = time.time(), False
    try:
        yield
    except BaseException:
        failed = True
        raise
    finally:
        _backend.span(name, started, time.time(), failed)


def metric(name: str, value: float = 1.0) -> None:
    _backend.metric(name, float(value), UNITS.get(name, "Count"))
