"""`laya-artifacts tune --aws FUNCTION_ARN`: price a decision on the deployed function with AWS Lambda Power Tuning.

Power Tuning (github.com/alexcasalboni/aws-lambda-power-tuning, installed from the Serverless Application
Repository or its CDK construct: docs/deploy.md) is the established tool: its Step Functions state machine
publishes a version per memory size, invokes it `num` times and reports each size's average duration and
price per invocation. Its input is `{lambdaARN, powerValues, num, payload, parallelInvocation, strategy}`;
its output `{power, cost, duration, stateMachine{...}, stats[...]}` (under `results` in some versions).
This module starts it with the workload's Jev requests wrapped as the REST API events the handler receives
(a weighted payload, one entry per request), waits for it, and turns its per-invocation price (duration
only) into USD per 1M decisions: plus the request fee, divided by the decisions an invocation carries.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from laya_artifacts.errors import PowerTuningError
from laya_artifacts.tune.prices import Prices
from laya_artifacts.tune.workload import Request, rest_event

DEFAULT_NUM = 20
POLL_S = 5.0
TIMEOUT_S = 3600.0
SOURCE = "aws-lambda-power-tuning"


def execution_input(function_arn: str, requests: Sequence[Request], memory: Sequence[int], *, num: int = DEFAULT_NUM,
                    parallel: bool = False, strategy: str = "cost", prefix: str = "", stage: str = "prod",
                    bearer: str | None = None) -> dict[str, Any]:
    """Power Tuning's execution input: every workload request once per `len(requests)` invocations (equal
    weights; Power Tuning needs `num` >= the number of weighted payloads)."""
    if num < max(5, len(requests)):
        raise PowerTuningError("--num must be at least 5 and at least the workload's %d requests (Power Tuning's "
                               "rule for weighted payloads), got %d" % (len(requests), num))
    payload = [{"payload": rest_event(r, prefix, stage, bearer), "weight": 1} for r in requests]
    return {"lambdaARN": function_arn, "powerValues": list(memory), "num": num, "payload": payload,
            "parallelInvocation": parallel, "strategy": strategy, "includeOutputResults": True}


def decisions_per_invocation(requests: Sequence[Request]) -> float:
    """Equal weights: the mean decisions of the workload's requests."""
    return sum(r.decisions for r in requests) / len(requests)


def run_execution(sfn: Any, state_machine_arn: str, document: dict[str, Any], *, poll_s: float = POLL_S,
                  timeout_s: float = TIMEOUT_S, sleep: Callable[[float], None] = time.sleep,
                  progress: Callable[[str], None] = lambda _m: None) -> dict[str, Any]:
    """Start the state machine and wait for its output (a Step Functions client is injected)."""
    started = sfn.start_execution(stateMachineArn=state_machine_arn, input=json.dumps(document))
    execution = started["executionArn"]
    progress("started %s" % execution)
    waited = 0.0
    while True:
        described = sfn.describe_execution(executionArn=execution)
        status = described["status"]
        if status == "SUCCEEDED":
            break
        if status != "RUNNING":
            raise PowerTuningError("Power Tuning execution %s ended %s: %s %s" % (
                execution, status, described.get("error", ""), described.get("cause", "")))
        if waited >= timeout_s:
            raise PowerTuningError("Power Tuning execution %s still running after %.0f s" % (execution, waited))
        progress("%s: %s (%.0f s)" % (execution.rsplit(":", 1)[-1], status, waited))
        sleep(poll_s)
        waited += poll_s
    try:
        output = json.loads(described["output"])
    except (KeyError, ValueError) as exc:
        raise PowerTuningError("Power Tuning execution %s gave no JSON output: %s" % (execution, exc)) from None
    results = output.get("results", output) if isinstance(output, dict) else None
    if not isinstance(results, dict) or "power" not in results or "cost" not in results:
        raise PowerTuningError("Power Tuning's output has no power/cost: %s" % str(output)[:300])
    return {"execution": execution, **results}


def function_arch(lambda_client: Any, function_arn: str) -> str:
    found = lambda_client.get_function_configuration(FunctionName=function_arn)
    return str((found.get("Architectures") or ["x86_64"])[0])


def to_decisions(results: dict[str, Any], requests: Sequence[Request], prices: Prices, arch: str,
                 slo_mean_ms: float | None = None) -> dict[str, Any]:
    """Power Tuning's result per memory size as USD per 1M decisions, and the cheapest size within the SLO
    (on the mean duration: Power Tuning reports no percentile)."""
    per_invocation = decisions_per_invocation(requests)
    fee = prices.request_usd_per_million / 1e6

    def per_million(invocation_usd: float) -> float:
        return round((float(invocation_usd) + fee) / per_invocation * 1e6, 4)

    stats = results.get("stats") or [{"value": results["power"], "averagePrice": results["cost"],
                                      "averageDuration": results["duration"]}]
    sizes = sorted(({"memory_mb": int(s["value"]), "mean_ms": round(float(s["averageDuration"]), 2),
                     "usd_per_invocation": float(s["averagePrice"]),
                     "usd_per_1m_decisions": per_million(s["averagePrice"]),
                     "meets_slo": slo_mean_ms is None or float(s["averageDuration"]) <= slo_mean_ms}
                    for s in stats), key=lambda s: s["memory_mb"])
    meeting = [s for s in sizes if s["meets_slo"]]
    choice = min(meeting, key=lambda s: (s["usd_per_1m_decisions"], s["memory_mb"])) if meeting else None
    return {
        "schema": "laya-tune-aws/1", "source": SOURCE, "execution": results.get("execution"), "arch": arch,
        "decisions_per_invocation": round(per_invocation, 3), "request_usd_per_million": prices.request_usd_per_million,
        "prices_date": prices.date,
        "power_tuning": {"power": int(results["power"]), "cost": results["cost"], "duration": results["duration"],
                         "stateMachine": results.get("stateMachine", {})},
        "sizes": sizes,
        "recommendation": None if choice is None else {
            "memory_mb": choice["memory_mb"], "arch": arch, "usd_per_1m_decisions": choice["usd_per_1m_decisions"],
            "mean_ms": choice["mean_ms"], "slo_mean_ms": slo_mean_ms},
    }


def tune_aws(function_arn: str, state_machine_arn: str, requests: Sequence[Request], memory: Sequence[int],
             prices: Prices, *, sfn: Any, lambda_client: Any, num: int = DEFAULT_NUM, parallel: bool = False,
             strategy: str = "cost", prefix: str = "", stage: str = "prod", bearer: str | None = None,
             slo_mean_ms: float | None = None, poll_s: float = POLL_S, sleep: Callable[[float], None] = time.sleep,
             progress: Callable[[str], None] = lambda _m: None) -> dict[str, Any]:
    document = execution_input(function_arn, requests, memory, num=num, parallel=parallel, strategy=strategy,
                               prefix=prefix, stage=stage, bearer=bearer)
    arch = function_arch(lambda_client, function_arn)
    results = run_execution(sfn, state_machine_arn, document, poll_s=poll_s, sleep=sleep, progress=progress)
    return to_decisions(results, requests, prices, arch, slo_mean_ms)


def table(result: dict[str, Any]) -> str:
    lines = ["| memory MB | mean ms | $/invocation (Power Tuning, duration only) | $/1M decisions (%s, + request fee) |"
             % result["arch"], "|---:|---:|---:|---:|"]
    for size in result["sizes"]:
        lines.append("| %d | %.1f | %.10f | %.4f |" % (size["memory_mb"], size["mean_ms"], size["usd_per_invocation"],
                                                      size["usd_per_1m_decisions"]))
    rec = result["recommendation"]
    lines.append("")
    lines.append("Power Tuning's choice (its strategy): %d MB. Cheapest per 1M decisions%s: %s." % (
        result["power_tuning"]["power"],
        " within mean <= %g ms" % rec["slo_mean_ms"] if rec and rec["slo_mean_ms"] is not None else "",
        "%d MB, $%.4f" % (rec["memory_mb"], rec["usd_per_1m_decisions"]) if rec else "none"))
    return "\n".join(lines)
