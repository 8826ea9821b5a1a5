"""The quantization-aware fine-tune's data: the gate's selection cases, and states generated from them.

What a fine-tune may read is what the precision search may read: the **selection** split of the goldens
(`parity.row_split`). Confirmation cases, their texts, and the demo's hand-written held-out sets are never
read here. Generated cases vary the selection states (a contiguous part of a text, some keys of a JSON
state, the newest turns of a conversation, two selection texts joined) and ask them questions drawn anew
from the gate's question bank, so the student sees more (state, question) pairs than the gate rows alone,
all from text the search was already allowed to see. The draw is seeded: same goldens and seed, same data.

Labels are not needed: the teacher (upstream FP32 of the original checkpoint) answers every case.
"""

from __future__ import annotations

import json
import random
import re
import zlib
from typing import Any

from laya_artifacts.goldens.corpus import DATA_DIR, QUESTIONS_FILE, TEXTS_FILE, _applies, _read_jsonl
from laya_serverless.gate.replay import row_split

SELECTION = "selection"
DATA_VERSION = 1
GENERATED_PER_CASE = 3
GENERATED_PREFIX = "qat:"
_SALT = "laya-qat-data/%d:" % DATA_VERSION


def selection_cases(goldens: dict[str, Any]) -> list[dict[str, Any]]:
    """The goldens' selection cases as (id, state, questions, controls), refused questions left out."""
    cases = []
    for row in goldens["rows"]:
        if row_split(row) != SELECTION:
            continue
        refused = row.get("refused", {})
        questions = {qid: q for qid, q in row["questions"].items() if qid not in refused}
        if questions:
            cases.append({"id": row["id"], "state": row["state"], "questions": questions,
                          "controls": dict(row.get("controls") or {}), "origin": "selection"})
    return cases


def _sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?。！？])\s+", text) if s.strip()]


def _vary_state(state: Any, rng: random.Random) -> Any:
    """A part of a selection state: some of its sentences, keys or (newest) turns."""
    if isinstance(state, str):
        parts = _sentences(state)
        if len(parts) >= 2:
            n = rng.randint(1, max(1, len(parts) - 1))
            start = rng.randint(0, len(parts) - n)
            return " ".join(parts[start:start + n])
        words = state.split()
        return " ".join(words[: max(1, len(words) // 2)]) if len(words) > 1 else state
    if isinstance(state, dict) and len(state) > 1:
        keys = sorted(state, key=str)
        kept = rng.sample(keys, rng.randint(1, len(keys) - 1))
        return {k: state[k] for k in keys if k in kept}
    if isinstance(state, list) and len(state) > 1:
        return state[-rng.randint(1, len(state) - 1):]
    return state


def _questions(text: dict[str, Any], bank: list[dict[str, Any]], rng: random.Random) -> dict[str, Any]:
    fitting = [q for q in bank if _applies(q, text)]
    picked = rng.sample(fitting, min(len(fitting), rng.choice((2, 3, 4))))
    questions: dict[str, Any] = {}
    for entry in picked:
        definition = json.loads(json.dumps(entry["question"]))
        n = 2 if definition["type"] == "noul" else len(definition["criteria"])
        if definition["type"] != "noul" and n >= 3 and rng.random() < 0.2:
            definition["option_order"] = rng.sample(range(n), n)
        questions[entry["id"]] = definition
    return questions


def generated_cases(selection: list[dict[str, Any]], seed: int,
                    per_case: int = GENERATED_PER_CASE) -> list[dict[str, Any]]:
    """`per_case` new cases per composed selection case: varied states, questions drawn anew from the bank."""
    bank = _read_jsonl(DATA_DIR / QUESTIONS_FILE)
    texts = {"corpus:" + t["id"]: t for t in _read_jsonl(DATA_DIR / TEXTS_FILE)}
    composed = [c for c in selection if c["id"] in texts]
    strings = [c for c in composed if isinstance(c["state"], str)]
    out = []
    for case in composed:
        text = texts[case["id"]]
        for variant in range(per_case):
            rng = random.Random("%s%d:%s:%d" % (_SALT, seed, case["id"], variant))
            if variant == 0:
                state = case["state"]
            elif variant == 2 and isinstance(case["state"], str) and len(strings) > 1:
                other = rng.choice([c for c in strings if c["id"] != case["id"]])
                state = case["state"] + "\n\n" + other["state"]
            else:
                state = _vary_state(case["state"], rng)
            out.append({"id": "%s%s:%d" % (GENERATED_PREFIX, case["id"], variant), "state": state,
                        "questions": _questions(text, bank, rng), "controls": dict(case["controls"]),
                        "origin": "generated"})
    return out


def held_out(case_id: str, every: int) -> bool:
    """One generated case in `every` (by a hash of its id, so the same ones each run) is measured, never trained on."""
    return every > 0 and case_id.startswith(GENERATED_PREFIX) and zlib.crc32(case_id.encode()) % every == 0


def training_cases(goldens: dict[str, Any], seed: int,
                   per_case: int = GENERATED_PER_CASE) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(selection cases + generated ones, what the manifest says of them)."""
    selection = selection_cases(goldens)
    generated = generated_cases(selection, seed, per_case)
    info = {"version": DATA_VERSION, "seed": seed, "selection_cases": len(selection),
            "generated_cases": len(generated), "generated_per_selection_text": per_case,
            "corpus_sha256": (goldens.get("corpus") or {}).get("sha256"),
            "never_read": "the confirmation split, its texts, and held-out evaluation sets"}
    return selection + generated, info
