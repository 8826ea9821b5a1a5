"""`laya-artifacts tune --aws`: AWS Lambda Power Tuning driven with the workload, answered by stubbed AWS clients
(botocore Stubber: the exact requests are checked, and the responses are Power Tuning's documented output)."""

from __future__ import annotations

import datetime
import json
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from laya_artifacts import cli
from laya_artifacts.tune.power_tuning import PowerTuningError, execution_input, to_decisions, tune_aws
from laya_artifacts.tune.prices import Prices
from laya_artifacts.tune.workload import read_workload

FUNCTION = "arn:aws:lambda:eu-west-1:123456789012:function:LayaServerless-Api"
MACHINE = "arn:aws:states:eu-west-1:123456789012:stateMachine:powerTuningStateMachine-abc"
EXECUTION = "arn:aws:states:eu-west-1:123456789012:execution:powerTuningStateMachine-abc:run-1"
# Power Tuning's output (README-INPUT-OUTPUT.md), with includeOutputResults: the cost is per invocation, duration only
OUTPUT = {"results": {"power": "2048", "cost": 0.0000052, "duration": 151.2,
                      "stateMachine": {"executionCost": 0.00045, "lambdaCost": 0.0012, "visualization": "https://x"},
                      "stats": [{"value": 1024, "averagePrice": 0.0000061, "averageDuration": 355.0},
                                {"value": 2048, "averagePrice": 0.0000052, "averageDuration": 151.2},
                                {"value": 3008, "averagePrice": 0.0000063, "averageDuration": 125.9}]}}


def _clients() -> tuple[Any, Any]:
    sfn = boto3.client("stepfunctions", region_name="eu-west-1", aws_access_key_id="x", aws_secret_access_key="x")
    lam = boto3.client("lambda", region_name="eu-west-1", aws_access_key_id="x", aws_secret_access_key="x")
    return sfn, lam


def _stub(sfn: Any, lam: Any, document: dict[str, Any], final: dict[str, Any]) -> tuple[Stubber, Stubber]:
    now = datetime.datetime(2026, 12, 4, tzinfo=datetime.UTC)
    sfn_stub, lam_stub = Stubber(sfn), Stubber(lam)
    lam_stub.add_response("get_function_configuration", {"Architectures": ["arm64"]}, {"FunctionName": FUNCTION})
    sfn_stub.add_response("start_execution", {"executionArn": EXECUTION, "startDate": now},
                          {"stateMachineArn": MACHINE, "input": json.dumps(document)})
    running = {"executionArn": EXECUTION, "stateMachineArn": MACHINE, "status": "RUNNING", "startDate": now}
    sfn_stub.add_response("describe_execution", running, {"executionArn": EXECUTION})
    sfn_stub.add_response("describe_execution", {**running, **final}, {"executionArn": EXECUTION})
    sfn_stub.activate()
    lam_stub.activate()
    return sfn_stub, lam_stub


def test_the_workload_goes_in_as_weighted_rest_events_and_comes_out_per_million_decisions() -> None:
    requests = read_workload()
    prices = Prices.load()
    document = execution_input(FUNCTION, requests, [1024, 2048, 3008], num=16, prefix="/laya")
    assert {k: document[k] for k in ("lambdaARN", "powerValues", "num", "parallelInvocation", "strategy")} == {
        "lambdaARN": FUNCTION, "powerValues": [1024, 2048, 3008], "num": 16, "parallelInvocation": False,
        "strategy": "cost"}
    assert [p["weight"] for p in document["payload"]] == [1] * len(requests)
    first = document["payload"][0]["payload"]
    assert (first["httpMethod"], first["path"]) == ("POST", "/laya/v1/systemone")
    assert json.loads(first["body"]) == requests[0].body

    sfn, lam = _clients()
    sfn_stub, lam_stub = _stub(sfn, lam, document, {"status": "SUCCEEDED", "stopDate": datetime.datetime(
        2026, 12, 4, 0, 5, tzinfo=datetime.UTC), "output": json.dumps(OUTPUT)})
    waits: list[float] = []
    result = tune_aws(FUNCTION, MACHINE, requests, [1024, 2048, 3008], prices, sfn=sfn, lambda_client=lam, num=16,
                      prefix="/laya", sleep=waits.append, poll_s=1.0)
    sfn_stub.assert_no_pending_responses()
    lam_stub.assert_no_pending_responses()
    assert waits == [1.0]

    per_invocation = sum(r.decisions for r in requests) / len(requests)        # 4.5 for the built-in mix
    assert result["decisions_per_invocation"] == per_invocation == 4.5
    assert (result["arch"], result["execution"], result["power_tuning"]["power"]) == ("arm64", EXECUTION, 2048)
    for size, stat in zip(result["sizes"], OUTPUT["results"]["stats"], strict=True):
        expected = (stat["averagePrice"] + 0.20 / 1e6) / per_invocation * 1e6    # + the request fee, per decision
        assert size["usd_per_1m_decisions"] == pytest.approx(expected, abs=1e-4)
        assert size["memory_mb"] == stat["value"]
    assert result["recommendation"]["memory_mb"] == 2048


def test_an_slo_on_the_mean_moves_the_choice_to_a_faster_size() -> None:
    results = {**OUTPUT["results"], "execution": EXECUTION}
    chosen = to_decisions(results, read_workload(), Prices.load(), "x86_64", slo_mean_ms=130)
    assert chosen["recommendation"]["memory_mb"] == 3008
    assert to_decisions(results, read_workload(), Prices.load(), "x86_64", slo_mean_ms=100)["recommendation"] is None


def test_an_output_without_results_wrapper_is_read_too() -> None:
    sfn, lam = _clients()
    requests = read_workload()
    document = execution_input(FUNCTION, requests, [1024], num=8)
    flat = {k: v for k, v in OUTPUT["results"].items() if k != "stats"}
    _stub(sfn, lam, document, {"status": "SUCCEEDED", "output": json.dumps(flat)})
    result = tune_aws(FUNCTION, MACHINE, requests, [1024], Prices.load(), sfn=sfn, lambda_client=lam, num=8,
                      sleep=lambda _s: None)
    assert [s["memory_mb"] for s in result["sizes"]] == [2048]


@pytest.mark.parametrize(("final", "match"), [
    ({"status": "FAILED", "error": "Lambda.Unknown", "cause": "out of memory"}, "ended FAILED: Lambda.Unknown"),
    ({"status": "SUCCEEDED", "output": "{\"results\": {}}"}, "no power/cost"),
    ({"status": "SUCCEEDED", "output": "not json"}, "no JSON output"),
])
def test_a_failed_or_unreadable_execution_is_reported(final: dict[str, Any], match: str) -> None:
    sfn, lam = _clients()
    requests = read_workload()
    document = execution_input(FUNCTION, requests, [1024], num=8)
    _stub(sfn, lam, document, final)
    with pytest.raises(PowerTuningError, match=match):
        tune_aws(FUNCTION, MACHINE, requests, [1024], Prices.load(), sfn=sfn, lambda_client=lam, num=8,
                 sleep=lambda _s: None)


def test_num_below_power_tunings_minimum_or_the_payload_count_is_refused() -> None:
    with pytest.raises(PowerTuningError, match="at least the workload's 8 requests"):
        execution_input(FUNCTION, read_workload(), [1024], num=6)


def test_the_cli_asks_for_the_state_machine(capsys: pytest.CaptureFixture[str], tmp_path: Any) -> None:
    assert cli.main(["tune", "--aws", FUNCTION, "--json", str(tmp_path / "o.json")]) == 2
    assert "--aws needs --state-machine ARN" in capsys.readouterr().err


@pytest.mark.parametrize(("argv", "match"), [
    (["--aws", "my-function", "--state-machine", MACHINE], "--aws takes a lambda ARN"),
    (["--aws", FUNCTION, "--state-machine", "powerTuning"], "--state-machine takes a states ARN"),
])
def test_the_cli_refuses_what_is_not_an_arn(argv: list[str], match: str, capsys: pytest.CaptureFixture[str],
                                            tmp_path: Any) -> None:
    assert cli.main(["tune", *argv, "--json", str(tmp_path / "o.json")]) == 2
    assert match in capsys.readouterr().err
