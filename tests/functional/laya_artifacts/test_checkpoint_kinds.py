"""The random checkpoint kinds as built: the modules hold exactly the counts `checkpoints/shapes.py` computes,
`--max-len` sets the context, and the real shapes, cached once, are stored in FP16 at the published sizes."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from laya_artifacts.checkpoints.make import cached_checkpoint
from laya_artifacts.checkpoints.shapes import SHAPES, parameter_count
from laya_artifacts.cli import main as cli
from tests.paths import ROOT


def _module_count(kind: str, vocab_size: int) -> tuple[int, int]:
    """(encoder, head) parameters of the modules `make_checkpoint` would build, on the meta device (no weights)."""
    import torch
    from laya.common import DecisionModel
    from transformers import AutoModel, ModernBertConfig

    config = ModernBertConfig(vocab_size=vocab_size, pad_token_id=0, **SHAPES[kind].encoder)
    with torch.device("meta"):
        model = DecisionModel(AutoModel.from_config(config), SHAPES[kind].head_layers, 3)
    encoder = sum(p.numel() for p in model.encoder.parameters())
    return encoder, sum(p.numel() for p in model.parameters()) - encoder


@pytest.mark.parametrize("kind", sorted(SHAPES))
def test_the_arithmetic_is_the_modules_count(kind):
    vocab = SHAPES[kind].vocab_size or 2000
    assert parameter_count(kind, vocab) == _module_count(kind, vocab)


def test_max_len_sets_the_checkpoints_context(tmp_path):
    assert cli(["make-checkpoint", "tiny-modernbert", "--out", str(tmp_path / "t"), "--max-len", "1024"]) == 0
    assert json.loads((tmp_path / "t" / "rl_agent_config.json").read_text())["max_len"] == 1024


def test_a_cached_checkpoint_is_made_once(tmp_path, monkeypatch):
    first = cached_checkpoint("tiny-modernbert", tmp_path)
    monkeypatch.setattr("laya_artifacts.checkpoints.make.make_checkpoint", lambda *_a, **_k: pytest.fail("rebuilt"))
    assert cached_checkpoint("tiny-modernbert", tmp_path) == first
    assert (first / "model.safetensors").is_file()


def _safetensors_header(path: Path) -> dict[str, dict[str, object]]:
    with open(path, "rb") as handle:
        (size,) = struct.unpack("<Q", handle.read(8))
        header: dict[str, dict[str, object]] = json.loads(handle.read(size))
    header.pop("__metadata__", None)
    return header


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["modernbert-large", "mmbert-base"])
def test_the_real_shapes_are_stored_in_fp16_at_their_published_sizes(kind):
    checkpoint = cached_checkpoint(kind, ROOT / ".cache" / "real-shapes")   # minutes, once per checkout
    tensors = _safetensors_header(checkpoint / "model.safetensors")
    counts = {name: 1 for name in tensors}
    for name, info in tensors.items():
        for dim in info["shape"]:
            counts[name] *= dim
    assert {info["dtype"] for info in tensors.values()} == {"F16"}
    parameters = sum(n for name, n in counts.items() if name != "temperature")
    assert parameters == sum(parameter_count(kind))
    config = json.loads((checkpoint / "rl_agent_config.json").read_text())
    assert config["max_len"] == SHAPES[kind].max_len and config["head_layers"] == 2
    from tokenizers import Tokenizer

    vocab = Tokenizer.from_file(str(checkpoint / "tokenizer" / "tokenizer.json")).get_vocab_size()
    # mmBERT's tokenizer is widened to its 256,000 entries; the English kind keeps the small trained one
    assert vocab == SHAPES[kind].tokenizer_size if SHAPES[kind].tokenizer_size else vocab < 2000
