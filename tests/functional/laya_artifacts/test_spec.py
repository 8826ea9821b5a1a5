"""`BuildSpec`: one frozen object says what to build; the decision key is computed once from it."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path
from typing import Any

import pytest

from laya_artifacts import build
from laya_artifacts.qat.finetune import QatSettings
from laya_artifacts.spec import BuildSeams, BuildSpec
from tests.conftest import GOLDENS


def test_build_artifact_takes_a_checkpoint_a_spec_an_out_dir_and_seams() -> None:
    assert list(inspect.signature(build.build_artifact).parameters) == ["checkpoint_dir", "spec", "out_dir", "seams"]
    assert {f.name for f in dataclasses.fields(BuildSeams)} == {"progress", "timer", "placement"}


def test_a_spec_is_frozen_and_holds_tuples_where_callers_hand_it_lists() -> None:
    spec = BuildSpec.of("cpu-int8", gate_cases=["a.jsonl"], candidates=["encoder"], min_speedup=0)
    assert spec.gate_cases == ("a.jsonl",) and spec.candidates == ("encoder",)
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.target = "cpu-fp32"  # type: ignore[misc]
    assert hash(spec) == hash(BuildSpec.of("cpu-int8", gate_cases=("a.jsonl",), candidates=("encoder",),
                                           min_speedup=0))


def test_the_manifest_s_record_of_a_spec_keeps_settings_not_the_builder_s_paths(tmp_path: Path) -> None:
    qat = QatSettings(steps=8, work_dir=tmp_path / "qat")
    record = BuildSpec.of("cpu-int8", goldens=tmp_path / "g.json", gate_cases=[tmp_path / "mine.jsonl"],
                          search_records=tmp_path / "records", quantization_aware=qat).record()
    assert record["goldens"] == "given" and record["gate_cases"] == ["mine.jsonl"] and record["search_records"]
    assert record["quantization_aware"]["steps"] == 8 and "work_dir" not in record["quantization_aware"]
    assert str(tmp_path) not in repr(record)


class _Stop(Exception):
    pass


@pytest.mark.slow  # the tiny checkpoint is made (and exported) once per session
def test_the_decision_key_is_computed_once_per_build(tiny_modernbert: tuple[Path, Path], tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    keys: list[dict[str, Any]] = []
    looked_up: list[dict[str, Any]] = []
    compute, find = build.decision_key, build.find_record

    def counted(*a: Any, **k: Any) -> dict[str, Any]:
        keys.append(compute(*a, **k))
        return keys[-1]

    def seen(key: dict[str, Any], *a: Any, **k: Any) -> Any:
        looked_up.append(key)
        return find(key, *a, **k)

    def staged(*a: Any, **k: Any) -> Any:
        raise _Stop   # the key is all this test wants: no export

    monkeypatch.setattr(build, "decision_key", counted)
    monkeypatch.setattr(build, "find_record", seen)
    monkeypatch.setattr(build, "_staged", staged)
    spec = BuildSpec.of("cpu-int8", goldens=GOLDENS / "tiny-modernbert" / "goldens.json",
                        candidates=["encoder"], search_records=tmp_path / "records")
    with pytest.raises(_Stop):
        build.build_artifact(tiny_modernbert[0], spec, tmp_path / "a")
    assert len(keys) == 1 and looked_up == keys
