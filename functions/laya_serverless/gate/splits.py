"""The gate corpus's schema as the replay reads it: the two splits, a case's split from its id, token digests.

Shared by the build side (which records the corpus) and the torch-free replay (which checks it), so the
split of a row is decided in one place.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

SPLITS = ("selection", "confirmation")
SELECTION_SHARE = 0.6
_SPLIT_SALT = "laya-gate-split/7:"


def split_for(case_id: str) -> str:
    """The split of a case, from its id alone: stable across machines, runs and corpus growth."""
    digest = hashlib.sha256((_SPLIT_SALT + case_id).encode("utf-8")).digest()
    return SPLITS[0] if int.from_bytes(digest[:8], "big") / 2.0 ** 64 < SELECTION_SHARE else SPLITS[1]


def token_digest(ids: Sequence[int]) -> str:
    """What a golden row keeps of its token ids: enough to prove them identical, at 16 bytes a row."""
    return hashlib.sha256(json.dumps([int(i) for i in ids]).encode()).hexdigest()[:32]


__all__ = ["SELECTION_SHARE", "SPLITS", "split_for", "token_digest"]
