"""`laya-artifacts tune` on a tiny artifact: the JSON's structure and its figures' consistency (never timings).

Fresh processes really run the artifact; the quota is off (`--no-quota`) so that the run does not depend on
this machine's cgroups (the quota itself is `tests/unit/laya_artifacts/test_tune_quota.py`'s)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from laya_artifacts import cli
from laya_artifacts.tune.prices import Prices
from laya_artifacts.tune.workload import DEFAULT_WORKLOAD

pytestmark = pytest.mark.slow

MEMORY = (1024, 2048)
SLO_P99_MS = 60_000  # met by every size: the recommendation is the SLO-free one


@pytest.fixture(scope="module")
def tuned(tiny_modernbert: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    out = tmp_path_factory.mktemp("tune") / "demo.json"
    code = cli.main(["tune", str(tiny_modernbert[1]), "--memory", ",".join(map(str, MEMORY)), "--configs", "runtime,t1",
                     "--rounds", "2", "--requests", "3", "--no-quota", "--json", str(out),
                     "--workload", str(DEFAULT_WORKLOAD), "--slo-p99-ms", str(SLO_P99_MS)])
    assert code == 0
    return json.loads(out.read_text()), out


def test_every_size_holds_its_figures_costs_per_arch_and_fit(tuned: tuple[dict[str, Any], Path]) -> None:
    result = tuned[0]
    assert result["schema"] == "laya-tune/1"
    assert result["command"].startswith("laya-artifacts tune ") and "--no-quota" in result["command"]
    assert result["quota"]["mode"] == "unconstrained" and "unconstrained" in result["quota"]["note"]
    assert [s["memory_mb"] for s in result["sizes"]] == list(MEMORY)
    assert result["arches"] == ["x86_64", "arm64"]
    for size in result["sizes"]:
        assert size["quota_reason"] == "--no-quota"
        for key in ("p50_ms", "p99_ms", "mean_ms", "cold_ms", "restore_ms", "peak_rss_mb"):
            assert size[key] > 0, key
        assert size["p50_ms"] <= size["p99_ms"]
        assert size["estimated"] == {"x86_64": False, "arm64": True}
        assert size["fits"] == (size["peak_rss_mb"] <= size["memory_mb"])
        assert [c["name"] for c in size["configs"]] == ["runtime", "t1"]
        for config in size["configs"]:
            assert len(config["samples"]["warm_ms"]) == 2 * 3 == config["warm_ms"]["n"]
            assert len(config["samples"]["cold_ms"]) == len(config["samples"]["restore_ms"]) == 2
    assert all(s["fits"] for s in result["sizes"])   # the tiny model's process peaks far below 1 GB


def test_costs_are_the_price_table_applied_to_the_recorded_durations(tuned: tuple[dict[str, Any], Path]) -> None:
    result = tuned[0]
    prices = Prices.load()
    assert result["prices"]["date"] == prices.date
    for size in result["sizes"]:
        for config in size["configs"]:
            samples = config["samples"]
            for arch in ("x86_64", "arm64"):
                cost = config["cost"][arch]
                assert cost["usd_per_1m_decisions"] == pytest.approx(prices.per_million_decisions(
                    samples["warm_ms"], samples["warm_decisions"], size["memory_mb"], arch), abs=1e-4)
                assert cost["p99_ms"] == pytest.approx(config["warm_ms"]["p99"] * prices.time_factor(arch), abs=0.01)
            assert config["decisions_per_request"] == pytest.approx(
                sum(samples["warm_decisions"]) / len(samples["warm_decisions"]), abs=1e-3)
        chosen = next(c for c in size["configs"] if c["name"] == size["config"])   # the size's cheapest config
        assert chosen["cost"]["x86_64"]["usd_per_1m_decisions"] == min(
            c["cost"]["x86_64"]["usd_per_1m_decisions"] for c in size["configs"])
        assert (size["p50_ms"], size["p99_ms"], size["cold_ms"]) == (
            chosen["warm_ms"]["p50"], chosen["warm_ms"]["p99"], chosen["cold_ms"]["p50"])
        # arm64 with the same time costs less by the GB-second price ratio, the request fee aside
        x86, arm = size["cost_per_1m_decisions"]["x86_64"], size["cost_per_1m_decisions"]["arm64"]
        fee = 0.20 / chosen["decisions_per_request"]
        assert arm - fee == pytest.approx((x86 - fee) * 0.0000133334 / 0.0000166667, rel=1e-2, abs=2e-4)


def test_the_recommendation_is_the_cheapest_fitting_size(tuned: tuple[dict[str, Any], Path]) -> None:
    result = tuned[0]
    recommendation = result["recommendation"]
    assert recommendation["slo_p99_ms"] == SLO_P99_MS
    fitting = [s for s in result["sizes"] if s["fits"]]
    for arch in ("x86_64", "arm64"):
        cheapest = min(fitting, key=lambda s: s["cost_per_1m_decisions"][arch])
        chosen = recommendation["per_arch"][arch]
        # the cheapest, or the smallest size within this run's noise band of it
        assert cheapest["memory_mb"] in chosen["within_noise"] and chosen["memory_mb"] == min(chosen["within_noise"])
    choice = recommendation["choice"]
    assert choice["usd_per_1m_decisions"] == min(c["usd_per_1m_decisions"] for c in recommendation["per_arch"].values())
    assert choice["estimated"] == (choice["arch"] == "arm64")


def test_a_png_is_written_beside_the_json(tuned: tuple[dict[str, Any], Path]) -> None:
    png = tuned[1].with_suffix(".png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(("argv", "match"), [
    (["--memory", "64"], "128-10240 MB"),
    (["--memory", "big"], "takes MB values"),
    (["--arch", "riscv64"], "--arch takes x86_64,arm64"),
    (["--configs", "t0"], "unknown configuration 't0'"),
    (["--configs", "t1,t1"], "distinct names"),
])
def test_bad_options_are_refused_before_anything_runs(argv: list[str], match: str, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["tune", str(tmp_path), "--json", str(tmp_path / "o.json"), *argv]) == 2
    assert match in capsys.readouterr().err
