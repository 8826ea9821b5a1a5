"""The real-shape checkpoint kinds hold the published checkpoints' parameter counts (arithmetic, no weights)."""

from __future__ import annotations

import pytest

from laya_artifacts.checkpoints.make import DEFAULT_SEEDS, KINDS
from laya_artifacts.checkpoints.shapes import (
    PUBLISHED_HEAD_PARAMETERS,
    PUBLISHED_PARAMETERS,
    REAL_SHAPES,
    SHAPES,
    parameter_count,
)


@pytest.mark.parametrize("kind", REAL_SHAPES)
def test_real_shapes_hold_the_published_parameter_counts(kind):
    encoder, head = parameter_count(kind)
    assert abs(encoder + head - PUBLISHED_PARAMETERS[kind]) / PUBLISHED_PARAMETERS[kind] < 0.01
    assert head == PUBLISHED_HEAD_PARAMETERS[kind]


def test_the_counts_are_the_model_cards_to_the_digit():
    assert sum(parameter_count("modernbert-large")) == 421_294_084
    assert sum(parameter_count("mmbert-base")) == 321_909_252


def test_real_shapes_are_make_checkpoint_kinds_with_the_published_contexts():
    assert set(REAL_SHAPES) <= set(KINDS) and set(KINDS) <= set(DEFAULT_SEEDS)
    assert SHAPES["modernbert-large"].max_len == 512
    assert SHAPES["mmbert-base"].max_len == 1024
    assert SHAPES["mmbert-base"].tokenizer_size == SHAPES["mmbert-base"].vocab_size == 256_000


def test_a_kind_sized_by_its_tokenizer_needs_the_vocabulary():
    with pytest.raises(ValueError, match="sized by its tokenizer"):
        parameter_count("tiny-modernbert")
    assert parameter_count("tiny-modernbert", vocab_size=2000)[1] > 0
