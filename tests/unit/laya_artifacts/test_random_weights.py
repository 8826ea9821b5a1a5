"""The test checkpoints' random draws: seeded per (seed, parameter name), in the law torch's init uses."""

from __future__ import annotations

import numpy as np
import pytest

from laya_artifacts.checkpoints.random_weights import _encoder_law, _head_law, generator


class _Config:
    initializer_range, num_hidden_layers = 0.2, 8


def test_each_parameter_has_its_own_reproducible_stream() -> None:
    a = generator(0, "head.layers.0.linear1.weight").standard_normal(4)
    assert np.array_equal(a, generator(0, "head.layers.0.linear1.weight").standard_normal(4))
    assert not np.array_equal(a, generator(0, "head.layers.0.linear2.weight").standard_normal(4))
    assert not np.array_equal(a, generator(1, "head.layers.0.linear1.weight").standard_normal(4))


def test_encoder_laws_follow_modernbert_and_are_truncated_at_two_sigma() -> None:
    draw_in = _encoder_law("encoder.layers.0.attn.Wqkv.weight", _Config)(generator(0, "a"), (256, 256))
    draw_out = _encoder_law("encoder.layers.0.mlp.Wo.weight", _Config)(generator(0, "b"), (256, 256))
    assert np.abs(draw_in).max() <= 2 * 0.2 and abs(draw_in.std() - 0.2 * 0.88) < 0.01  # std of N cut at 2 sigma
    assert np.abs(draw_out).max() <= 2 * 0.2 / 4
    with pytest.raises(ValueError, match="no init law for encoder parameter"):
        _encoder_law("encoder.layers.0.attn.rotary.weight", _Config)


def test_head_laws_follow_torch_nn_defaults() -> None:
    shapes = {"scorer.1.weight": (64, 256), "scorer.1.bias": (64,), "head.layers.0.self_attn.in_proj_weight": (192, 64),
              "type_emb.weight": (3, 64), "mystery": (3,)}
    rng = generator(0, "x")
    assert np.abs(_head_law("scorer.1.weight", shapes)(rng, (64, 256))).max() <= 1 / 16
    assert np.abs(_head_law("scorer.1.bias", shapes)(rng, (64,))).max() <= 1 / 16
    assert np.abs(_head_law("head.layers.0.self_attn.in_proj_weight", shapes)(rng, (192, 64))).max() <= (6 / 256) ** .5
    assert _head_law("type_emb.weight", shapes)(rng, (3, 64)).std() > 0.5
    with pytest.raises(ValueError, match="no init law for head parameter 'mystery'"):
        _head_law("mystery", shapes)
