"""The requests `laya-artifacts tune` times: Jev request bodies, one JSON object a line.

A line is what a client POSTs: `{"state": ..., "questions": {...}}` to `/v1/systemone`, or `{"states": [...],
"questions": {...}}` to `/v1/systemone/batch`, with the protocol's controls beside them; an optional `id` names
the line. A request carries questions x states decisions. The built-in mix (`tune_data/workload.jsonl`) holds a
short (~12-token) and a long (~200-token) state, each asked 1 and 8 questions. For Power Tuning, each body is
wrapped in the REST API event the deployed handler receives.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from laya_artifacts.errors import WorkloadError

DEFAULT_WORKLOAD = Path(__file__).resolve().parent / "tune_data" / "workload.jsonl"
SINGLE_PATH, BATCH_PATH = "v1/systemone", "v1/systemone/batch"
CONTROLS = ("max_len", "head_max_len", "min_confidence")
BATCH_CONTROLS = (*CONTROLS, "batch_size", "sort_by_length")


@dataclass(frozen=True)
class Request:
    name: str
    body: dict[str, Any]

    @property
    def is_batch(self) -> bool:
        return "states" in self.body

    @property
    def decisions(self) -> int:
        states = len(self.body["states"]) if self.is_batch else 1
        return states * len(self.body["questions"])

    @property
    def path(self) -> str:
        return BATCH_PATH if self.is_batch else SINGLE_PATH

    def controls(self) -> dict[str, Any]:
        allowed = BATCH_CONTROLS if self.is_batch else CONTROLS
        return {key: self.body[key] for key in allowed if key in self.body}


def read_workload(path: Path | None = None) -> list[Request]:
    """The requests of `path` (default: the built-in mix), refused line by line with the reason."""
    source = Path(path) if path else DEFAULT_WORKLOAD
    try:
        lines = source.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise WorkloadError("workload %s cannot be read: %s" % (source, exc)) from None
    requests = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = "%s line %d" % (source, number)
        try:
            body = json.loads(line)
        except ValueError as exc:
            raise WorkloadError("%s is not JSON: %s" % (where, exc)) from None
        if not isinstance(body, dict):
            raise WorkloadError("%s must be a JSON object (a Jev request body)" % where)
        questions = body.get("questions")
        if not isinstance(questions, dict) or not questions:
            raise WorkloadError("%s needs a non-empty 'questions' object" % where)
        if ("state" in body) == ("states" in body):
            raise WorkloadError("%s needs exactly one of 'state' (/v1/systemone) or 'states' (/batch)" % where)
        if "states" in body and (not isinstance(body["states"], list) or not body["states"]):
            raise WorkloadError("%s: 'states' must be a non-empty list" % where)
        name = str(body.pop("id", "line-%d" % number))
        requests.append(Request(name, body))
    if not requests:
        raise WorkloadError("workload %s holds no request" % source)
    return requests


def rest_event(request: Request, prefix: str = "", stage: str = "prod", bearer: str | None = None) -> dict[str, Any]:
    """The API Gateway REST (v1) proxy event the stack's gateway hands the API function for this request."""
    route = "%s/%s" % (prefix.rstrip("/"), request.path)
    headers = {"Content-Type": "application/json", "Host": "power-tuning.invalid"}
    if bearer:
        headers["Authorization"] = "Bearer %s" % bearer
    return {
        "resource": "%s/{proxy+}" % prefix.rstrip("/"), "path": route, "httpMethod": "POST",
        "headers": headers, "multiValueHeaders": {k: [v] for k, v in headers.items()},
        "queryStringParameters": None, "multiValueQueryStringParameters": None,
        "pathParameters": {"proxy": request.path}, "stageVariables": None,
        "requestContext": {"accountId": "000000000000", "resourceId": "tune", "stage": stage,
                           "requestId": "power-tuning-%s" % request.name, "resourcePath": "/{proxy+}",
                           "httpMethod": "POST", "apiId": "tune", "path": "/%s%s" % (stage, route),
                           "protocol": "HTTP/1.1", "identity": {"sourceIp": "127.0.0.1", "userAgent": "tune"}},
        "body": json.dumps(request.body, ensure_ascii=False), "isBase64Encoded": False,
    }
