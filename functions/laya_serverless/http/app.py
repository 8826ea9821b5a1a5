"""The app factory: the Jev protocol's routes over the deployed deciders (FastAPI, "bigger applications").

Each decision request runs the protocol's order: auth, admission, body (size, time,
JSON), shape and limits, hook refusal, surrogates, `model`, budgets, language hints,
`min_confidence`, then routing and inference under the inference lock. Refusals are
`RequestError`s, answered as `{"detail": ...}` by `statuses`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager, suppress
from typing import Any

from fastapi import FastAPI
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..core.decider import Decider
from ..errors import RequestError, SettingsError
from ..protocol.deployment import Deployment, Reload, Revisions
from ..protocol.detect import analyse
from ..protocol.jobs_port import JobsPort
from ..protocol.routing import Detector, Registry
from ..settings import Settings
from .catalog import router as catalog_router
from .job_routes import router as job_router
from .request_id import RequestIdFilter, RequestIdMiddleware
from .routes import router
from .sagemaker import router as sagemaker_router
from .serving import Serving
from .statuses import handle_framework_error, handle_refusal

_log = logging.getLogger("laya_serverless")


class _RootPath:
    """Sets the ASGI `root_path` (what `uvicorn --root-path` does): OpenAPI `servers` and the docs then
    carry the prefix, and a path that still starts with it is routed too (`/laya/health`)."""

    def __init__(self, app: Any, root_path: str) -> None:
        self.app, self.root_path = app, root_path

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket"):
            scope = dict(scope, root_path=self.root_path)
        await self.app(scope, receive, send)


class _HeadWithoutBody:
    """A HEAD answer carries the GET's status and headers and no body (RFC 9110 9.3.2), whatever carries it: uvicorn
    drops the body itself, a Lambda response built by Mangum would not."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return

        async def bodiless(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.body":
                message = dict(message, body=b"")
            await send(message)

        await self.app(scope, receive, bodiless)


async def _idle_reaper(serve: Serving) -> None:
    interval = max(0.05, min(serve.settings.http.idle_unload_seconds / 4.0, 5.0))
    while True:
        await asyncio.sleep(interval)
        idle = serve.idle_seconds()
        if await serve.unload_if_idle():
            _log.info("idle for %.1fs: unloaded the checkpoints", idle)


def build_app(serve: Serving, jobs: JobsPort | None = None) -> FastAPI:
    """The FastAPI app over one `Serving`. Lambda never runs the lifespan (Mangum's `lifespan="off"`),
    so the idle reaper only runs in a long-lived server, as does a local job engine (`jobs`: the
    `/v1/jobs` routes; their engine opens with the server, resuming unfinished jobs)."""

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        reaper = asyncio.create_task(_idle_reaper(serve)) if serve.settings.http.idle_unload_seconds else None
        if jobs is not None:
            jobs.open()
        try:
            yield
        finally:
            if jobs is not None:
                jobs.close()
            if reaper is not None:
                reaper.cancel()
                with suppress(asyncio.CancelledError):
                    await reaper

    hidden = serve.settings.http.api_key is not None  # with a key, no docs or schema for anyone
    # No trailing-slash redirects: Starlette builds their Location from the Host header (any host a caller names)
    # and, behind API Gateway, without the stage prefix; `/health/` is a 404 like any unknown path.
    app = FastAPI(title="laya-serverless", lifespan=lifespan, docs_url=None if hidden else "/docs",
                  redoc_url=None if hidden else "/redoc", openapi_url=None if hidden else "/openapi.json",
                  redirect_slashes=False)
    app.state.serving = serve
    app.add_exception_handler(RequestError, handle_refusal)
    app.add_exception_handler(StarletteHTTPException, handle_framework_error)
    app.include_router(router)
    app.include_router(catalog_router)
    app.include_router(sagemaker_router)  # /ping + /invocations: the GPU container's contract, everywhere
    if jobs is not None:
        app.state.jobs = jobs
        app.include_router(job_router)
    if serve.settings.http.root_path:
        app.add_middleware(_RootPath, root_path=serve.settings.http.root_path)
    app.add_middleware(_HeadWithoutBody)
    app.add_middleware(RequestIdMiddleware)  # outermost: every answer, refusals and 404s included, carries the id
    if not any(isinstance(f, RequestIdFilter) for f in _log.filters):
        _log.addFilter(RequestIdFilter())
    return app


def create_app(deciders: Mapping[str, Decider], settings: Settings, detect: Detector = analyse,
               registry: Registry | None = None, revisions: Revisions | None = None,
               unavailable: str | None = None, inline_inference: bool = False,
               reload: Reload | None = None,
               target_fallbacks: Mapping[str, Mapping[str, str]] | None = None,
               jobs: JobsPort | None = None) -> FastAPI:
    """The app over the deployed `deciders`; with `unavailable` (why the artifacts could not be loaded)
    every decision route answers 503 with that detail and `/health` reports `ready: false`.

    `inline_inference` runs inference on the event loop instead of a worker thread, for a Lambda
    instance, which only ever holds one event and would pay the thread hop for nothing. With
    `settings.http.idle_unload_seconds`, `reload` brings the checkpoints back after an idle unload.
    `target_fallbacks` (name -> served target and why) is reported by `/health`. `jobs` adds `/v1/jobs`."""
    registry = registry or Registry()
    if settings.http.idle_unload_seconds and reload is None:
        raise SettingsError("idle unload needs a way to reload the checkpoints")
    default_model = settings.deployment.default_model
    deployment = (Deployment(deciders, registry, default_model, revisions, reload, target_fallbacks)
                  if unavailable is None else None)
    return build_app(Serving(settings, deployment, registry, detect, unavailable, inline_inference), jobs)
