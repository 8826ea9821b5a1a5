"""`laya-artifacts probe --arch x86_64 --cpu haswell`: the built x86_64 Lambda package (`make layer`), run by its
CPython 3.12 as an AVX2-only CPU (qemu-x86_64), answers a case file; the arm64 path is tests/arm64 (make test-arm64).
Two short cases and two refused ones: emulation is slow (fidelity, never timing)."""

from __future__ import annotations

import json
import platform
from pathlib import Path
from typing import Any

import pytest

from laya_artifacts.cli import main
from laya_artifacts.package import probe
from tests.conftest import golden_slice

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(platform.machine() != "x86_64", reason="emulates an x86 CPU class")]


def _numbers(answer: Any) -> list[float]:
    if isinstance(answer, dict):
        return [x for key in sorted(answer) for x in _numbers(answer[key])]
    return [float(answer)] if isinstance(answer, int | float) and not isinstance(answer, bool) else []


def test_the_x86_package_answers_as_an_avx2_cpu_as_this_machine_does(tiny_modernbert: tuple[Path, Path],
                                                                     tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from laya_serverless import Decider

    probe.package_dirs("x86_64")   # `make test` builds it first (the `layer` step); its absence fails here
    rows = sorted(golden_slice("tiny-modernbert", keep_case=lambda _i, row: row["id"].startswith("edge:"))["rows"],
                  key=lambda r: (max(r.get("n_tokens") or [0]), r["id"]))[:2]
    lines = [{k: row[k] for k in ("id", "state", "questions", "controls")} for row in rows]
    lines += [{"id": "no-state", "questions": rows[0]["questions"]},
              {"id": "bad-budget", "state": "hi", "questions": rows[0]["questions"], "controls": {"max_len": -1}}]
    cases, out = tmp_path / "cases.jsonl", tmp_path / "out.json"
    cases.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    assert main(["probe", "--arch", "x86_64", "--cpu", "haswell", str(tiny_modernbert[1]), "--cases", str(cases),
                 "--out", str(out)]) == 0
    said = capsys.readouterr().err
    assert "never timing" in said and "on CPython 3.12" in said and "qemu-x86_64-static -cpu Haswell" in said
    assert "int8 kernel class avx2" in said and "2 errors" in said
    answers = json.loads(out.read_text())
    assert answers["no-state"] == {"error": "KeyError: 'state'"}
    assert "max_len must be a positive integer" in answers["bad-budget"]["error"]
    native = Decider.from_artifact(tiny_modernbert[1], verify=False, threads=1)
    for line in lines[:2]:   # FP32: the emulated AVX2 CPU answers as this one, to the answers' 4 decimals
        # through JSON as the probe's answers went: option labels 1, 4.5 and False become "1", "4.5", "false"
        mine = json.loads(json.dumps(native.predict(line["state"], line["questions"], **line["controls"])))
        theirs = answers[line["id"]]
        assert set(theirs["answers"]) == set(mine["answers"]) and theirs["usage"] == mine["usage"]
        assert all(abs(a - b) <= 2e-4 for a, b in zip(_numbers(theirs["answers"]), _numbers(mine["answers"]),
                                                     strict=True))
