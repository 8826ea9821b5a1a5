"""What `/openapi.json` (and `/docs`) say the request bodies are.

The routes read their bodies themselves (the protocol's own refusals, byte-compatible with upstream,
come before any schema check), so FastAPI cannot infer them; these descriptions are attached with
`openapi_extra`. They describe what a client should send, the protocol's documented fields, and are
loose where the protocol is loose (a `state` is any JSON value but null). Nothing validates against
them: a body outside them gets the protocol's refusal, never a schema error. The hostile tier runs
schemathesis against them (tests/functional/laya_serverless/http/test_schemathesis.py).
"""

from __future__ import annotations

from typing import Any

_STATE: dict[str, Any] = {"description": "the text (or any JSON value but null) to decide about",
                          "anyOf": [{"type": "string"}, {"type": "object"}, {"type": "array"},
                                    {"type": "number"}, {"type": "boolean"}]}
_QUESTION: dict[str, Any] = {
    "type": "object", "required": ["type", "instructions"],
    "properties": {
        "type": {"type": "string", "enum": ["choice", "score", "noul"]},
        "instructions": {"description": "what the model should answer (non-string values are JSON-encoded)"},
        "criteria": {"description": "choice: {label: description} or [labels]; score: [levels]; "
                                    "noul: {true?, false?}",
                     "anyOf": [{"type": "object"}, {"type": "array"}]},
        "labels": {"type": "object", "properties": {"true": {"type": "string"}, "false": {"type": "string"}}},
        "option_order": {"type": "array", "items": {"type": "integer"}},
    },
}
# JSON Schema counts 5.0 as an integer; the protocol (as upstream) refuses it: the description says so.
_BUDGET: dict[str, Any] = {"type": ["integer", "null"], "minimum": 1,
                           "description": "tokens, written as an integer (5, not 5.0); at most the server's limit"}
_CONTROLS: dict[str, Any] = {
    "questions": {"type": "object", "additionalProperties": _QUESTION, "maxProperties": 64},
    "model": {"description": "a checkpoint name or alias; omitted or \"auto\": the router chooses"},
    "task": {"description": "a checkpoint by task"},
    "lang": {"type": ["string", "null"]}, "lang_guess": {"type": ["string", "null"]},
    "max_len": _BUDGET, "head_max_len": _BUDGET,
    "min_confidence": {"description": "abstention gate: a number in [0, 1] or a map by question type",
                       "anyOf": [{"type": "number", "minimum": 0, "maximum": 1}, {"type": "object"},
                                 {"type": "null"}]},
}
_BATCH_CONTROLS: dict[str, Any] = {"batch_size": {"type": ["integer", "null"], "minimum": 1},
                                   "sort_by_length": {"type": ["boolean", "null"]}}


def _body(schema: dict[str, Any]) -> dict[str, Any]:
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


SYSTEMONE = _body({"type": "object", "required": ["state", "questions"],
                   "properties": {"state": _STATE, **_CONTROLS}})
BATCH = _body({"type": "object", "required": ["states", "questions"],
               "properties": {"states": {"type": "array", "items": _STATE, "minItems": 1, "maxItems": 64},
                              **_CONTROLS, **_BATCH_CONTROLS}})
JOB = _body({"type": "object", "required": ["questions"],
             "description": "`states` (inline) or `input` (a JSONL key under jobs/input/), not both",
             "oneOf": [{"required": ["states"]}, {"required": ["input"]}],
             "properties": {"states": {"type": "array", "items": _STATE, "minItems": 1},
                            "input": {"type": "string", "description": "a key under jobs/input/ or its store URI"},
                            "output": {"type": "string", "description": "a new key under jobs/output/"},
                            **_CONTROLS, **_BATCH_CONTROLS}})
