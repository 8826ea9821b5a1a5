"""Hand-written cases as training data (stage 14): real, varied text next to the generated worlds.

Past stage 10, more generated text raised synthetic accuracy and not the hand-written sets', and
the gap grew with how far a set's wording was from the generator's (research/STAGES.md).
The six sets written to judge earlier stages are the only text here that no template produced, so
a stage may train on some of them and be judged on a set it never saw.

Each repeat of a case is one more training row per question; a choice question's options are
shuffled anew in every repeat (the generator shuffles its own), and a score's target puts a little
mass on the neighbouring levels, as the generator's do. `case_labels` gives stage 15's
teacher-labelled questions about these texts their inventory; neither stage-15 candidate shipped.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from .examples import Example, ordinal_target


def shuffled_choice(example: Example, rng: random.Random) -> Example:
    """The same choice question with its options (and target) in a new order."""
    labels = list(example.question["crit"])
    order = list(range(len(labels)))
    rng.shuffle(order)
    crit = {labels[i]: example.question["crit"][labels[i]] for i in order}
    return Example(example.state, dict(example.question, crit=crit), [example.target[i] for i in order],
                   example.domain)


def softened_score(example: Example) -> Example:
    """A score question's one-hot target spread a little onto its neighbouring levels."""
    k = len(example.target)
    level = example.target.index(max(example.target))
    return Example(example.state, example.question, ordinal_target(k, level / (k - 1)), example.domain)


def case_labels(cases: Sequence[dict[str, Any]]) -> list[tuple[str, str | None]]:
    """Every choice label of the cases with its description (the first one met), in order met."""
    seen: dict[str, str | None] = {}
    for case in cases:
        for question in case["questions"].values():
            if question["type"] == "choice":
                for label, description in question["criteria"].items():
                    seen.setdefault(label, description)
    return list(seen.items())


def hand_written_examples(examples: Sequence[Example], repeats: int, seed: int) -> list[Example]:
    """`repeats` training rows for each hand-written question, in a seeded order of options."""
    if repeats < 1:
        raise ValueError("hand-written repeats must be at least 1, got %d" % repeats)
    rng = random.Random(seed)
    out: list[Any] = []
    for _ in range(repeats):
        for example in examples:
            kind = example.question["t"]
            if kind == "choice":
                out.append(shuffled_choice(example, rng))
            elif kind == "score":
                out.append(softened_score(example))
            else:
                out.append(example)
    return out
