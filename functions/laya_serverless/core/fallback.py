"""A session on the GPU whose out-of-memory failures are retried on the CPU, for that request only, and counted.

Upstream's `/health` semantics: `cpu_fallbacks` counts the requests that ran out of GPU memory and
were retried once on the CPU, with the last error's text; the next request starts on the GPU again.
A checkpoint that never reached the GPU is not a fallback: this deployment refuses it at load
(`core.providers`). The retry runs only where the artifact's build gated the same graph on the
CPU provider too; otherwise a GPU out-of-memory error is a 503 to retry later, never an unproven answer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ..errors import DeviceOutOfMemory, InferenceError
from .providers import CPU, ONNXRUNTIME, Placement, ProviderSession, open_session
from .session import RAW_EXPORT, DecisionSession, Feeds, Loading, Threads

_log = logging.getLogger("laya_serverless")
# How onnxruntime's CUDA provider words an allocation failure (BFC arena, cudaMalloc, cuBLAS/cuDNN workspaces).
OOM_MARKERS = ("out of memory", "failed to allocate memory", "cudaerrormemoryallocation", "status_alloc_failed")


def oom_reason(error: BaseException) -> str | None:
    """The error text when `error` (or what it wraps) is a GPU out-of-memory failure, else None."""
    seen: BaseException | None = error
    while seen is not None:
        text = str(seen)
        if any(marker in text.lower() for marker in OOM_MARKERS):
            return text
        seen = seen.__cause__
    return None


@dataclass
class Fallbacks:
    count: int = 0
    last_reason: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"count": self.count, "last_reason": self.last_reason}


@runtime_checkable
class ReportsDevice(Protocol):
    """A session that says where its work runs and how often it fell back (what `/health` reports)."""

    device: str
    fallbacks: Fallbacks


class DeviceSession:
    """Runs on `primary` (a session proven to be on `device`); a GPU out-of-memory error moves the rest of
    that request to a CPU session, made on first need by `cpu`, and is counted once per request."""

    def __init__(self, primary: ProviderSession, device: str,
                 cpu: Callable[[], DecisionSession] | None = None) -> None:
        self.primary, self.device = primary, device
        self.fallbacks = Fallbacks()
        self._make_cpu = cpu
        self._cpu_session: DecisionSession | None = None
        self._request_on_cpu = False
        self._in_request = False

    @contextmanager
    def request(self) -> Iterator[None]:
        """One request's passes: after an out-of-memory error, its remaining passes run on the CPU too."""
        outer = not self._in_request
        self._in_request = True
        try:
            yield
        finally:
            if outer:
                self._in_request, self._request_on_cpu = False, False

    def _cpu_run(self, feeds: Feeds) -> tuple[np.ndarray, np.ndarray]:
        if self._cpu_session is None:
            assert self._make_cpu is not None
            self._cpu_session = self._make_cpu()
        return self._cpu_session.run(feeds)

    def run(self, feeds: Feeds) -> tuple[np.ndarray, np.ndarray]:
        if self._request_on_cpu:
            return self._cpu_run(feeds)
        try:
            return self.primary.run(feeds)
        except InferenceError as exc:
            reason = oom_reason(exc)
            if reason is None:
                raise
            if self._make_cpu is None:
                raise DeviceOutOfMemory("the GPU is out of memory; try again later") from exc
        self.fallbacks.count += 1
        self.fallbacks.last_reason = reason
        _log.warning("GPU out of memory; retrying this request on the CPU (%d so far): %s",
                     self.fallbacks.count, reason)
        self._request_on_cpu = self._in_request
        return self._cpu_run(feeds)


def open_decision_session(graph: Path, device: str, *, threads: Threads = None, loading: Loading = RAW_EXPORT,
                          cpu_retry: bool = False, placement: Placement = ONNXRUNTIME) -> DecisionSession:
    """The session a decider runs: a plain CPU session, or a `DeviceSession` on the GPU (with a CPU retry when
    `cpu_retry`, which the caller grants only where the artifact's gate proved the graph on the CPU)."""
    if device == CPU:
        return open_session(graph, device, threads=threads, loading=loading, placement=placement)
    # a GPU session may reopen its graph on the CPU later (the retry): nothing is freed after the first parse, and
    # the graph goes in as stored (the provider copies the weights to the device anyway)
    loading = replace(loading, after_parse=None, restore=False)
    primary = open_session(graph, device, threads=threads, loading=loading, placement=placement)

    def cpu() -> DecisionSession:
        return open_session(graph, CPU, threads=threads, loading=loading, placement=placement)

    return DeviceSession(primary, device, cpu if cpu_retry else None)


def device_of(session: DecisionSession) -> str:
    """Where `session` computes: a `DeviceSession` says; any other session is a CPU one."""
    return session.device if isinstance(session, ReportsDevice) else CPU


def fallbacks_of(session: DecisionSession) -> dict[str, Any]:
    return session.fallbacks.as_dict() if isinstance(session, ReportsDevice) else Fallbacks().as_dict()


@contextmanager
def request_scope(session: DecisionSession) -> Iterator[None]:
    """Group one request's session runs (see `DeviceSession.request`); a no-op for any other session."""
    if isinstance(session, DeviceSession):
        with session.request():
            yield
    else:
        yield
