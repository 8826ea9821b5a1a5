"""`GET /v1/models`: the deployed checkpoints, in the shape the official Jev client reads.

`{"models": [{"name", "description", "release_date"}]}`, one entry per deployed checkpoint, by the
name a request's `model` field pins it with. The release date is the artifact manifest's
`created` date when it records one, else the day this process loaded the artifact (artifacts
record no publish date yet). With a key set the route needs the bearer, like the decision routes.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Request

from .serving import Serving, serving

router = APIRouter()
CATALOG_STATE = "model_catalog"


def entries(names: list[str], catalog: dict[str, dict[str, str]]) -> list[dict[str, str]]:
    today = dt.date.today().isoformat()
    return [catalog.get(name) or {"name": name, "description": "Laya typed decisions: checkpoint %s" % name,
                                  "release_date": today} for name in names]


@router.get("/v1/models")
def list_models(request: Request, serve: Annotated[Serving, Depends(serving)],
                authorization: Annotated[str | None, Header()] = None) -> dict[str, Any]:
    """The deployed checkpoints a request may pin with `model` (omit it, or send `jev-latest`, to auto-route)."""
    deployment = serve.ready(authorization)
    return {"models": entries(deployment.names, getattr(request.app.state, CATALOG_STATE, {}))}
