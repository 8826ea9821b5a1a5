"""The int8-consistent demo head (laya_training.robust): the two passes, the loss, what trains."""

from __future__ import annotations

import pytest

from laya_artifacts.checkpoints import demo
from laya_artifacts.qat.scheme import attach_fake_quant
from laya_training import robust
from laya_training import train as dt
from laya_training.data import generate

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tok():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(demo.minilm_dir())


def _model():
    import torch

    torch.manual_seed(0)
    model = demo.build_model(2)
    attach_fake_quant(model)
    return model


def test_the_fp32_pass_is_the_plain_model_and_the_quantized_pass_differs(tok):
    import torch

    plain = demo.build_model(2)
    model = _model()
    model.load_state_dict(plain.state_dict(), strict=False)
    rows = dt.build_sequences(tok, generate(8, 3, 4), demo.MAX_LEN, demo.HEAD_MAX_LEN)
    batch = robust.row_batch(rows, tok.pad_token_id)
    temperature = torch.ones((len(rows), 1))
    with torch.no_grad():
        (logits, p, act), (_, q, qact) = robust.both_passes(model, batch, temperature)
        reference, _ = plain(batch["input_ids"], batch["attention_mask"], batch["marker_pos"], batch["marker_mask"],
                             batch["qtype"])
    mask = batch["marker_mask"]
    assert torch.equal(logits[mask], reference[mask])
    assert (q - p).abs().max() > 1e-4 and torch.allclose(q.sum(-1), p.sum(-1), atol=1e-5)
    assert (qact - act).abs().max() > 0


def test_the_consistency_loss_is_zero_when_the_passes_agree_and_the_band_weighs_each_row_beyond_it():
    import torch

    p = torch.tensor([[0.5, 0.5], [0.9, 0.1]])
    act = torch.tensor([[0.3, 0.7], [0.3, 0.7]])
    assert float(robust.consistency((None, p, act), (None, p, act), 0.005, 100.0)) == 0.0
    near = torch.tensor([[0.503, 0.497], [0.9, 0.1]])   # within the band: only the squared term
    far = torch.tensor([[0.6, 0.4], [0.9, 0.1]])          # 0.1 beyond it on two options
    within = float(robust.consistency((None, p, act), (None, near, act), 0.005, 100.0))
    beyond = float(robust.consistency((None, p, act), (None, far, act), 0.005, 100.0))
    assert within == pytest.approx((2 * 0.003 ** 2) / 2, rel=1e-3)
    assert beyond == pytest.approx((2 * 0.1 ** 2) / 2 + 100.0 * 2 * 0.095 ** 2, rel=1e-3)


def test_training_moves_the_head_and_top_layers_only(tok):
    import torch

    model = _model()
    rows = dt.build_sequences(tok, generate(20, 5, 4), demo.MAX_LEN, demo.HEAD_MAX_LEN)
    case = robust.row_batch(rows[:2], tok.pad_token_id)

    class Case:
        batch, temperature = case, torch.ones((2, 1))

    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    measured: list[int] = []
    settings = robust.RobustSettings(steps=2, warmup=1, batch_size=4, eval_every=2, lr=1e-3)
    robust.train_robust(model, rows, [Case()], [1.0, 1.0, 1.0], tok.pad_token_id, settings, measured.append,
                        lambda _m: None)
    changed = {n for n, p in model.named_parameters() if not torch.equal(p, before[n])}
    assert measured == [0, 2]
    assert any(n.startswith("scorer.") for n in changed) and any(".layer.5." in n for n in changed)
    assert not any(n.startswith("encoder.") and ".layer.5." not in n and ".layer.4." not in n for n in changed)
