"""The dated price table `tune` prices decisions with, and the workload lines it times."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from laya_artifacts.tune.prices import PriceError, Prices
from laya_artifacts.tune.workload import WorkloadError, read_workload, rest_event


def test_the_shipped_table_is_dated_and_holds_the_published_prices() -> None:
    prices = Prices.load()
    assert prices.date == "2026-12-04"
    assert prices.gb_second_usd == {"x86_64": 0.0000166667, "arm64": 0.0000133334}
    assert prices.request_usd_per_million == 0.20
    assert prices.arm64_time_factor == 1.0 and "assumed" in prices.arm64_time_basis


def test_a_request_costs_its_fee_plus_billed_gb_seconds() -> None:
    prices = Prices.load()
    # 100.2 ms bills 101 ms; 2048 MB is 2 GB
    assert prices.request_usd(100.2, 2048, "x86_64") == pytest.approx(0.2e-6 + 0.101 * 2 * 0.0000166667)
    assert prices.request_usd(100.0, 1024, "arm64") == pytest.approx(0.2e-6 + 0.100 * 1 * 0.0000133334)


def test_cost_per_million_decisions_divides_by_the_decisions_requests_carry() -> None:
    prices = Prices.load()
    one = prices.per_million_decisions([10.0, 10.0], [1, 1], 1024, "x86_64")
    packed = prices.per_million_decisions([20.0], [2], 1024, "x86_64")   # both questions in one request: one fee
    assert one == pytest.approx((0.2e-6 + 0.010 * 0.0000166667) * 1e6)
    assert packed == pytest.approx(one - 0.1)                            # half the request fees


def test_the_arm64_estimate_scales_the_measured_time_by_its_factor(tmp_path: Path) -> None:
    prices = Prices.load(arm64_time_factor=1.5)
    assert prices.time_factor("x86_64") == 1.0 and prices.time_factor("arm64") == 1.5
    assert prices.per_million_decisions([20.0], [1], 2048, "arm64") == pytest.approx(
        (0.2e-6 + 0.030 * 2 * 0.0000133334) * 1e6)
    assert "--arm64-time-factor 1.5" in prices.arm64_time_basis


def test_a_user_price_file_overrides_the_shipped_one(tmp_path: Path) -> None:
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"date": "2027-01-01", "request_usd_per_million": 0.25,
                                "gb_second_usd": {"x86_64": 0.00002, "arm64": 0.000016}, "arm64_time_factor": 0.9}))
    prices = Prices.load(path)
    assert (prices.date, prices.arm64_time_factor) == ("2027-01-01", 0.9)
    assert prices.request_usd(1.0, 1024, "x86_64") == pytest.approx(0.25e-6 + 0.001 * 0.00002)


@pytest.mark.parametrize(("content", "match"), [
    ("not json", "cannot be read"),
    ("[]", "must hold a JSON object"),
    ('{"date": "d", "gb_second_usd": {"x86_64": 1}}', "no 'request_usd_per_million'"),
    ('{"date": "d", "request_usd_per_million": 0.2, "gb_second_usd": {"x86_64": -1}}', "positive prices"),
    ('{"date": "d", "request_usd_per_million": 0.2, "gb_second_usd": {"x86_64": 1}, "arm64_time_factor": 0}',
     "positive number"),
])
def test_a_bad_price_file_is_refused_naming_what_is_wrong(tmp_path: Path, content: str, match: str) -> None:
    path = tmp_path / "prices.json"
    path.write_text(content)
    with pytest.raises(PriceError, match=match):
        Prices.load(path)


def test_an_architecture_without_a_price_is_refused() -> None:
    with pytest.raises(PriceError, match="no GB-second price for 'riscv64'"):
        Prices.load().request_usd(1.0, 1024, "riscv64")


def test_the_built_in_workload_mixes_short_and_long_states_with_1_and_8_questions() -> None:
    requests = read_workload()
    assert sorted({r.name for r in requests}) == ["long-1q", "long-8q", "short-1q", "short-8q"]
    assert sorted({r.decisions for r in requests}) == [1, 8]
    long_words = min(len(r.body["state"].split()) for r in requests if r.name.startswith("long"))
    assert long_words > 100 > max(len(r.body["state"].split()) for r in requests if r.name.startswith("short"))


def test_a_batch_line_carries_questions_times_states_decisions(tmp_path: Path) -> None:
    path = tmp_path / "w.jsonl"
    path.write_text(json.dumps({"id": "b", "states": ["a", "b", "c"], "batch_size": 2,
                                "questions": {"q": {"type": "noul", "instructions": "?"},
                                              "r": {"type": "noul", "instructions": "?"}}}) + "\n")
    (request,) = read_workload(path)
    assert (request.name, request.decisions, request.path, request.controls()) == (
        "b", 6, "v1/systemone/batch", {"batch_size": 2})
    event = rest_event(request, prefix="/laya", bearer="k")
    assert (event["path"], event["requestContext"]["path"]) == (
        "/laya/v1/systemone/batch", "/prod/laya/v1/systemone/batch")
    assert event["headers"]["Authorization"] == "Bearer k"
    assert json.loads(event["body"]) == request.body


@pytest.mark.parametrize(("line", "match"), [
    ("{", "line 1 is not JSON"),
    ("[1]", "must be a JSON object"),
    ('{"state": "s"}', "non-empty 'questions'"),
    ('{"questions": {"q": {}}}', "exactly one of 'state'"),
    ('{"state": "s", "states": ["s"], "questions": {"q": {}}}', "exactly one of 'state'"),
    ('{"states": [], "questions": {"q": {}}}', "non-empty list"),
])
def test_a_bad_workload_line_is_refused_with_its_line_number(tmp_path: Path, line: str, match: str) -> None:
    path = tmp_path / "w.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(WorkloadError, match=match):
        read_workload(path)


def test_an_empty_workload_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "w.jsonl"
    path.write_text("\n")
    with pytest.raises(WorkloadError, match="holds no request"):
        read_workload(path)
