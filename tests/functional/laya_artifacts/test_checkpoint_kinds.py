"""The random checkpoint kinds as built: the modules hold exactly the counts `checkpoints/shapes.py` computes,
`--max-len` sets the context, upstream loads them without a warning, and the real shapes, cached once per recipe,
are stored in FP16 at the published sizes."""

from __future__ import annotations

import json
import shutil
import struct
import warnings
from pathlib import Path

import pytest

from laya_artifacts.checkpoints.make import RECIPE, cached_checkpoint
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


def test_a_cached_checkpoint_of_another_recipe_is_made_again(tmp_path, monkeypatch):
    made = []
    monkeypatch.setattr("laya_artifacts.checkpoints.make.make_checkpoint",
                        lambda kind, out, **_k: made.append(Path(out).mkdir(parents=True)))
    first = cached_checkpoint("tiny-modernbert", tmp_path)
    assert (first / ".built").read_text() == "recipe %d\n" % RECIPE
    (first / ".built").write_text("")   # the marker an older generator left
    assert cached_checkpoint("tiny-modernbert", tmp_path) == first and len(made) == 2
    assert cached_checkpoint("tiny-modernbert", tmp_path) == first and len(made) == 2


def _upstream_load_warnings(checkpoint: Path) -> list[str]:
    import laya

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        laya.Agent(str(checkpoint), device="cpu")
    return [str(w.message) for w in caught]


def test_upstream_loads_a_generated_checkpoint_without_a_temperature_warning(tiny_modernbert):
    """Every kind writes the same temperatures (`make._rl_config`): none outside upstream's [0.5, 5]."""
    assert [m for m in _upstream_load_warnings(tiny_modernbert[0]) if "temperature" in m] == []


def test_upstream_still_warns_on_a_temperature_outside_its_range(tiny_modernbert, tmp_path):
    checkpoint = Path(shutil.copytree(tiny_modernbert[0], tmp_path / "checkpoint"))
    config = json.loads((checkpoint / "rl_agent_config.json").read_text())
    config["temperature_by_options"]["noul:2"] = 0.3
    (checkpoint / "rl_agent_config.json").write_text(json.dumps(config))
    [message] = [m for m in _upstream_load_warnings(checkpoint) if "temperature" in m]
    assert "ships invalid temperatures or values outside [0.5, 5]" in message and "noul:2=0.3 -> 0.5" in message


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
