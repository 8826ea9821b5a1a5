"""What an int8 build says before its precision search: the time it may take, from this run's FP32 figures, and the
faster ways to a build (`search/plan.py`)."""

from __future__ import annotations

import pytest

from laya_artifacts.search.plan import SearchPlan, duration

FAST_PATHS = "    faster: --target cpu-fp32 (no search: an FP32 artifact) or --candidates nbits-sym-b32 (one candidate)"


def _plan(fixed: int = 13, mixes: tuple[str, ...] = ("layer-mix", "node-mix"), exhaustive: bool = False) -> SearchPlan:
    return SearchPlan(
        ["c%d" % i for i in range(fixed)], mixes, speed_cases=16, runs=5, selection_cases=91, exhaustive=exhaustive
    )


def test_the_plan_names_the_public_recipes_first_and_the_mixes_last() -> None:
    plan = SearchPlan.of(
        ["layer-mix", "encoder", "nbits-sym-b64"], speed_cases=16, runs=5, selection_cases=91, exhaustive=False
    )
    assert (list(plan.fixed), list(plan.mixes)) == (["nbits-sym-b64", "encoder"], ["layer-mix"])
    assert plan.line().startswith("    3 candidate(s) to try: nbits-sym-b64, encoder then the mixes layer-mix;")


def test_the_default_search_s_estimate_is_its_fp32_figures_times_its_work() -> None:
    # 0.5 s per case; a candidate: 2 x 9 s to write and optimize it + 2 graphs x 6 passes x 8 s = 114 s; a gate 45.5 s
    said, faster = _plan().estimate(optimize_s=9.0, fp32_pass_s=8.0)
    assert said == (
        "    estimate from this run's fp32 (0.50 s per case, 9 s to optimize the graph): building and "
        "timing the 13 fixed candidate(s) about 24.7 min, then gating them fastest first on 91 selection "
        "cases, about 46 s each, until the first that passes and is fast enough (34.6 min if every one "
        "is gated); the mixes add a build and a gate per encoder layer or MatMul when they can still win"
    )
    assert faster == FAST_PATHS


def test_an_exhaustive_search_gates_every_candidate() -> None:
    said, _ = _plan(fixed=2, mixes=(), exhaustive=True).estimate(optimize_s=9.0, fp32_pass_s=8.0)
    assert said.endswith(
        "building and timing the 2 fixed candidate(s) about 3.8 min, then gating every one in full "
        "on 91 selection cases, about 46 s each (5.3 min in all)"
    )


def test_a_search_of_one_candidate_names_only_the_fp32_target() -> None:
    assert _plan(fixed=1, mixes=()).estimate(1.0, 1.0)[1] == FAST_PATHS.partition(" or ")[0]
    assert (
        _plan(fixed=0, mixes=("layer-mix",))
        .estimate(1.0, 1.0)[0]
        .endswith(
            "the mixes build and gate a graph per encoder layer or MatMul, each gate on 91 selection cases about 6 s"
        )
    )


@pytest.mark.parametrize(
    ("seconds", "said"), [(0.4, "0 s"), (89, "89 s"), (90, "1.5 min"), (5399, "90.0 min"), (5400, "1.5 h")]
)
def test_durations_read_in_their_unit(seconds: float, said: str) -> None:
    assert duration(seconds) == said


def test_timing_takes_fewer_passes_only_where_one_pass_takes_minutes() -> None:
    from laya_artifacts.search.plan import TIMING_BUDGET_S, speed_runs

    assert speed_runs(3.7, 5) == 5                  # a small checkpoint: every pass the search asks for
    assert speed_runs(111.0, 5) == 2                # the English shape on one thread: two, a median and a spread
    assert speed_runs(TIMING_BUDGET_S / 8, 5) == 3  # in between: what fits the budget, warm-up included
