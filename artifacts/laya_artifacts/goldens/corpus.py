"""The gate corpus: the question rows every build records with upstream and gates its artifact on.

Three parts, concatenated in this order:

- **composed rows**: each text of ``gate_data/texts.jsonl`` (support tickets, e-mails, conversations,
  JSON states, reviews, forum posts, HR, travel and finance messages, in a dozen languages, from a
  couple of characters to well past a checkpoint's ``max_len``) asked 3-6 questions drawn from
  ``gate_data/questions.jsonl`` (every type, 2-50 options, structured instructions, numeric and bool
  labels, noul labels and criteria, questions written in the text's language) that fit its domains,
  some of them with a permuted ``option_order``. The draw is seeded by the text's id, so the corpus is
  the same on every machine and a new text does not reshuffle the others;
- **edge cases**: `edge_cases.golden_inputs()`, the fixed set the gate had before the corpus;
- **user rows**: ``--gate-cases FILE.jsonl``, one case per line (`read_gate_cases`).

One *case* is one state with its questions (one request); one *row* is one (state, question) pair,
which is what the gate measures. Every case belongs to one split, decided once from its id
(`split_for`): ``selection`` (~60%) is what a build may look at while it chooses a configuration,
``confirmation`` (~40%) is checked once, on the chosen one. Splitting by case keeps every state in
one split, so confirmation never sees a text that selection was tuned on.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from laya_artifacts.errors import GateCasesError
from laya_serverless.gate.splits import SPLITS, split_for

CORPUS_VERSION = 1
DATA_DIR = Path(__file__).resolve().parent / "gate_data"
TEXTS_FILE, QUESTIONS_FILE = "texts.jsonl", "questions.jsonl"
# The salt was picked once, before any measurement, among /1../7 for the split closest to 60/40 rows.
_DRAW_SALT = "laya-gate-corpus/%d:" % CORPUS_VERSION
CASE_KEYS = ("id", "state", "questions", "controls", "split", "lang")
CONTROL_KEYS = ("max_len", "head_max_len")
PERMUTED_SHARE = 0.2  # of the composed choice/score questions with >= 3 options


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _applies(question: dict[str, Any], text: dict[str, Any]) -> bool:
    domains = question["applies"]
    if "*" not in domains and not set(domains) & set(text["domains"]):
        return False
    return "langs" not in question or text["lang"] in question["langs"]


def _draw_questions(text: dict[str, Any], bank: list[dict[str, Any]]) -> dict[str, Any]:
    """3-6 questions for one text: its own-language ones, then domain questions, then general ones."""
    rng = random.Random(_DRAW_SALT + text["id"])
    fitting = [q for q in bank if _applies(q, text)]
    own_language = [q for q in fitting if "langs" in q]
    domain = [q for q in fitting if "langs" not in q and "*" not in q["applies"]]
    general = [q for q in fitting if "langs" not in q and "*" in q["applies"]]
    wanted = rng.choice((3, 4, 4, 5, 5, 6))
    picked = rng.sample(own_language, min(len(own_language), 1 + (wanted > 4)))
    picked += rng.sample(domain, min(len(domain), max(0, (wanted - len(picked) + 1) // 2)))
    for pool in (general, domain):
        rest = [q for q in pool if q not in picked]
        picked += rng.sample(rest, max(0, min(len(rest), wanted - len(picked))))
    questions: dict[str, Any] = {}
    for entry in picked[:wanted]:
        definition = json.loads(json.dumps(entry["question"]))
        n = 2 if definition["type"] == "noul" else len(definition["criteria"])
        if definition["type"] != "noul" and n >= 3 and rng.random() < PERMUTED_SHARE:
            definition["option_order"] = rng.sample(range(n), n)
        questions[entry["id"]] = definition
    return questions


def composed_cases(data_dir: Path = DATA_DIR) -> list[dict[str, Any]]:
    """One case per text of the bank, with the questions drawn for it."""
    bank = _read_jsonl(data_dir / QUESTIONS_FILE)
    cases = []
    for text in _read_jsonl(data_dir / TEXTS_FILE):
        case_id = "corpus:" + text["id"]
        cases.append({"id": case_id, "source": text["source"], "lang": text["lang"], "split": split_for(case_id),
                      "state": text["state"], "questions": _draw_questions(text, bank),
                      "controls": dict(text.get("controls", {}))})
    return cases


def edge_cases() -> list[dict[str, Any]]:
    from laya_artifacts.goldens.edge_cases import golden_inputs

    cases = []
    for case in golden_inputs():
        case_id = "edge:" + case["id"]
        cases.append({"id": case_id, "source": "edge-case", "lang": "mixed", "split": split_for(case_id),
                      "state": case["state"], "questions": case["questions"], "controls": dict(case["controls"])})
    return cases


def builtin_cases() -> list[dict[str, Any]]:
    """The corpus that ships with the package: composed rows, then the edge cases."""
    return composed_cases() + edge_cases()


def _check_controls(controls: Any) -> str | None:
    if not isinstance(controls, dict):
        return "'controls' must be an object with max_len and/or head_max_len, got %s" % type(controls).__name__
    unknown = sorted(set(controls) - set(CONTROL_KEYS))
    if unknown:
        return "'controls' takes only %s, got %s" % (" and ".join(CONTROL_KEYS), ", ".join(map(repr, unknown)))
    for key, value in controls.items():
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            return "controls.%s must be a positive integer, got %r" % (key, value)
    return None


def _check_case(raw: Any) -> str | None:
    """Why one parsed line is not a usable gate case, or None."""
    from laya_serverless.core.questions import parse_questions
    from laya_serverless.errors import QuestionError

    if not isinstance(raw, dict):
        return "expected a JSON object, got %s" % type(raw).__name__
    unknown = sorted(set(raw) - set(CASE_KEYS))
    if unknown:
        return "unknown key(s) %s; a gate case takes %s" % (", ".join(map(repr, unknown)), ", ".join(CASE_KEYS))
    if "state" not in raw or raw["state"] is None:
        return "no 'state' (a string, an object, or a list of conversation turns)"
    if not isinstance(raw["state"], str | dict | list):
        return "'state' must be a string, an object or a list, got %s" % type(raw["state"]).__name__
    if "questions" not in raw:
        return "no 'questions' (an object of question id -> definition)"
    if isinstance(raw["questions"], dict) and not raw["questions"]:
        return "'questions' is empty; a gate case needs at least one question"
    try:
        parse_questions(raw["questions"])
    except QuestionError as exc:
        return str(exc)
    problem = _check_controls(raw.get("controls", {}))
    if problem:
        return problem
    if "split" in raw and raw["split"] not in SPLITS:
        return "'split' must be one of %s, got %r" % (", ".join(SPLITS), raw["split"])
    if "id" in raw and (not isinstance(raw["id"], str) or not raw["id"].strip()):
        return "'id' must be a non-empty string, got %r" % (raw["id"],)
    if "lang" in raw and not isinstance(raw["lang"], str):
        return "'lang' must be a string such as 'en', got %r" % (raw["lang"],)
    return None


def content_id(case: dict[str, Any]) -> str:
    """A user case's id when it brings none: from its content, so moving lines keeps its split."""
    canonical = json.dumps([case["state"], case["questions"], case.get("controls", {})], sort_keys=True,
                           ensure_ascii=False, separators=(",", ":"))
    return "user:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


def read_gate_cases(path: str | Path) -> list[dict[str, Any]]:
    """The cases of one user file, every bad line refused at once as ``FILE:LINE: reason``."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise GateCasesError("%s: cannot read gate cases: %s" % (path, exc)) from exc
    cases, problems = [], []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.append("%s:%d: not JSON: %s" % (path, number, exc))
            continue
        problem = _check_case(raw)
        if problem:
            problems.append("%s:%d: %s" % (path, number, problem))
            continue
        case_id = raw.get("id") or content_id(raw)
        cases.append({"id": case_id, "source": "user:%s" % path.name, "lang": raw.get("lang", "unknown"),
                      "split": raw.get("split") or split_for(case_id), "state": raw["state"],
                      "questions": raw["questions"], "controls": dict(raw.get("controls", {})),
                      "origin": "%s:%d" % (path, number)})
    if not cases and not problems:
        problems.append("%s: no gate cases (one JSON object per line)" % path)
    if problems:
        raise GateCasesError("refused %d line(s) of gate cases:\n  %s" % (len(problems), "\n  ".join(problems)))
    return cases


def gate_corpus(gate_cases: Iterable[str | Path] = (), builtin: bool = True) -> list[dict[str, Any]]:
    """The built-in corpus plus every user file; an id used twice is refused (with where)."""
    cases = builtin_cases() if builtin else []
    problems = []
    for path in gate_cases:
        cases.extend(read_gate_cases(path))
    seen: dict[str, str] = {}
    for case in cases:
        where = case.get("origin", case["source"])
        if case["id"] in seen:
            problems.append("%s: case id %r is already used by %s" % (where, case["id"], seen[case["id"]]))
        seen.setdefault(case["id"], where)
    if problems:
        raise GateCasesError("refused %d gate case(s):\n  %s" % (len(problems), "\n  ".join(problems)))
    return cases


def corpus_inputs(case: dict[str, Any]) -> dict[str, Any]:
    return {k: case[k] for k in ("id", "split", "state", "questions", "controls")}


def corpus_sha256(cases: Sequence[dict[str, Any]]) -> str:
    """The hash of what the gate asks: ids, splits, states, questions and controls, in id order."""
    canonical = json.dumps(sorted((corpus_inputs(c) for c in cases), key=lambda c: c["id"]), sort_keys=True,
                           ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def option_count(definition: dict[str, Any]) -> int:
    return 2 if definition["type"] == "noul" else len(definition["criteria"])


def _options_bucket(n: int) -> str:
    for bound, name in ((2, "2"), (5, "3-5"), (10, "6-10"), (20, "11-20")):
        if n <= bound:
            return name
    return "21-50" if n <= 50 else "51+"


def summarize(cases: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Counts of cases and question rows by split, type, source, language and option count."""
    rows = [(case, definition) for case in cases for definition in case["questions"].values()]
    return {
        "cases": len(cases),
        "rows": len(rows),
        "cases_by_split": dict(Counter(c["split"] for c in cases)),
        "rows_by_split": dict(Counter(c["split"] for c, _ in rows)),
        "rows_by_type": dict(Counter(d["type"] for _, d in rows)),
        "rows_by_source": dict(Counter(c["source"] for c, _ in rows)),
        "rows_by_language": dict(Counter(c.get("lang", "unknown") for c, _ in rows)),
        "rows_by_options": dict(Counter(_options_bucket(option_count(d)) for _, d in rows)),
        "rows_with_option_order": sum(1 for _, d in rows if "option_order" in d),
        "rows_with_structured_instructions": sum(1 for _, d in rows if not isinstance(d["instructions"], str)),
    }


__all__ = ["CORPUS_VERSION", "GateCasesError", "SPLITS", "builtin_cases", "corpus_sha256", "gate_corpus",
           "read_gate_cases", "split_for", "summarize"]
