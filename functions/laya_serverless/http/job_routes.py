"""The jobs routes: `POST /v1/jobs`, `GET /v1/jobs/{id}`, `GET /v1/jobs/{id}/results` (docs/jobs.md).

Submitting takes the decision routes' auth, admission and body limits; reading a job takes the bearer.
Store work runs on a thread (submitting may read a large input and write many shards).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Request
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.concurrency import run_in_threadpool

from ..errors import Unauthenticated
from ..protocol.jobs_port import JobsPort
from . import openapi_bodies
from .serving import Serving, serving

router = APIRouter()
ServingDep = Annotated[Serving, Depends(serving)]
Authorization = Annotated[str | None, Header()]
NDJSON = "application/x-ndjson"


def job_service(request: Request) -> JobsPort:
    """The dependency of the jobs routes; `app.dependency_overrides[job_service]` swaps it in tests."""
    found: JobsPort = request.app.state.jobs
    return found


JobsDep = Annotated[JobsPort, Depends(job_service)]


def _bearer(serve: Serving, authorization: str | None) -> None:
    if not serve.authorized(authorization):
        raise Unauthenticated("invalid or missing bearer token")


@router.post("/v1/jobs", status_code=202, openapi_extra=openapi_bodies.JOB)
async def submit_job(request: Request, serve: ServingDep, jobs: JobsDep, authorization: Authorization = None,
                     idempotency_key: Annotated[str | None, Header()] = None) -> JSONResponse:
    """Many states (inline, or a JSONL file in the store), one question set: answered in shards, in the background."""
    # The body is read before an admission slot is taken, under the per-client reading limit, as on the
    # decision routes: a slow sender holds a reading place of its own address, never a slot.
    async with serve.received(request, authorization) as (deployment, body):
        accepted = await run_in_threadpool(jobs.submit, body, serve.registry, list(deployment.names), None,
                                           idempotency_key, deployment.deciders)
        return JSONResponse(accepted, status_code=202)


@router.get("/v1/jobs/{job_id}")
async def job_status(job_id: str, serve: ServingDep, jobs: JobsDep,
                     authorization: Authorization = None) -> dict[str, Any]:
    _bearer(serve, authorization)
    return await run_in_threadpool(jobs.status, job_id)


@router.get("/v1/jobs/{job_id}/results")
async def job_results(job_id: str, serve: ServingDep, jobs: JobsDep,
                      authorization: Authorization = None) -> StreamingResponse:
    """One line per input state, in input order: `{"index", "result"}` or `{"index", "error": {"detail"}}`."""
    _bearer(serve, authorization)
    lines = await run_in_threadpool(jobs.results, job_id)
    return StreamingResponse(lines, media_type=NDJSON)
