"""What every route depends on: settings, the deployment, auth, admission, the inference lock, the idle clock.

One `Serving` per app, injected into the routes with `Depends(serving)`; tests override it or
build it around fake deciders. A decision body is read before admission, under the reading gate
(`admission`), so slow senders never hold a slot. Admission refuses at once when every slot is
taken (503); the inference lock queues: exactly one routing + forward + decode runs at a time, on
a worker thread (or inline, on Lambda, which holds one event per instance).
"""

from __future__ import annotations

import asyncio
import hmac
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any, TypeVar

from fastapi import Request

from .. import observe
from ..errors import NotReady, Overloaded, Unauthenticated
from ..protocol.deployment import Deployment
from ..protocol.refusals import refusal_from
from ..protocol.routing import Detector, Registry
from ..settings import Settings
from .admission import BUSY, READERS_PER_SLOT, ReadingGate
from .body import read_json

T = TypeVar("T")
# RFC 9110 §5.5: a field value has no leading or trailing whitespace. uvicorn (h11) already drops it,
# API Gateway events do not, so the app trims it itself and both paths agree.
_OWS = " \t"


class Serving:
    def __init__(self, settings: Settings, deployment: Deployment | None, registry: Registry, detect: Detector,
                 unavailable: str | None = None, inline_inference: bool = False) -> None:
        if deployment is None and unavailable is None:
            raise ValueError("a Serving without a deployment needs the reason it is unavailable")
        self.settings, self.deployment, self.registry, self.detect = settings, deployment, registry, detect
        self.unavailable, self.inline_inference = unavailable, inline_inference
        self._expected = (b"Bearer " + settings.http.api_key.encode("utf-8", "surrogateescape")
                          if settings.http.api_key is not None else None)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="laya-infer")
        # Created on first use, inside the event loop that serves (Mangum and uvicorn each bring theirs).
        self._admission: asyncio.Semaphore | None = None
        self._inference_lock: asyncio.Lock | None = None
        self.last_activity = time.monotonic()
        limits = settings.limits
        self.reading_gate = ReadingGate(limits.max_concurrent * READERS_PER_SLOT, limits.max_reads_per_client,
                                        slots=limits.max_concurrent)

    def authorized(self, header: str | None) -> bool:
        """Exactly `Bearer <key>`, compared in constant time over bytes (any header value is a 401, never a 500)."""
        if self._expected is None:
            return True
        supplied = (header or "").strip(_OWS).encode("utf-8", "surrogateescape")
        return hmac.compare_digest(supplied, self._expected)

    def rekey(self, api_key: str) -> None:
        """Check bearers against `api_key` from now on (a SnapStart restore re-reads the secret)."""
        self.settings = replace(self.settings, http=replace(self.settings.http, api_key=api_key))
        self._expected = b"Bearer " + api_key.encode("utf-8", "surrogateescape")

    def withdraw(self, why: str) -> None:
        """Stop serving the deployment: decision routes answer 503 with `why`, `/health` says not ready."""
        self.deployment, self.unavailable = None, why

    def touch(self) -> None:
        self.last_activity = time.monotonic()

    def idle_seconds(self) -> float:
        return time.monotonic() - self.last_activity

    @property
    def inferring(self) -> bool:
        return self._inference_lock is not None and self._inference_lock.locked()

    def ready(self, authorization: str | None) -> Deployment:
        """Auth, then readiness: the deployment a request may use (each request checks this once)."""
        if not self.authorized(authorization):
            raise Unauthenticated("invalid or missing bearer token")
        if self.deployment is None:
            raise NotReady(self.unavailable or "not ready")
        return self.deployment

    @asynccontextmanager
    async def _slot(self, deployment: Deployment) -> AsyncIterator[Deployment]:
        """An admission slot held until the response is produced; a full house is refused at once."""
        if self._admission is None:
            self._admission = asyncio.Semaphore(self.settings.limits.max_concurrent)
        if self._admission.locked():
            raise Overloaded(BUSY)
        async with self._admission:
            self.touch()
            yield deployment

    @asynccontextmanager
    async def admitted(self, authorization: str | None) -> AsyncIterator[Deployment]:
        """Auth, readiness, then an admission slot held until the response is produced."""
        async with self._slot(self.ready(authorization)) as deployment:
            yield deployment

    @asynccontextmanager
    async def received(self, request: Request, authorization: str | None) -> AsyncIterator[tuple[Deployment, Any]]:
        """Auth and readiness, the body read under the reading gate, then an admission slot; yields the body's JSON."""
        deployment = self.ready(authorization)
        self.touch()
        with self.reading_gate.reading_for(request.client.host if request.client else "-"):
            body = await read_json(request, self.settings.limits.body_read_timeout)
        async with self._slot(deployment) as admitted:
            yield admitted, body

    async def infer(self, model: Any, work: Callable[[], T]) -> tuple[T, float]:
        """Run `work` under the inference lock; (its result, elapsed ms from lock acquired to worker returned)."""
        if self._inference_lock is None:
            self._inference_lock = asyncio.Lock()
        async with self._inference_lock:
            started = time.perf_counter()
            try:
                with observe.span(observe.INFERENCE):
                    if self.inline_inference:
                        result = work()
                    else:
                        result = await asyncio.get_running_loop().run_in_executor(self._pool, work)
            except Exception as exc:  # never leak paths, weights or tracebacks to a client
                raise refusal_from(exc, model) from None
            finally:
                self.touch()
            return result, (time.perf_counter() - started) * 1000.0

    async def unload_if_idle(self) -> bool:
        """Unload every checkpoint (on the inference worker) once idle for the configured window."""
        window = self.settings.http.idle_unload_seconds
        if self.deployment is None or self.inferring or not window or self.idle_seconds() < window:
            return False
        return await asyncio.get_running_loop().run_in_executor(self._pool, self.deployment.unload)


def serving(request: Request) -> Serving:
    """The dependency every route takes; `app.dependency_overrides[serving]` swaps it in tests."""
    found: Serving = request.app.state.serving
    return found
