"""`laya-serverless job ...` on bad input fails in one line naming the file and line, the missing file, or the
server it could not reach (at the address `LAYA_PORT` gives), never with a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from laya_serverless.local_edge.cli import main
from tests.functional.threaded_server import free_port


def _one_error(capsys: pytest.CaptureFixture[str]) -> str:
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("[laya-serverless] error: "), lines
    return lines[0]


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "states.jsonl").write_text('"fine"\n\n{"ticket": "also fine"}\n{"ticket": broken}\n')
    (tmp_path / "q.json").write_text('{"churn": {"type": "noul", "instructions": "Will they leave?"}}')
    (tmp_path / "bad-q.json").write_text('{"churn": \n')
    return {name: str(tmp_path / name) for name in ("states.jsonl", "q.json", "bad-q.json", "missing.json")}


@pytest.mark.parametrize("command, words", [
    (["run", "states.jsonl", "--questions", "q.json", "--out", "out.jsonl"], "states.jsonl:4: not a JSON value"),
    (["submit", "states.jsonl", "--questions", "q.json"], "states.jsonl:4: not a JSON value"),
    (["run", "states.jsonl", "--questions", "missing.json", "--out", "out.jsonl"],
     "cannot read --questions %(missing.json)s: No such file or directory"),
    (["submit", "states.jsonl", "--questions", "bad-q.json"], "bad-q.json: not JSON"),
    (["run", "missing.json", "--questions", "q.json", "--out", "out.jsonl"], "cannot read the input"),
])
def test_a_bad_file_or_line_is_one_line_naming_it(files: dict[str, str], command: list[str], words: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["job", *[files.get(part, part) for part in command]]
    assert main(argv) == 2
    assert words % files in _one_error(capsys)


def test_no_server_is_one_line_at_the_address_laya_port_names(files: dict[str, str], monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    port = free_port()
    monkeypatch.setenv("LAYA_PORT", str(port))
    assert main(["job", "status", "some-job"]) == 2
    assert "no server answers at http://127.0.0.1:%d (Connection refused)" % port in _one_error(capsys)
    assert main(["job", "submit", files["q.json"], "--questions", files["q.json"],
                 "--url", "http://127.0.0.1:%d" % port]) == 2
    assert "start one with `laya-serverless serve`" in _one_error(capsys)
