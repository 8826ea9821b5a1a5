"""The Jev wire protocol over HTTP (FastAPI): `GET /health`, `POST /v1/systemone`, `POST /v1/systemone/batch`.

Each decision request runs the protocol's order (§3.2, §4.2): auth, admission, body (size, time,
JSON), shape and limits, hook refusal, surrogates, `model`, budgets, language hints,
`min_confidence`, then routing and inference behind one gate. Refusals are `RequestError`s and
caller mistakes found during inference are `ValueError`s (422); both map to `{"detail": ...}` here.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager, suppress
from typing import Any

from fastapi import FastAPI, Header, Request
from fastapi.responses import JSONResponse

from . import limits
from .decider import Decider
from .detect import analyse
from .encoding import decode_body
from .errors import RequestError
from .jev import strict_projection, with_jev_confidence
from .routing import Detector, Registry, resolve_model_field, route
from .settings import Settings
from .tournament import plan, predict_with_tournament

_log = logging.getLogger("laya_serverless")
_SURROGATE_DETAIL = "request body contains an unpaired surrogate escape; those cannot be encoded as UTF-8"


class _Deployment:
    """The deployed deciders (LRU order, least recently used first), how a route decision lands on
    one of them, and how they are reloaded after an idle unload."""

    def __init__(self, deciders: Mapping[str, Decider], registry: Registry, default: str,
                 revisions: Mapping[str, str | None] | None,
                 reload: Callable[[], tuple[Mapping[str, Decider], Mapping[str, str | None]]] | None) -> None:
        self.names = list(deciders)
        self.deciders, self.revisions = dict(deciders), dict(revisions or {})
        self.registry, self.reload = registry, reload
        self.default = registry.resolve(default)
        if self.default not in self.deciders:
            raise ValueError("the default checkpoint %r is not deployed (deployed: %s)"
                             % (self.default, sorted(self.deciders)))

    def unload(self) -> bool:
        if not self.deciders:
            return False
        self.deciders, self.revisions = {}, {}
        return True

    def _resident(self) -> None:
        if not self.deciders:  # unloaded while idle: the next request pays the (verified) load
            assert self.reload is not None
            deciders, revisions = self.reload()
            self.deciders, self.revisions = dict(deciders), dict(revisions)

    def decide(self, state: Any, questions: Any, detect: Detector, model: str | None,
               controls: dict[str, Any], auto_task: bool) -> tuple[Decider, dict[str, Any]]:
        decision = route(self.registry, state, questions, detect, model=model, task=controls.get("task"),
                         lang=controls.get("lang"), lang_guess=controls.get("lang_guess"), auto_task=auto_task)
        key = decision["model"]
        if key not in self.names:
            if model is not None or controls.get("task") is not None:
                raise ValueError("checkpoint %r is not deployed here; deployed: %s" % (key, sorted(self.names)))
            # Detection and hints never pick an absent checkpoint: the default answers, and says so.
            decision = dict(decision, model=self.default, repo=self.registry.sources[self.default],
                            reason="%s; %r is not deployed, so the default %r answers"
                            % (decision["reason"], key, self.default))
        self._resident()
        decider = self.deciders.pop(decision["model"])
        self.deciders[decision["model"]] = decider  # most recently used last
        return decider, decision


class _RootPath:
    """Sets the ASGI `root_path` (what `uvicorn --root-path` does): OpenAPI `servers` and the docs then
    carry the prefix, and a path that still starts with it is routed too (`/laya/health`)."""

    def __init__(self, app: Any, root_path: str) -> None:
        self.app, self.root_path = app, root_path

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket"):
            scope = dict(scope, root_path=self.root_path)
        await self.app(scope, receive, send)


def create_app(deciders: Mapping[str, Decider], settings: Settings, detect: Detector = analyse,
               registry: Registry | None = None, revisions: Mapping[str, str | None] | None = None,
               unavailable: str | None = None, inline_inference: bool = False,
               reload: Callable[[], tuple[Mapping[str, Decider], Mapping[str, str | None]]] | None = None) -> FastAPI:
    """The app over the deployed `deciders`; with `unavailable` (why the artifacts could not be loaded)
    every decision route answers 503 with that detail and `/health` reports `ready: false`.

    Inference runs on a worker thread so a long-running server keeps answering `/health` and
    refusing over-admission meanwhile; `inline_inference` runs it on the event loop instead, for
    a Lambda instance, which only ever holds one event and would pay the thread hop for nothing.

    With `settings.idle_unload_seconds` (a long-running server; Lambda runs no lifespan), a
    background task unloads every checkpoint once no decision request arrived and no inference
    finished for that long; `reload` brings them back on the next request."""
    registry = registry or Registry()
    if settings.idle_unload_seconds and reload is None:
        raise ValueError("idle unload needs a way to reload the checkpoints")
    deployment = (_Deployment(deciders, registry, settings.default_model, revisions, reload)
                  if unavailable is None else None)
    clock = {"last": time.monotonic()}

    def touch() -> None:
        clock["last"] = time.monotonic()

    async def idle_reaper() -> None:
        interval = max(0.05, min(settings.idle_unload_seconds / 4.0, 5.0))
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(interval)
            if state["gate"] is not None and state["gate"].locked():
                continue
            if time.monotonic() - clock["last"] >= settings.idle_unload_seconds and deployment is not None:
                if await loop.run_in_executor(pool, deployment.unload):
                    _log.info("idle for %.1fs: unloaded the checkpoints", time.monotonic() - clock["last"])

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> Any:
        reaper = asyncio.create_task(idle_reaper()) if settings.idle_unload_seconds else None
        try:
            yield
        finally:
            if reaper is not None:
                reaper.cancel()
                with suppress(asyncio.CancelledError):
                    await reaper
    hidden = settings.api_key is not None
    app = FastAPI(title="laya-serverless", lifespan=lifespan, docs_url=None if hidden else "/docs",
                  redoc_url=None if hidden else "/redoc", openapi_url=None if hidden else "/openapi.json")
    if settings.root_path:
        app.add_middleware(_RootPath, root_path=settings.root_path)
    expected = ("Bearer %s" % settings.api_key).encode("utf-8", "surrogateescape") if hidden else b""
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="laya-infer")
    choice_cap = limits.MAX_TOURNAMENT_CHOICE_OPTIONS if settings.tournament_group else limits.MAX_CHOICE_OPTIONS
    state: dict[str, Any] = {"gate": None, "admission": None}

    def authorized(header: str | None) -> bool:
        return not hidden or hmac.compare_digest((header or "").encode("utf-8", "surrogateescape"), expected)

    @app.exception_handler(RequestError)
    async def _refused(_request: Request, exc: RequestError) -> JSONResponse:
        headers = {"Retry-After": "1"} if exc.status == 503 else None
        return JSONResponse({"detail": exc.detail}, status_code=exc.status, headers=headers)

    async def read_json(request: Request) -> Any:
        declared = request.headers.get("content-length")
        if declared and declared.strip().isdigit() and int(declared) > limits.MAX_BODY_BYTES:
            raise RequestError(413, "request body too large")

        async def collect() -> bytes:
            chunks, total = [], 0
            async for chunk in request.stream():
                total += len(chunk)
                if total > limits.MAX_BODY_BYTES:
                    raise RequestError(413, "request body too large")
                chunks.append(chunk)
            return b"".join(chunks)

        try:
            raw = await asyncio.wait_for(collect(), timeout=settings.body_read_timeout)
        except TimeoutError:
            raise RequestError(408, "request body was not received in time") from None
        raw = decode_body(raw, request.headers.get("content-encoding"))
        try:
            return json.loads(raw)
        except (ValueError, RecursionError):
            raise RequestError(400, "request body must be valid JSON") from None

    def controls_of(body: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
        """Steps 9-13 of §3.2, shared by both routes (after their shape, limit and hook checks)."""
        if limits.has_lone_surrogate(body):
            raise RequestError(400, _SURROGATE_DETAIL)
        model = resolve_model_field(body.get("model"), registry)
        controls: dict[str, Any] = {
            "max_len": limits.budget_param(body, "max_len", settings.max_token_budget),
            "head_max_len": limits.budget_param(body, "head_max_len", settings.max_token_budget),
            "task": body.get("task"),
            "lang": limits.language_param(body, "lang"),
            "lang_guess": limits.language_param(body, "lang_guess"),
            "min_confidence": limits.min_confidence_param(body),
        }
        return model, controls

    async def infer(model: str | None, run: Callable[[], Any]) -> tuple[Any, float]:
        if state["gate"] is None:
            state["gate"] = asyncio.Lock()
        async with state["gate"]:
            started = time.perf_counter()
            try:
                result = run() if inline_inference else await asyncio.get_running_loop().run_in_executor(pool, run)
            except RequestError:
                raise
            except ValueError as exc:
                raise RequestError(422, str(exc)) from None
            except Exception:  # never leak paths, weights or tracebacks to a client
                _log.exception("inference failed for model=%s", str(model).replace("\n", "\\n").replace("\r", "\\r"))
                raise RequestError(500, "inference failed") from None
            finally:
                touch()
            return result, (time.perf_counter() - started) * 1000.0

    def shaped(result: dict[str, Any]) -> dict[str, Any]:
        return strict_projection(result) if settings.jev_strict else with_jev_confidence(result)

    def timed(content: Any, elapsed_ms: float) -> JSONResponse:
        stamp = "%.2f" % elapsed_ms
        return JSONResponse(content, headers={"Server-Timing": "inference;dur=" + stamp, "X-Inference-Time-Ms": stamp})

    async def admitted(request: Request, authorization: str | None, handle: Callable[[Request], Any]) -> Any:
        if not authorized(authorization):
            raise RequestError(401, "invalid or missing bearer token")
        if unavailable is not None:
            raise RequestError(503, unavailable)
        if state["admission"] is None:
            state["admission"] = asyncio.Semaphore(settings.max_concurrent)
        if state["admission"].locked():
            raise RequestError(503, "server busy, try again later")
        async with state["admission"]:
            return await handle(request)

    def predict_state(state: Any, questions: dict[str, Any], model: str | None,
                      controls: dict[str, Any]) -> dict[str, Any]:
        assert deployment is not None  # admitted() refuses every request while unavailable
        decider, decision = deployment.decide(state, questions, detect, model, controls, settings.auto_task)
        result = decider.predict(state, questions, max_len=controls["max_len"],
                                 head_max_len=controls["head_max_len"], min_confidence=controls["min_confidence"])
        return {**result, "routing": decision}

    def predict_one(body: dict[str, Any], model: str | None, controls: dict[str, Any]) -> dict[str, Any]:
        if settings.tournament_group:
            return predict_with_tournament(lambda qs: predict_state(body["state"], qs, model, controls),
                                           body["questions"], settings.tournament_group)
        return predict_state(body["state"], body["questions"], model, controls)

    async def systemone_body(request: Request) -> JSONResponse:
        body = await read_json(request)
        if not isinstance(body, dict) or "questions" not in body:
            raise RequestError(400, "request body must be an object with a 'questions' field")
        limits.check_request_limits(body.get("state"), body["questions"], choice_cap)
        limits.refuse_hooks(body)
        model, controls = controls_of(body)
        result, elapsed = await infer(model, lambda: predict_one(body, model, controls))
        return timed(shaped(result), elapsed)

    def predict_many(body: dict[str, Any], model: str | None, controls: dict[str, Any],
                     batch_size: int | None, sort_by_length: bool) -> list[dict[str, Any]]:
        assert deployment is not None
        states, questions = body["states"], body["questions"]
        if settings.tournament_group and plan(questions, settings.tournament_group) is not None:
            # Narrowing is per state: each state is answered on its own (batch_size has no effect).
            return [predict_with_tournament(lambda qs, s=s: predict_state(s, qs, model, controls), questions,
                                            settings.tournament_group) for s in states]
        groups: dict[str, list[int]] = {}
        decisions = []
        for i, one in enumerate(states):
            decider, decision = deployment.decide(one, questions, detect, model, controls, settings.auto_task)
            decisions.append(decision)
            groups.setdefault(decision["model"], []).append(i)
        results: list[dict[str, Any]] = [{}] * len(states)
        for key, indices in groups.items():
            answered = deployment.deciders[key].predict_batch(
                [states[i] for i in indices], questions, batch_size, max_len=controls["max_len"],
                head_max_len=controls["head_max_len"], min_confidence=controls["min_confidence"],
                sort_by_length=sort_by_length)
            for i, result in zip(indices, answered, strict=True):
                results[i] = {**result, "routing": decisions[i]}
        return results

    async def batch_body(request: Request) -> JSONResponse:
        body = await read_json(request)
        if not isinstance(body, dict) or "questions" not in body or "states" not in body:
            raise RequestError(400, "request body must be an object with 'states' and 'questions' fields")
        limits.check_batch_limits(body["states"], body["questions"], choice_cap)
        limits.refuse_hooks(body)
        limits.refuse_out_parameters(body)
        model, controls = controls_of(body)
        caller = limits.batch_size_param(body)
        sort_by_length = bool(limits.sort_by_length_param(body))
        planned = limits.planned_batch_size(len(body["states"]), len(body["questions"]), body.get("max_len"),
                                            settings.max_batch_tokens)
        batch_size = limits.effective_batch_size(caller, planned)
        results, elapsed = await infer(model, lambda: predict_many(body, model, controls, batch_size, sort_by_length))
        total = {"input_tokens": sum(r["usage"]["input_tokens"] for r in results),
                 "output_tokens": sum(r["usage"]["output_tokens"] for r in results)}
        return timed({"results": [shaped(r) for r in results], "total_usage": total}, elapsed)

    @app.get("/health")
    def health(authorization: str | None = Header(default=None)) -> dict[str, Any]:
        if not authorized(authorization):
            return {"status": "ok"}
        if deployment is None:
            return {"status": "ok", "ready": False, "detail": unavailable}
        names = list(deployment.deciders)
        revisions_now = {n: deployment.revisions.get(n) for n in deployment.names if n in names}  # load order
        report: dict[str, Any] = {
            "status": "ok", "loaded": names, "revisions": revisions_now,
            "device": "cpu", "device_is_preference": not names, "checkpoint_devices": {n: "cpu" for n in names},
            "cpu_fallbacks": {n: {"count": 0, "last_reason": None} for n in names}}
        if settings.idle_unload_seconds:
            report["idle_unload_seconds"] = float(settings.idle_unload_seconds)
            report["idle_seconds"] = round(time.monotonic() - clock["last"], 1)
        return report

    @app.post("/v1/systemone")
    async def systemone(request: Request, authorization: str | None = Header(default=None)) -> Any:
        return await admitted(request, authorization, systemone_body)

    @app.post("/v1/systemone/batch")
    async def systemone_batch(request: Request, authorization: str | None = Header(default=None)) -> Any:
        return await admitted(request, authorization, batch_body)

    return app
