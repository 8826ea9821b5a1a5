"""Random weights for the test checkpoints that are the same bits on every CPU.

torch's init kernels (`normal_`, `trunc_normal_`'s `erfinv`) are vectorized and round differently on
AVX2 and AVX-512 machines, so a seeded `DecisionModel` is not reproducible across the machines this
project is tested on. Here each random tensor is redrawn from numpy's PCG64, seeded by (seed,
parameter name), under the same law torch's init uses for it; numpy's generators give the same
stream on every platform. Tensors the init leaves constant (norm weights, zeroed biases) are exact
already and are kept.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from laya_artifacts.errors import CheckpointError

# ModernBERT's `initializer_cutoff_factor` default: normals truncated at 2 sigma.
_CUTOFF = 2.0
# Encoder tensors ModernBERT draws with sigma / sqrt(2 * layers) (its "out" projections).
_ENCODER_OUT = (".attn.Wo.weight", ".mlp.Wo.weight")
_ENCODER_IN = ("tok_embeddings.weight", ".attn.Wqkv.weight", ".mlp.Wi.weight")

Law = Callable[[np.random.Generator, tuple[int, ...]], np.ndarray]


def _truncated_normal(sigma: float) -> Law:
    def draw(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        values = rng.standard_normal(shape)
        outside = np.abs(values) > _CUTOFF
        while outside.any():  # resample, as torch's trunc_normal_ does in law
            values[outside] = rng.standard_normal(int(outside.sum()))
            outside = np.abs(values) > _CUTOFF
        return values * sigma
    return draw


def _uniform(bound: float) -> Law:
    return lambda rng, shape: rng.uniform(-bound, bound, shape)


def _normal(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return rng.standard_normal(shape)


def _encoder_law(name: str, config: Any) -> Law:
    """ModernBERT's own init (`_init_weights`), by parameter name."""
    sigma = float(config.initializer_range)
    if name.endswith(_ENCODER_OUT):
        return _truncated_normal(sigma / math.sqrt(2.0 * config.num_hidden_layers))
    if name.endswith(_ENCODER_IN):
        return _truncated_normal(sigma)
    raise CheckpointError("no init law for encoder parameter %r" % name)


def _head_law(name: str, shapes: dict[str, tuple[int, ...]]) -> Law:
    """torch.nn's defaults for the head's modules: Embedding N(0, 1), MultiheadAttention's input
    projection Xavier-uniform, Linear weights and biases uniform within 1/sqrt(fan_in)."""
    if name == "type_emb.weight":
        return _normal
    shape = shapes[name]
    if name.endswith("in_proj_weight"):
        return _uniform(math.sqrt(6.0 / (shape[0] + shape[1])))
    if name.endswith(".weight") and len(shape) == 2:
        return _uniform(1.0 / math.sqrt(shape[1]))
    if name.endswith(".bias"):
        weight = shapes.get(name[: -len("bias")] + "weight")
        if weight is not None and len(weight) == 2:
            return _uniform(1.0 / math.sqrt(weight[1]))
    raise CheckpointError("no init law for head parameter %r %s" % (name, shape))


def generator(seed: int, name: str) -> np.random.Generator:
    return np.random.default_rng([seed, *name.encode()])


def redraw(model: Any, seed: int, keep: Sequence[str] = ()) -> list[str]:
    """Redraw every non-constant parameter of a `DecisionModel` whose name starts with none of `keep`
    (e.g. a pretrained encoder's ``encoder.``); return the names redrawn."""
    import torch

    params = dict(model.named_parameters())
    shapes = {name: tuple(p.shape) for name, p in params.items()}
    redrawn = []
    with torch.no_grad():
        for name, param in params.items():
            if name.startswith(tuple(keep)) or bool(torch.all(param == param.flatten()[0])):
                continue
            law = (_encoder_law(name, model.encoder.config) if name.startswith("encoder.")
                   else _head_law(name, shapes))
            values = law(generator(seed, name), shapes[name]).astype(np.float32)
            param.copy_(torch.from_numpy(values))
            redrawn.append(name)
    return redrawn
