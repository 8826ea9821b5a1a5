"""The gate corpus: what it holds, how it splits, and how users' rows join it or are refused (no model)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from laya_artifacts.cli import main as cli
from laya_artifacts.goldens.corpus import (
    SPLITS,
    GateCasesError,
    builtin_cases,
    corpus_sha256,
    gate_corpus,
    option_count,
    read_gate_cases,
    split_for,
    summarize,
)
from laya_artifacts.goldens.record import (
    SHIPPED_GOLDENS,
    load_goldens,
    recorded_goldens,
    shipped_goldens,
    weights_sha256,
)
from laya_serverless.core.questions import parse_questions
from tests.conftest import GOLDENS

KINDS = ("tiny-modernbert", "minilm")


def _rows(cases):
    return [(case, definition) for case in cases for definition in case["questions"].values()]


def test_the_corpus_has_500_rows_of_every_type_option_count_and_many_sources_and_languages() -> None:
    cases = builtin_cases()
    rows = _rows(cases)
    summary = summarize(cases)
    assert summary["rows"] == len(rows) >= 500 and summary["cases"] >= 120
    assert all(summary["rows_by_type"][t] >= 60 for t in ("choice", "score", "noul")), summary["rows_by_type"]
    counts = {option_count(d) for _, d in rows}
    assert {2, 3, 4, 5, 10, 20, 30, 50} <= counts and len([n for n in counts if 2 <= n <= 50]) >= 12
    nouls = [d for _, d in rows if d["type"] == "noul"]
    assert sum("labels" in d for d in nouls) >= 10 and sum(isinstance(d.get("criteria"), dict) for d in nouls) >= 10
    assert any(isinstance(d["instructions"], dict) for _, d in rows)
    assert any(isinstance(d["instructions"], list) for _, d in rows)
    labels = [label for _, d in rows if d["type"] == "choice" and isinstance(d["criteria"], list)
              for label in d["criteria"]]
    assert any(label is True for label in labels) and any(type(label) is int for label in labels)
    assert summary["rows_with_option_order"] >= 40
    assert {"support-ticket", "email", "conversation", "json-ticket", "review", "forum-post", "edge-case"} \
        <= set(summary["rows_by_source"])
    languages = summary["rows_by_language"]
    assert all(languages.get(lang, 0) >= 10 for lang in ("fr", "de", "es", "pt")), languages
    assert sum(languages.get(lang, 0) for lang in ("ru", "ja", "zh", "ar", "el", "ko")) >= 30
    assert any(isinstance(case["state"], list) for case in cases) and any(isinstance(case["state"], dict)
                                                                         for case in cases)
    for case in cases:  # every question is one the runtime accepts
        parse_questions(case["questions"])


@pytest.mark.parametrize("kind", KINDS)
def test_states_run_to_and_past_max_len(kind: str) -> None:
    goldens = load_goldens(GOLDENS / kind)
    tokens = [row["state_tokens"] for row in goldens["rows"] if "state_tokens" in row]
    max_len = goldens["reference"]["max_len"]
    assert sum(t > max_len for t in tokens) >= 15 and sum(t > 512 for t in tokens) >= 5
    assert sum(t <= 32 for t in tokens) >= 15
    if kind == "minilm":  # the demo's tokenizer: its max_len is 256
        assert sum(t > 256 for t in tokens) >= 15 and sum(128 < t <= 256 for t in tokens) >= 5
    conversations = [row for row in goldens["rows"] if isinstance(row["state"], list) and row.get("truncated")]
    assert conversations, "a conversation longer than max_len (left-truncated upstream)"


def test_the_corpus_is_deterministic_and_the_committed_goldens_record_it() -> None:
    first, second = builtin_cases(), builtin_cases()
    assert first == second and corpus_sha256(first) == corpus_sha256(second)
    for kind in KINDS:
        goldens = load_goldens(GOLDENS / kind)
        assert goldens["format"] == 2
        assert goldens["corpus"]["sha256"] == corpus_sha256(first), (
            "the corpus changed: re-record goldens/%s with `laya-artifacts goldens`" % kind)
        assert corpus_sha256(goldens["rows"]) == goldens["corpus"]["sha256"]
        assert goldens["corpus"]["summary"]["rows_by_type"] == summarize(first)["rows_by_type"]
    # The demo's goldens ship with the package so that `make serve` records nothing: a stale file would be
    # skipped (recorded again, a minute slower), so it must follow the corpus too.
    [shipped] = sorted(SHIPPED_GOLDENS.glob("*.json"))
    assert load_goldens(shipped)["corpus"]["sha256"] == corpus_sha256(first), (
        "the corpus changed: re-record %s (docs/artifacts.md#goldens)" % shipped)


def test_each_case_lands_in_one_split_by_its_id_alone() -> None:
    cases = builtin_cases()
    assert all(case["split"] == split_for(case["id"]) in SPLITS for case in cases)
    selection = {c["id"] for c in cases if c["split"] == "selection"}
    confirmation = {c["id"] for c in cases if c["split"] == "confirmation"}
    assert selection and confirmation and not selection & confirmation
    assert len(selection) + len(confirmation) == len(cases) == len({c["id"] for c in cases})
    rows = summarize(cases)["rows_by_split"]
    assert 0.55 <= rows["selection"] / (rows["selection"] + rows["confirmation"]) <= 0.65
    # the split of a case does not depend on the other cases, the run or the machine
    assert split_for("corpus:ticket-double-charge") == split_for("corpus:ticket-double-charge")
    assert {split_for("user:%d" % i) for i in range(50)} == set(SPLITS)
    types = {s: {d["type"] for c, d in _rows(cases) if c["split"] == s} for s in SPLITS}
    assert types["selection"] == types["confirmation"] == {"choice", "score", "noul"}


def _write(path: Path, lines: list[object]) -> Path:
    path.write_text("\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines) + "\n",
                    encoding="utf-8")
    return path


_QUESTION = {"refund": {"type": "noul", "instructions": "Is a refund requested?"}}


def test_user_rows_land_in_the_corpus_with_their_split_and_a_content_id(tmp_path: Path) -> None:
    path = _write(tmp_path / "mine.jsonl", [
        {"id": "mine-1", "state": "Where is my parcel?", "questions": _QUESTION, "split": "confirmation"},
        "",
        {"state": {"ticket": "charged twice"}, "questions": _QUESTION, "controls": {"max_len": 64}, "lang": "en"},
    ])
    corpus = gate_corpus([path])
    assert len(corpus) == len(builtin_cases()) + 2
    mine = {c["id"]: c for c in corpus if c["source"] == "user:mine.jsonl"}
    assert mine["mine-1"]["split"] == "confirmation" and mine["mine-1"]["origin"].endswith("mine.jsonl:1")
    (other,) = [c for c in mine.values() if c["id"] != "mine-1"]
    assert other["id"].startswith("user:") and other["split"] == split_for(other["id"])
    assert other["controls"] == {"max_len": 64} and other["origin"].endswith(":3")
    moved = _write(tmp_path / "moved.jsonl", [
        {"state": {"ticket": "charged twice"}, "questions": _QUESTION, "controls": {"max_len": 64}, "lang": "en"}])
    assert read_gate_cases(moved)[0]["id"] == other["id"]  # the same content keeps its id, hence its split
    assert corpus_sha256(corpus) != corpus_sha256(builtin_cases())


def test_malformed_user_lines_are_refused_with_file_line_and_reason(tmp_path: Path) -> None:
    path = _write(tmp_path / "bad.jsonl", [
        {"id": "ok", "state": "fine", "questions": _QUESTION},
        "{not json",
        ["a", "list"],
        {"questions": _QUESTION},
        {"state": "x", "questions": {"q": {"type": "maybe", "instructions": "?"}}},
        {"state": "x", "questions": _QUESTION, "controls": {"max_len": 0}},
        {"state": "x", "questions": _QUESTION, "controls": {"temperature": 2}},
        {"state": "x", "questions": _QUESTION, "split": "training"},
        {"state": "x", "question": _QUESTION},
        {"state": "x", "questions": {}},
    ])
    with pytest.raises(GateCasesError) as refused:
        read_gate_cases(path)
    message = str(refused.value)
    assert "refused 9 line(s)" in message
    expected = ((2, "not JSON"), (3, "expected a JSON object"), (4, "no 'state'"), (5, "question 'q': unknown type"),
                (6, "controls.max_len must be a positive integer"), (7, "'controls' takes only"),
                (8, "'split' must be one of"), (9, "unknown key(s) 'question'"), (10, "'questions' is empty"))
    for line, reason in expected:
        assert "%s:%d: %s" % (path, line, reason) in message, (line, message)
    assert "bad.jsonl:1:" not in message
    twice = _write(tmp_path / "twice.jsonl", [{"id": "corpus:tiny-ok", "state": "x", "questions": _QUESTION}])
    with pytest.raises(GateCasesError, match="twice.jsonl:1: case id 'corpus:tiny-ok' is already used"):
        gate_corpus([twice])


def test_the_cli_refuses_bad_gate_cases_before_touching_the_checkpoint(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    bad = _write(tmp_path / "bad.jsonl", [{"state": "x", "questions": _QUESTION}, "{"])
    assert cli(["build", str(tmp_path / "no-such-checkpoint"), "--gate-cases", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "%s:2: not JSON" % bad in err and "does not exist" not in err
    assert cli(["goldens", str(tmp_path / "no-such-checkpoint"), "--gate-cases", str(bad), "--out",
                str(tmp_path / "g")]) == 2
    assert "%s:2: not JSON" % bad in capsys.readouterr().err and not (tmp_path / "g").exists()


def _fake_checkpoint(directory: Path, weights: bytes) -> Path:
    directory.mkdir(parents=True)
    (directory / "model.safetensors").write_bytes(weights)
    return directory


def test_a_shipped_golden_file_is_used_only_for_its_weights_and_today_s_corpus(tmp_path: Path) -> None:
    checkpoint = _fake_checkpoint(tmp_path / "ckpt", b"the weights")
    weights = weights_sha256(checkpoint)
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    goldens = {"format": 2, "checkpoint": {"name": "x", "weights_sha256": weights},
               "reference": {"laya": "0.4.15", "torch": "2.13.0+cpu", "cpu": "some CPU"},
               "corpus": {"sha256": corpus_sha256(builtin_cases())}, "rows": []}
    (shipped / ("%s.json" % weights[:16])).write_text(json.dumps(goldens))
    assert shipped_goldens(checkpoint, shipped) == shipped / ("%s.json" % weights[:16])
    said: list[str] = []
    path = recorded_goldens(checkpoint, "x", tmp_path / "corpus", progress=said.append, shipped=shipped)
    assert load_goldens(path) == goldens and "using the goldens shipped for these weights" in said[0]
    # other weights, or the same weights on another corpus version: not these goldens
    assert shipped_goldens(_fake_checkpoint(tmp_path / "other", b"other weights"), shipped) is None
    goldens["corpus"]["sha256"] = "0" * 64
    (shipped / ("%s.json" % weights[:16])).write_text(json.dumps(goldens))
    assert shipped_goldens(checkpoint, shipped) is None
