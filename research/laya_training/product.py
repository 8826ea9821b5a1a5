"""Choice targets from the product of two experts: the head of a finished stage and the pretrained encoder.

Measured on the shipped stage-10 head (served fp32, all four hand-written sets): the head and
MiniLM's sentence similarity miss different choice questions (on train-3 + train-4, sets C+D: 15 the
head misses and similarity gets, 18 the other way round). Adding `beta` x cosine(state, option) to the head's
log-probabilities picks the expected option far more often than either alone (C+D: 73.6% head,
70.1% similarity, 86.2% with beta 20; every set improves for beta 5-40).

The served model is upstream's `DecisionModel` and cannot run a second encoder, so the product is
distilled instead: a later stage trains on choice targets that mix the generator's answer with
this product, and on wide-label questions about the generator's own texts (labels from the
distillation inventory) that only the product labels. The teacher is the unmodified PyPI encoder.

Outcome (stage 12, research/STAGES.md): it did not carry over to the hand-written sets. On generated text the
head is already sure and right, so the product mostly echoes it; the gain needs the teacher to read
the unseen text at answer time. Kept so the experiment reproduces; no shipped stage uses it.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import torch

from .baseline import SentenceEncoder, option_text, state_text
from .distill import INSTRUCTIONS, LABEL_INVENTORY
from .examples import Example


def teacher_cosines(teacher: SentenceEncoder, examples: Sequence[Example],
                    batch_size: int = 64) -> list[list[float] | None]:
    """Cosine between each choice example's state text and each of its options ("label: description");
    None for other question types."""
    choice = [i for i, e in enumerate(examples) if e.question["t"] == "choice"]
    options = sorted({option_text(label, desc) for i in choice for label, desc in examples[i].question["crit"].items()})
    option_vectors: dict[str, Any] = {}
    for start in range(0, len(options), batch_size):
        chunk = options[start:start + batch_size]
        option_vectors.update(zip(chunk, teacher.embed(chunk), strict=True))
    out: list[list[float] | None] = [None] * len(examples)
    for start in range(0, len(choice), batch_size):
        rows = choice[start:start + batch_size]
        states = teacher.embed([state_text(examples[i].state) for i in rows])
        for i, vec in zip(rows, states, strict=True):
            crit = examples[i].question["crit"]
            out[i] = [float(option_vectors[option_text(label, desc)] @ vec) for label, desc in crit.items()]
    return out


def wide_label_questions(examples: Sequence[Example], n_questions: int, seed: int, teacher: SentenceEncoder,
                         inventory: Sequence[tuple[str, str | None]] = LABEL_INVENTORY) -> list[Example]:
    """`n_questions` choice questions about the texts of `examples` (one per distinct text, going round
    again when there are fewer texts), each offering the `inventory` label closest to the text and 1-5
    others, in a seeded order. The target is the teacher's own distribution (sharp, temperature 0.05);
    `product_targets` may relabel them."""
    rng = random.Random(seed)
    texts: dict[str, Example] = {}
    for e in examples:
        texts.setdefault(repr(e.state), e)
    pool = list(texts.values())
    rng.shuffle(pool)
    pool = [pool[i % len(pool)] for i in range(n_questions)] if pool else []
    described = teacher.embed([option_text(*item) for item in inventory])
    out = []
    for start in range(0, len(pool), 64):
        chunk = pool[start:start + 64]
        for e, vec in zip(chunk, teacher.embed([state_text(e.state) for e in chunk]), strict=True):
            sims = (described @ vec).tolist()
            best = max(range(len(sims)), key=lambda i: sims[i])
            others = [i for i in range(len(sims)) if i != best]
            offered = rng.sample(others, rng.randint(1, min(5, len(others)))) + [best]
            rng.shuffle(offered)
            with_description = rng.random() < 0.6
            crit = {inventory[i][0]: inventory[i][1] if with_description else None for i in offered}
            target = torch.softmax(torch.tensor([sims[i] for i in offered]) / 0.05, -1).tolist()
            out.append(Example(e.state, {"t": "choice", "ins": rng.choice(INSTRUCTIONS), "crit": crit},
                               target, "wide-label"))
    return out


def product_targets(head_logits: Sequence[float], cosines: Sequence[float], target: Sequence[float],
                    beta: float, weight: float) -> list[float]:
    """(1 - weight) x `target` + weight x softmax(head_logits + beta x cosines)."""
    product = torch.softmax(torch.tensor(head_logits) + beta * torch.tensor(cosines), -1)
    return ((1 - weight) * torch.tensor(target, dtype=torch.float32) + weight * product).tolist()
