"""How `tune` turns timed samples into per-size figures, fit and the recommendation (synthetic samples: no timing)."""

from __future__ import annotations

import pytest

from laya_artifacts.tune.measure import Samples, parse_configs, recommend, summarize
from laya_artifacts.tune.prices import Prices
from laya_artifacts.tune.quota import Quota

ARCHES = ["x86_64", "arm64"]


def _samples(warm_ms: list[float], rss_mb: float) -> Samples:
    return Samples(cold_ms=[900.0, 1100.0], restore_ms=[20.0, 22.0], warm_ms=warm_ms,
                   warm_decisions=[1, 8] * (len(warm_ms) // 2), cpu_s=0.5, peak_rss_mb=rss_mb, load_ms=[800.0, 900.0])


def _sizes(slo: float | None) -> list[dict]:
    configs = parse_configs("runtime,t1")
    samples = {
        (512, "runtime"): _samples([40.0, 300.0] * 4, 700.0),     # the fastest per decision, but does not fit
        (512, "t1"): _samples([40.0, 300.0] * 4, 650.0),
        (1024, "runtime"): _samples([30.0, 240.0] * 4, 700.0),
        (1024, "t1"): _samples([25.0, 200.0] * 4, 700.0),         # cheaper than runtime at this size
        (2048, "runtime"): _samples([15.0, 110.0] * 4, 700.0),
        (2048, "t1"): _samples([16.0, 120.0] * 4, 700.0),
    }
    quotas = {mb: Quota(mb, "cgroup-v1") for mb in (512, 1024, 2048)}
    return summarize(samples, quotas, configs, Prices.load(), ARCHES, slo)


def test_a_size_whose_peak_rss_is_over_its_memory_does_not_fit_and_is_never_recommended() -> None:
    sizes = _sizes(None)
    assert [s["fits"] for s in sizes] == [False, True, True]
    assert sizes[0]["peak_rss_mb"] == 700.0            # the largest of its configurations
    assert recommend(sizes, ARCHES, None)["per_arch"]["x86_64"]["memory_mb"] == 1024


def test_each_size_reports_its_cheapest_configuration() -> None:
    one_gb = _sizes(None)[1]
    assert one_gb["config"] == "t1"
    assert (one_gb["p50_ms"], one_gb["mean_ms"]) == (112.5, 112.5)
    assert one_gb["cost_per_1m_decisions"]["x86_64"] < next(
        c["cost"]["x86_64"]["usd_per_1m_decisions"] for c in one_gb["configs"] if c["name"] == "runtime")
    assert one_gb["configs"][1]["cpu_ms_per_decision"] == pytest.approx(500 / 36, abs=1e-3)


def test_an_slo_moves_the_choice_to_a_faster_size_and_none_when_nothing_meets_it() -> None:
    sizes = _sizes(150.0)
    assert [s["meets_slo"]["x86_64"] for s in sizes] == [False, False, True]
    chosen = recommend(sizes, ARCHES, 150.0)
    assert chosen["per_arch"]["x86_64"]["memory_mb"] == 2048
    assert chosen["choice"]["arch"] == "arm64" and chosen["choice"]["estimated"] is True
    nothing = recommend(_sizes(1.0), ARCHES, 1.0)
    assert nothing["choice"] is None and nothing["why"] == "no size fits and meets p99 <= 1.0 ms"


def test_an_unconstrained_size_says_why() -> None:
    configs = parse_configs("t1")
    sizes = summarize({(1024, "t1"): _samples([10.0, 20.0], 100.0)}, {1024: Quota(1024, "unconstrained",
                      reason="not root")}, configs, Prices.load(), ARCHES, None)
    assert (sizes[0]["quota"], sizes[0]["quota_reason"]) == ("unconstrained", "not root")


def _priced(costs: dict[int, float], noise: float) -> list[dict]:
    return [{"memory_mb": mb, "config": "t1", "cost_per_1m_decisions": {"x86_64": usd}, "estimated": {"x86_64": False},
             "meets_slo": {"x86_64": True}, "noise": noise,
             "configs": [{"name": "t1", "cost": {"x86_64": {"p99_ms": 9.0}}}]}
            for mb, usd in costs.items()]


def test_a_winner_is_named_only_outside_the_noise_band() -> None:
    """1% apart with 3% noise: no winner, the smallest size within the band, and it says so; 20% apart: a winner."""
    tied = recommend(_priced({1024: 0.1010, 2048: 0.1000, 3008: 0.1500}, 0.03), ["x86_64"], None)
    assert tied["choice"]["memory_mb"] == 1024 and tied["choice"]["within_noise"] == [1024, 2048]
    assert tied["why"].startswith("1024, 2048 MB are within this run's noise band (+-3.0%) of the cheapest: no "
                                  "winner on cost; the smallest of them is recommended")
    clear = recommend(_priced({1024: 0.1200, 2048: 0.1000}, 0.03), ["x86_64"], None)
    assert clear["choice"]["memory_mb"] == 2048
    assert clear["why"].startswith("cheapest per 1M decisions, outside this run's noise band (+-3.0%)")


def test_the_noise_is_how_far_the_per_round_means_moved() -> None:
    from laya_artifacts.tune.measure import round_noise

    assert round_noise([10.0, 10.0, 12.0, 12.0], 2) == pytest.approx(1 / 11, abs=1e-4)
    assert round_noise([10.0, 12.0], 1) == 0.0


@pytest.mark.parametrize("missing, words", [
    (True, "demo-cpu-fp32: no such artifact directory (`make serve` builds .cache/artifacts/demo-cpu-fp32-<time>)"),
    (False, "demo-cpu-fp32 is not an artifact directory: decode_config.json is missing"),
])
def test_tune_on_a_folder_that_is_not_an_artifact_is_one_line_naming_it(tmp_path, capsys, missing, words) -> None:
    from laya_artifacts.cli import main

    if not missing:
        (tmp_path / "demo-cpu-fp32").mkdir()
    assert main(["tune", str(tmp_path / "demo-cpu-fp32"), "--json", str(tmp_path / "o.json"), "--no-quota"]) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("[laya-artifacts] error: ") and words in lines[0]
    assert not (tmp_path / "o.json").exists()
