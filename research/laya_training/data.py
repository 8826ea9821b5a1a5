"""The seeded synthetic generator the demo checkpoint's decision head is trained on.

Each example is a small "world" drawn first (a ticket's topic, urgency, tone, whether the
customer wants a refund or threatens to leave; a review's star rating; a comment's moderation
class; an internal request's department), then rendered as text — plain, JSON or a conversation
— and asked about with one question whose answer follows from the world. Label names,
descriptions, scales, instructions and option order are all drawn, so the head has to match
option text against the state rather than memorise label positions.

Examples are in upstream's internal question form (`{"t", "ins", "crit"}`) with a target
distribution over the options in `crit` order. Same seed, same examples.

The worlds of each version are in `data_v1` .. `data_v5`; each version module builds its
`DOMAINS` (maker, weight) on the previous one's, and this module only picks a version's and draws.
"""

from __future__ import annotations

import random

from . import data_v1, data_v2, data_v3, data_v4, data_v5
from .examples import Example

VERSIONS = {1: data_v1.DOMAINS, 2: data_v2.DOMAINS, 3: data_v3.DOMAINS, 4: data_v4.DOMAINS, 5: data_v5.DOMAINS}
KNOWN_VERSIONS = tuple(VERSIONS)


def domains(version: int) -> tuple:
    """The (maker, weight) pairs of a generator version."""
    if version not in KNOWN_VERSIONS:
        raise ValueError("unknown generator version %r; known: %s" % (version, list(KNOWN_VERSIONS)))
    return VERSIONS[version]


def generate(n_worlds: int, seed: int, version: int = 1) -> list[Example]:
    """Examples from `n_worlds` drawn worlds (1-4 questions each); deterministic in `seed` and `version`."""
    pairs = domains(version)
    rng = random.Random(seed)
    makers = [maker for maker, weight in pairs for _ in range(weight)]
    examples: list[Example] = []
    for _ in range(n_worlds):
        examples.extend(rng.choice(makers)(rng))
    return examples
