"""The smoke test of a deployed API (`laya-artifacts deploy`'s last step): `GET /health`, then one decision.

Both go to the stack's `ApiUrl` output with `Authorization: Bearer <key>`, the key read from Secrets
Manager (`ApiKeySecretArn`; no key when the stack was deployed with `-c auth=false`). The health check
wants the deployed checkpoints loaded; the decision must answer exactly the questions asked, each with
its type and a value in range. The HTTP client is a seam (`Http`): `urllib_client` on AWS, and the tests
point the same one at a local server.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

from laya_artifacts.errors import DeployFailed

Http = Callable[[str, str, Mapping[str, str], bytes | None], tuple[int, bytes]]
"""(method, url, headers, body) -> (status, body); raises OSError when no answer came at all."""

SMOKE_STATE = "I was charged twice for my March invoice. Please refund one of the two payments."
SMOKE_QUESTIONS: dict[str, dict[str, Any]] = {
    "team": {"type": "choice", "instructions": "Which team should handle this ticket?",
             "criteria": ["billing", "tech", "other"]},
    "urgency": {"type": "score", "instructions": "How urgent is this ticket?",
                "criteria": ["not urgent", "somewhat urgent", "urgent", "critical"]},
    "refund": {"type": "noul", "instructions": "Does the customer ask for a refund?"},
}
# What API Gateway answers while a new function version starts (INIT, SnapStart restore) or times out.
RETRIED_STATUSES = (502, 503, 504)
TRIES, FIRST_WAIT_S, MAX_WAIT_S = 6, 2.0, 20.0
TIMEOUT_S = 35.0  # the REST integration gives up at 29 s


def urllib_client(method: str, url: str, headers: Mapping[str, str], body: bytes | None) -> tuple[int, bytes]:
    """The standard library's HTTP client as an `Http`: an error status is an answer, not an exception."""
    request = urllib.request.Request(url, data=body, headers=dict(headers), method=method)
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            return int(response.status), response.read()
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read()


def api_key(secrets: Any, secret_arn: str | None) -> str | None:
    """The bearer key the stack generated (Secrets Manager GetSecretValue), or None for an open API."""
    if not secret_arn:
        return None
    try:
        return str(secrets.get_secret_value(SecretId=secret_arn)["SecretString"])
    except Exception as exc:  # any boto failure: say which secret could not be read
        raise DeployFailed("cannot read the API key from %s: %s" % (secret_arn, exc)) from exc


def call(http: Http, method: str, url: str, headers: Mapping[str, str], body: bytes | None,
         sleep: Callable[[float], None], tries: int = TRIES) -> tuple[int, bytes]:
    """One request, tried again (waits doubling) while the API is starting: a 502/503/504 or no answer."""
    wait, last = FIRST_WAIT_S, ""
    for attempt in range(1, tries + 1):
        try:
            status, answer = http(method, url, headers, body)
        except OSError as exc:
            last = "no answer (%s)" % exc
        else:
            if status not in RETRIED_STATUSES or attempt == tries:
                return status, answer
            last = "%d" % status
        if attempt < tries:
            sleep(wait)
            wait = min(wait * 2, MAX_WAIT_S)
    raise DeployFailed("%s %s: %s after %d tries" % (method, url, last, tries))


def _text(body: bytes, limit: int = 300) -> str:
    text = body.decode("utf-8", "replace").strip()
    return text if len(text) <= limit else text[:limit] + "..."


def answer_problems(response: Any, questions: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Every way `response` fails to answer `questions` (empty when it answers them all, in range)."""
    answers = response.get("answers") if isinstance(response, dict) else None
    if not isinstance(answers, dict):
        return ["no `answers` object in %s" % _text(json.dumps(response).encode())]
    problems = ["answers %r, which was not asked" % qid for qid in answers if qid not in questions]
    for qid, question in questions.items():
        answer, kind = answers.get(qid), question["type"]
        if not isinstance(answer, dict) or answer.get("type") != kind:
            problems.append("%r is not answered as a %s: %s" % (qid, kind, answer))
            continue
        value = answer.get(kind)
        options = question.get("criteria") or []
        if kind == "choice" and value not in options:
            problems.append("%r chose %r, not one of %s" % (qid, value, options))
        elif kind == "score" and not (isinstance(value, int | float) and 0 <= value <= len(options) - 1):
            problems.append("%r scored %r, outside 0..%d" % (qid, value, len(options) - 1))
        elif kind == "noul" and not (isinstance(value, int | float) and 0 <= value <= 1):
            problems.append("%r has noul %r, not a probability" % (qid, value))
    return problems


def smoke_test(outputs: Mapping[str, str], secrets: Any, http: Http, sleep: Callable[[float], None],
               progress: Callable[[str], None] = lambda _m: None) -> dict[str, Any]:
    """`GET /health` (the checkpoints loaded) and one `POST /v1/systemone` answered as asked; returns both."""
    base = outputs["ApiUrl"].rstrip("/")
    secret_arn = outputs.get("ApiKeySecretArn")
    key = api_key(secrets, secret_arn)
    headers = {"Authorization": "Bearer %s" % key} if key else {}
    status, body = call(http, "GET", base + "/health", headers, None, sleep)
    if status != 200:
        raise DeployFailed("GET %s/health answered %d: %s" % (base, status, _text(body)))
    health = json.loads(body)
    if health.get("ready") is False:
        raise DeployFailed("GET %s/health: the API is up but serves nothing: %s" % (base, health.get("detail")))
    progress("GET /health: loaded %s%s" % (", ".join(health.get("loaded") or ["(not shown without the key)"]),
                                          "; target fallbacks %s" % health["target_fallbacks"]
                                          if health.get("target_fallbacks") else ""))
    request = json.dumps({"state": SMOKE_STATE, "questions": SMOKE_QUESTIONS}).encode()
    status, body = call(http, "POST", base + "/v1/systemone", {**headers, "Content-Type": "application/json"},
                        request, sleep)
    if status != 200:
        hint = " (the key in %s is not the one the API accepts)" % secret_arn if status == 401 and key else ""
        raise DeployFailed("POST %s/v1/systemone answered %d: %s%s" % (base, status, _text(body), hint))
    answered = json.loads(body)
    problems = answer_problems(answered, SMOKE_QUESTIONS)
    if problems:
        raise DeployFailed("POST %s/v1/systemone answered 200 but not the questions asked: %s"
                           % (base, "; ".join(problems)))
    progress("POST /v1/systemone: %s" % ", ".join(
        "%s=%s" % (qid, answered["answers"][qid][q["type"]]) for qid, q in SMOKE_QUESTIONS.items()))
    return {"health": health, "answer": answered}


__all__ = ["SMOKE_QUESTIONS", "SMOKE_STATE", "Http", "answer_problems", "api_key", "call", "smoke_test",
           "urllib_client"]
