"""A seeded generator of parity cases: states, question sets and per-request controls.

Covers what protocol §6 says must be token-exact: string / object / array states (left
truncation), mask-token scrubbing, structured and non-ASCII instructions and criteria, numeric
and bool labels, noul labels and mixed-case criteria keys, the 48-token option cap, head
collapse, budget overrides and their 422s, unicode and emoji, long states, 1-60 options, all
three question types mixed, and batches of mixed widths.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

WORDS = (
    "refund charged twice order invoice late shipping broken login password crash app error account "
    "cancel subscription upgrade plan urgent angry happy thanks please help support team billing "
    "technical other spam legit yes no maybe warehouse package customer agent escalate policy"
).split()
UNICODE = ["café", "naïve", "Grüße", "señor", "não", "привет", "你好世界", "こんにちは", "😀", "🚀✅",
           "e\u0301", "ß", "İstanbul", "ﬁ", "\u200b", "٣", "\t", "\n"]


@dataclass
class Case:
    states: list[Any]
    questions: dict[str, Any]
    controls: dict[str, Any] = field(default_factory=dict)
    batch_size: int | None = None


def _text(rng: random.Random, n_words: int) -> str:
    parts = []
    for _ in range(n_words):
        roll = rng.random()
        if roll < 0.08:
            parts.append(rng.choice(UNICODE))
        elif roll < 0.1:
            parts.append("[MASK]")
        elif roll < 0.13:
            parts.append(str(rng.choice([3, 42, 2.5, -1, 10**6])))
        else:
            parts.append(rng.choice(WORDS))
    return " ".join(parts)


def _state(rng: random.Random) -> Any:
    kind = rng.random()
    if kind < 0.35:
        return _text(rng, rng.choice([0, 1, 5, 12, 40]))
    if kind < 0.45:
        return _text(rng, rng.randint(300, 900))  # longer than max_len: truncation
    if kind < 0.65:
        return {
            "ticket": _text(rng, rng.randint(3, 20)),
            "priority": rng.choice([1, 2.5, 1e16, True, None]),
            "tags": [rng.choice(WORDS) for _ in range(rng.randint(0, 4))],
            "meta": {"lang": rng.choice(UNICODE), "n": rng.randint(0, 9)},
        }
    if kind < 0.9:
        turns = rng.randint(1, 60)  # long conversations must keep their newest turn
        return [{"role": rng.choice(["user", "agent"]), "content": _text(rng, rng.randint(2, 25))}
                for _ in range(turns)]
    return rng.choice([42, 3.5, True, False, "", "   ", "[MASK]", "😀" * 30])


def _instructions(rng: random.Random) -> Any:
    roll = rng.random()
    if roll < 0.6:
        return rng.choice(["Which team should handle this?", "How urgent is it?", "Is the customer angry?",
                           "Quelle équipe doit traiter ce ticket ?", "¿Es spam?", "これは緊急ですか？",
                           "Pick one [MASK] option", "Rate it"]) + " " + _text(rng, rng.randint(0, 6))
    if roll < 0.75:
        return {"task": "route the ticket", "lang": rng.choice(UNICODE), "hints": [1, 2]}
    if roll < 0.85:
        return ["classify", rng.choice(UNICODE), 3]
    if roll < 0.9:
        return rng.choice([42, 2.5])
    return _text(rng, rng.randint(60, 120))  # instructions longer than the head budget


def _description(rng: random.Random) -> Any:
    return rng.choice([
        None, "", 0, False, "refunds and charges", _text(rng, rng.randint(1, 8)),
        _text(rng, rng.randint(50, 90)),  # over the 48-token option cap
        {"desc": "structured", "examples": ["a", "b"]}, [1, 2], "contains [MASK] token",
    ])


def _labels(rng: random.Random, n: int) -> list[Any]:
    labels: list[Any] = []
    pool: list[Any] = [w for w in WORDS] + list(range(2, 40)) + [2.5, 7.25, True, "1", "é", "👍", "x y"]
    rng.shuffle(pool)
    seen: list[Any] = []
    for value in pool:
        if len(labels) == n:
            break
        if any(value == s for s in seen):  # 1, 1.0 and True collide in Python
            continue
        seen.append(value)
        labels.append(value)
    while len(labels) < n:
        labels.append("opt-%d" % len(labels))
    return labels


def _question(rng: random.Random) -> dict[str, Any]:
    qtype = rng.choice(["choice", "choice", "score", "noul"])
    q: dict[str, Any] = {"type": qtype, "instructions": _instructions(rng)}
    if qtype == "choice":
        n = rng.choice([1, 2, 3, 4, 5, 7, 11, 20, 33, 60])
        labels = _labels(rng, n)
        if rng.random() < 0.5:
            q["criteria"] = labels
        else:
            q["criteria"] = {str(label): _description(rng) for label in labels}
            n = len(q["criteria"])
    elif qtype == "score":
        n = rng.randint(1, 12)
        q["criteria"] = [rng.choice(["low", "medium", "high", 3, 2.5, {"level": "x"}, _text(rng, 3), "é"])
                         for _ in range(n)]
    else:
        n = 2
        roll = rng.random()
        if roll < 0.3:
            q["criteria"] = {rng.choice(["true", "TRUE", "True"]): _description(rng),
                             rng.choice(["false", "False", "FALSE"]): _description(rng)}
        elif roll < 0.45:
            q["criteria"] = {"true": _text(rng, 4)}
        if rng.random() < 0.3:
            q["labels"] = {"false": rng.choice(["no", " nope ", "non"]), "true": rng.choice(["yes", "oui ", "sí"])}
    if rng.random() < 0.2:
        order = list(range(n))
        rng.shuffle(order)
        q["option_order"] = order
    return q


def generate(n_cases: int, seed: int = 20261129) -> list[Case]:
    rng = random.Random(seed)
    cases = []
    for _ in range(n_cases):
        n_questions = rng.choice([1, 1, 2, 3, 4, 6])
        questions = {"q%d_%s" % (i, rng.choice(["team", "urgency", "spam", "é", "😀"])): _question(rng)
                     for i in range(n_questions)}
        n_states = rng.choice([1, 1, 1, 2, 3, 5])
        controls: dict[str, Any] = {}
        if rng.random() < 0.25:
            controls["max_len"] = rng.choice([48, 96, 128, 300, 512])
        if rng.random() < 0.25:
            controls["head_max_len"] = rng.choice([24, 48, 100, 256])
        batch_size = rng.choice([None, None, 1, 2]) if n_states > 1 else None
        cases.append(Case([_state(rng) for _ in range(n_states)], questions, controls, batch_size))
    return cases
