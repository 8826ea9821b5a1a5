"""The random checkpoint kinds' shapes, and their parameter counts by arithmetic (no torch, no weights).

The real-shape kinds are the published Laya checkpoints' architectures (public model cards):
English and typed-decisions are ModernBERT-large, multilingual is mmBERT-base. Their head is
upstream's `DecisionModel` with two layers (d_ff = 4d, d/64 heads), which gives the cards' head
counts to the digit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# The public figures the real-shape kinds are held to (`test_checkpoint_shapes.py`: within 1%, heads exact).
PUBLISHED_PARAMETERS = {"modernbert-large": 421_300_000, "mmbert-base": 322_000_000}
PUBLISHED_HEAD_PARAMETERS = {"modernbert-large": 26_512_388, "mmbert-base": 14_969_604}
REAL_SHAPES = tuple(PUBLISHED_PARAMETERS)


@dataclass(frozen=True)
class Shape:
    """A random ModernBERT kind: its encoder's config, the rl config's lengths and the head's depth.

    `vocab_size` None: the tokenizer's own size (the small BPE trained here)."""

    encoder_name: str
    encoder: dict[str, Any] = field(default_factory=dict)
    vocab_size: int | None = None
    max_len: int = 512
    head_max_len: int = 192
    head_layers: int = 2
    tokenizer_size: int | None = None  # a tokenizer widened to this many entries (`bpe.wide_bpe_tokenizer`)


def _modernbert(hidden: int, intermediate: int, layers: int, heads: int, every: int, window: int) -> dict[str, Any]:
    return {"hidden_size": hidden, "intermediate_size": intermediate, "num_hidden_layers": layers,
            "num_attention_heads": heads, "global_attn_every_n_layers": every, "local_attention": window}


SHAPES = {
    "tiny-modernbert": Shape("answerdotai/ModernBERT-base", _modernbert(64, 96, 4, 4, 2, 16), head_layers=1),
    # ModernBERT-base: the benchmarks' mid-size kind (150M), not a published Laya checkpoint's shape.
    "modernbert-base": Shape("answerdotai/ModernBERT-base", _modernbert(768, 1152, 22, 12, 3, 128), 50368),
    "modernbert-large": Shape("answerdotai/ModernBERT-large", _modernbert(1024, 2624, 28, 16, 3, 128), 50368),
    "mmbert-base": Shape("jhu-clsp/mmBERT-base", _modernbert(768, 1152, 22, 12, 3, 128), 256_000,
                         max_len=1024, tokenizer_size=256_000),
}
N_ACT = 3  # the act head's outputs: one per act cost (ask, search) and "answer"


def encoder_parameters(shape: Shape, vocab_size: int) -> int:
    """ModernBERT's parameters without biases (its default): embeddings and their norm, per layer the attention
    norm (none in layer 0), Wqkv, Wo, the MLP norm, the gated Wi (2 x intermediate) and Wo, then the final norm."""
    h, i, n = (shape.encoder[k] for k in ("hidden_size", "intermediate_size", "num_hidden_layers"))
    per_layer = h + 3 * h * h + h * h + h + h * 2 * i + i * h
    first_layer_without_norm, final_norm = -h, h
    return vocab_size * h + h + n * per_layer + first_layer_without_norm + final_norm


def head_parameters(hidden: int, head_layers: int, n_act: int = N_ACT) -> int:
    """Upstream `DecisionModel`'s head: `head_layers` pre-norm transformer layers (d_ff 4d), the type embedding,
    the scorer (LayerNorm, Linear, GELU, Linear to 1) and the act head (Linear d+4 -> 256, GELU, -> n_act)."""
    d = hidden
    layer = (3 * d * d + 3 * d) + (d * d + d) + (d * 4 * d + 4 * d) + (4 * d * d + d) + 4 * d
    scorer = 2 * d + (d * d + d) + (d + 1)
    act = (d + 4) * 256 + 256 + 256 * n_act + n_act
    return head_layers * layer + 3 * d + scorer + act


def parameter_count(kind: str, vocab_size: int | None = None) -> tuple[int, int]:
    """(encoder, head) parameter counts of a random kind; `vocab_size` for a kind sized by its tokenizer."""
    shape = SHAPES[kind]
    vocab = shape.vocab_size or vocab_size
    if vocab is None:
        raise ValueError("%s is sized by its tokenizer: give vocab_size" % kind)
    return encoder_parameters(shape, vocab), head_parameters(shape.encoder["hidden_size"], shape.head_layers)
