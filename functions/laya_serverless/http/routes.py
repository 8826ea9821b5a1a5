"""The protocol's routes: `GET /health`, `POST /v1/systemone`, `POST /v1/systemone/batch`."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Request
from fastapi.responses import JSONResponse

from ..protocol import strict
from ..protocol.decisions import answer_batch, answer_one, batch_controls, batch_response, shaped, systemone_controls
from ..protocol.plan import check_sync_budget
from . import openapi_bodies, telemetry
from .devices import device_report, preference_report
from .serving import Serving, serving

router = APIRouter()
ServingDep = Annotated[Serving, Depends(serving)]
Authorization = Annotated[str | None, Header()]


def _timed(content: Any, elapsed_ms: float) -> JSONResponse:
    telemetry.answered(content, elapsed_ms)
    stamp = "%.2f" % elapsed_ms
    return JSONResponse(content, headers={"Server-Timing": "inference;dur=" + stamp, "X-Inference-Time-Ms": stamp})


@router.get("/health")
def health(serve: ServingDep, authorization: Authorization = None) -> dict[str, Any]:
    """Liveness for anyone; the resident checkpoints for a valid bearer (or when no key is set)."""
    if not serve.authorized(authorization):
        return {"status": "ok"}
    device = serve.settings.deployment.device
    if serve.deployment is None:
        return {"status": "ok", "ready": False, "detail": serve.unavailable, **preference_report(device)}
    names = list(serve.deployment.deciders)
    report: dict[str, Any] = {
        "status": "ok", "loaded": names, "revisions": serve.deployment.resident_revisions(),
        **device_report(serve.deployment, device)}
    if serve.deployment.target_fallbacks:  # an extension: upstream has no targets to fall back between
        report["target_fallbacks"] = serve.deployment.target_fallbacks
    if serve.settings.http.idle_unload_seconds:
        report["idle_unload_seconds"] = float(serve.settings.http.idle_unload_seconds)
        report["idle_seconds"] = round(serve.idle_seconds(), 1)
    return report


# HEAD: the same status and headers, no body (RFC 9110 9.3.2; `app._HeadWithoutBody`); one documented operation.
router.add_api_route("/health", health, methods=["HEAD"], include_in_schema=False)


@router.post("/v1/systemone", openapi_extra=openapi_bodies.SYSTEMONE)
async def systemone(request: Request, serve: ServingDep, authorization: Authorization = None) -> JSONResponse:
    """One state, many questions."""
    protocol = serve.settings.protocol
    async with serve.received(request, authorization) as (deployment, body):
        body = strict.prepared(body) if protocol.jev_strict else body
        controls = systemone_controls(body, serve.registry, protocol, serve.settings.limits)
        result, elapsed = await serve.infer(controls.model, lambda: answer_one(
            deployment, serve.detect, protocol, body, controls))
        return _timed(shaped(result, protocol.jev_strict, protocol.jev_confidence), elapsed)


@router.post("/v1/systemone/batch", openapi_extra=openapi_bodies.BATCH)
async def systemone_batch(request: Request, serve: ServingDep,
                          authorization: Authorization = None) -> JSONResponse:
    """Many states, one shared question set."""
    protocol = serve.settings.protocol
    async with serve.received(request, authorization) as (deployment, body):
        body = strict.prepared(body) if protocol.jev_strict else body
        batch = batch_controls(body, serve.registry, protocol, serve.settings.limits)
        check_sync_budget(body["states"], body["questions"], batch.controls.max_len, batch.controls.head_max_len,
                          serve.settings.limits)  # off unless the deployment sets a budget (Lambda: 413 -> /v1/jobs)
        results, elapsed = await serve.infer(batch.controls.model, lambda: answer_batch(
            deployment, serve.detect, protocol, body, batch))
        return _timed(batch_response(results, protocol.jev_strict, protocol.jev_confidence), elapsed)
