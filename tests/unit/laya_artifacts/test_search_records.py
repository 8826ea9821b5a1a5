"""Which kept search decisions decide another CPU's search: accuracy by int8 arithmetic, speed by class."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from laya_artifacts.search import records as search_records
from laya_artifacts.search.records import int8_arithmetic, save_record, usable

TOLERANCE = 0.02


def _search(chosen: str | None, figures: dict[str, float | None], passed: tuple[str, ...] = (),
            node_probes: tuple[float, ...] = ()) -> dict[str, Any]:
    found: dict[str, Any] = {"chosen": chosen, "why": "w", "candidates": [
        {"name": name, "recipe": {}, "selection": None if value is None else {
            "max_probability_error": value, "passed": name in passed}} for name, value in figures.items()]}
    if node_probes:
        found["node_mix"] = {"sensitivity": [{"node": "n%d" % i, "max_probability_error": v}
                                             for i, v in enumerate(node_probes)], "greedy": []}
    return found


def _kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, search: dict[str, Any], kernels: str) -> dict[str, Any]:
    import json

    monkeypatch.setattr(search_records, "int8_kernels", lambda _profile: kernels)
    return dict(json.loads(save_record({"k": 1}, search, tmp_path).read_text()))


def test_every_x86_class_shares_the_kernel_exact_arithmetic_and_arm_keeps_its_own() -> None:
    assert {int8_arithmetic(k) for k in ("avx2", "avx512", "avx512-vnni", "avx-vnni", "amx-int8")} == {"x86-exact"}
    assert int8_arithmetic("arm64-dotprod") == "arm64-dotprod" != int8_arithmetic("arm64-i8mm")


def test_a_clear_refusal_decides_every_class_and_a_near_miss_only_its_own(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    clear = _kept(tmp_path / "a", monkeypatch, _search(None, {"encoder": 0.8, "encoder-ffn": 0.17},
                                                       node_probes=(0.09, 0.3)), "amx-int8")
    assert clear["passed"] == [] and clear["candidates"]["node-mix"] == 0.09
    assert usable(clear, "amx-int8", TOLERANCE) and usable(clear, "avx2", TOLERANCE)
    near = _kept(tmp_path / "b", monkeypatch, _search(None, {"encoder": 0.8, "encoder-ffn": 0.025}), "amx-int8")
    assert usable(near, "amx-int8", TOLERANCE) and not usable(near, "avx2", TOLERANCE)
    probe_near = _kept(tmp_path / "c", monkeypatch, _search(None, {"encoder": 0.8}, node_probes=(0.01,)), "amx-int8")
    assert not usable(probe_near, "avx2", TOLERANCE)   # a node passed alone here: elsewhere a mix might pass
    ungated = _kept(tmp_path / "d", monkeypatch, _search(None, {"encoder": 0.8, "encoder-ffn": None}), "amx-int8")
    assert not usable(ungated, "avx2", TOLERANCE)


def test_a_choice_or_a_too_slow_pass_is_a_speed_verdict_of_its_own_class(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    chose = _kept(tmp_path / "a", monkeypatch, _search("encoder", {"encoder": 0.01}, ("encoder",)), "avx512-vnni")
    assert usable(chose, "avx512-vnni", TOLERANCE) and not usable(chose, "avx2", TOLERANCE)
    slow = _kept(tmp_path / "b", monkeypatch, _search(None, {"encoder": 0.01, "encoder-ffn": 0.5}, ("encoder",)),
                 "avx512-vnni")
    assert slow["passed"] == ["encoder"] and not usable(slow, "avx2", TOLERANCE)


def _refusal(candidates: list[str], figures: dict[str, float], recipe: str = "r") -> dict[str, Any]:
    return {"key": {"weights_sha256": "w", "onnxruntime": "1", "candidates": candidates, "recipe": recipe},
            "chosen": None, "passed": [], "int8_kernels": "amx-int8", "recorded": "2026-12-02", "candidates": figures}


def test_refusals_of_disjoint_candidates_merge_into_the_refusal_of_their_union() -> None:
    from laya_artifacts.search.records import merge_refusals

    key = {"weights_sha256": "w", "onnxruntime": "1", "candidates": ["a", "b", "c"], "recipe": "r2"}
    old, new = _refusal(["a", "b"], {"a": 0.5, "b": 0.2}), _refusal(["c"], {"c": 0.04}, "r2")
    merged = merge_refusals(key, [old, new])
    assert merged["key"] == key and merged["chosen"] is None and merged["candidates"] == {"a": 0.5, "b": 0.2,
                                                                                         "c": 0.04}
    assert [m["candidates"] for m in merged["merged_from"]] == [["a", "b"], ["c"]]
    assert usable(merged, "avx2", TOLERANCE) and usable(merged, "amx-int8", TOLERANCE)   # by the margin alone
    near = merge_refusals(key, [old, _refusal(["c"], {"c": 0.025})])
    assert not usable(near, "amx-int8", TOLERANCE)   # a merged near miss decides no class
    with pytest.raises(ValueError, match="not exactly"):
        merge_refusals(key, [old])
    with pytest.raises(ValueError, match="only refusals merge"):
        merge_refusals(key, [old, dict(new, chosen="c", passed=["c"])])
    other = _refusal(["c"], {"c": 0.5})
    other["key"]["weights_sha256"] = "v"
    with pytest.raises(ValueError, match="other weights"):
        merge_refusals(key, [old, other])
