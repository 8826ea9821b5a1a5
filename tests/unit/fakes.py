"""Small stand-ins for unit tests: a word-level tokenizer and a session that returns fixed logits."""

from __future__ import annotations

import numpy as np
from tokenizers import Tokenizer, models, pre_tokenizers

from laya_serverless.artifact.layout import DecodeConfig, SpecialTokens
from laya_serverless.core.tokenize import TextEncoder

SPECIAL = SpecialTokens(cls_id=1, sep_id=2, mask_id=3, pad_id=0, mask_text="[MASK]")
_WORDS = ["[PAD]", "[CLS]", "[SEP]", "[MASK]", "[UNK]"] + (
    "choice score noul question : which team ? billing tech other refunds charged twice i was level 0 1 2 3 "
    "low high yes no , the statement does not hold holds false true a b c d e f g h"
).split()


def word_encoder() -> TextEncoder:
    """Whitespace-and-punctuation word tokenizer: one id per word, easy to reason about in layouts."""
    vocab = {w: i for i, w in enumerate(dict.fromkeys(_WORDS))}
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                                       pre_tokenizers.Punctuation()])
    return TextEncoder(tokenizer)


def config(**overrides: object) -> DecodeConfig:
    values: dict[str, object] = {"special": SPECIAL, "max_len": 64, "head_max_len": 32}
    values.update(overrides)
    return DecodeConfig(**values)  # type: ignore[arg-type]


class FixedSession:
    """Returns the same logits row for every row of a pass (masked columns at -1e4, like the graph)."""

    def __init__(self, logits: list[float], act_logits: list[float] | None = None) -> None:
        self.logits = np.asarray(logits, dtype=np.float32)
        self.act_logits = np.asarray(act_logits or [0.0, 0.0, 0.0], dtype=np.float32)
        self.calls: list[dict[str, np.ndarray]] = []

    def run(self, feeds: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        self.calls.append(feeds)
        mask = feeds["marker_mask"]
        logits = np.full(mask.shape, -1e4, dtype=np.float32)
        for r in range(mask.shape[0]):
            k = int(mask[r].sum())
            logits[r, :k] = self.logits[:k]
        return logits, np.tile(self.act_logits, (mask.shape[0], 1))


class RowSession:
    """Logits that depend on each row's own tokens (never on the pass it shares or its padding), so answers
    differ from state to state and any mix-up of rows, shards or indices shows. `poison` token ids fail a pass."""

    def __init__(self, poison: tuple[int, ...] = ()) -> None:
        self.poison = poison
        self.passes = 0

    def run(self, feeds: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        from laya_serverless.errors import InferenceError

        self.passes += 1
        ids, attention, mask = feeds["input_ids"], feeds["attention_mask"], feeds["marker_mask"]
        logits = np.full(mask.shape, -1e4, dtype=np.float32)
        act = np.zeros((mask.shape[0], 3), dtype=np.float32)
        for r in range(mask.shape[0]):
            row = ids[r][attention[r] == 1]
            if any(int(t) in self.poison for t in row):
                raise InferenceError("poisoned row")
            seed = int(row.sum())
            k = int(mask[r].sum())
            logits[r, :k] = [((seed * (j + 3)) % 11) / 3.0 for j in range(k)]
            act[r] = [(seed % 5) / 4.0, 0.0, ((seed // 5) % 3) / 2.0]
        return logits, act
