"""The pieces every generator version shares: the example type, targets, and question and state makers.

Every maker draws from the `random.Random` it is given, in a fixed order: same seed, same examples.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Example:
    state: Any
    question: dict[str, Any]   # upstream's internal form: {"t", "ins", "crit"}
    target: list[float]        # a distribution over the options, in `crit` order
    domain: str


def sentence_case(text: str) -> str:
    """Upper-case the first letter only (str.capitalize would lower-case "VAT" and "API")."""
    return text[:1].upper() + text[1:]


def one_hot(k: int, i: int) -> list[float]:
    return [1.0 if j == i else 0.0 for j in range(k)]


def ordinal_target(k: int, x: float, spread: float = 0.35) -> list[float]:
    """Mass on the level nearest `x` (0..1) and a little on its neighbours: within one level counts."""
    centre = x * (k - 1)
    weights = [pow(2.718281828, -((j - centre) ** 2) / (2 * spread ** 2)) for j in range(k)]
    total = sum(weights)
    return [w / total for w in weights]


def choice_question(rng: random.Random, answer: str, pools: dict[str, list], instructions: list[str],
                     fallback: list[str] | None = None, k_max: int = 8) -> tuple[dict, int] | None:
    """A choice over `answer` (or its fallback) plus distractor labels; None if none applies."""
    candidates = fallback or [answer]
    others = [name for name in pools if name not in candidates]
    rng.shuffle(others)
    chosen = others[: rng.randint(1, min(k_max - 1, len(others)))]
    # Sometimes the answer's own team is missing and a fallback has to take the ticket.
    present = [c for c in candidates if c in pools]
    if len(present) > 1 and rng.random() < 0.35:
        present = present[1:]
    chosen.append(present[0])
    if "other" in pools and "other" not in chosen and rng.random() < 0.5:
        chosen.append("other")
    rng.shuffle(chosen)
    crit: dict[str, Any] = {}
    described = rng.random() < 0.7
    for name in chosen:
        label, desc = rng.choice(pools[name])
        if label in crit:
            return None
        crit[label] = desc if described else None
    winner = next(c for c in candidates if c in chosen)
    index = chosen.index(winner)
    return {"t": "choice", "ins": rng.choice(instructions), "crit": crit}, index


def noul_question(instruction: str, holds: bool) -> tuple[dict, list[float]]:
    return {"t": "noul", "ins": instruction, "crit": None}, one_hot(2, int(holds))


RESTATEMENTS = ["Is this about %s?", "Is this %s?", "Would you classify this as %s?", "Does this belong to %s?",
                "Is it a matter of %s?", "Should this be labelled %s?", "%s?"]


def restated_question(rng: random.Random, state: Any, question: dict[str, Any], index: int, domain: str) -> Example:
    """A yes/no question that names one option of a choice question (the right one half the time).

    Ties noul to the same option-versus-state matching that choice learns, with as many
    phrasings as the choice questions have labels and descriptions."""
    labels = list(question["crit"])
    picked = index if rng.random() < 0.5 else rng.choice([i for i in range(len(labels)) if i != index] or [index])
    desc = question["crit"][labels[picked]]
    named = "%s (%s)" % (labels[picked], desc) if desc and rng.random() < 0.5 else labels[picked]
    q, target = noul_question(rng.choice(RESTATEMENTS) % named, picked == index)
    return Example(state, q, target, domain + "-restated")



def render_state(rng: random.Random, text: str, kind: str) -> Any:
    """Plain text most of the time; sometimes a JSON record carrying the text and a few fields."""
    roll = rng.random()
    if roll < 0.6:
        return text
    if roll < 0.9:
        record: dict[str, Any] = {kind: text}
        if rng.random() < 0.5:
            record["customer_id"] = rng.randint(1000, 9999)
        if rng.random() < 0.4:
            record["channel"] = rng.choice(["email", "chat", "web form", "phone transcript"])
        return record
    return text

