"""A demo head trained to answer the same under int8: its own FP32 and its fake-quantized self agree.

The quantization-aware fine-tune (`laya_artifacts.qat.finetune`) keeps the original checkpoint as the reference,
and on the demo the int8 noise is about ten times what that head tolerates (docs/artifacts-gate.md). This
is the other way the docs left untried: a new demo version whose FP32 is the new reference, trained on its
own task data under the artifact's int8 scheme (`laya_artifacts.qat.scheme`), so that what the gate
compares (int8 against the same weights in FP32) is what the loss pulls together.

Each step takes a batch of the demo's labelled training rows (14a's recipe: generated worlds and the
hand-written train sets) and one gate selection or generated case (no labels: consistency only):
- the FP32 pass (fake quantization off) learns the task: soft cross-entropy on the labelled rows;
- the fake-quantized pass (on) must give the FP32 pass's option and act probabilities: squared difference
  plus `band_weight` x the squared part beyond `band`, summed over rows (the gate fails on one row).
The gate's confirmation split is never read here.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from .train import QTYPE_INDEX, TrainRow

Progress = Callable[[str], None]


@dataclass(frozen=True)
class RobustSettings:
    steps: int = 1500
    lr: float = 1e-4
    warmup: int = 50
    batch_size: int = 8
    seed: int = 16
    train_layers: int = 2
    consistency_weight: float = 4.0
    band: float = 0.005
    band_weight: float = 100.0
    type_weights: tuple[float, float, float] = (1.0, 3.0, 2.0)
    # The task loss on the fake-quantized pass too (averaged with the FP32 pass's): flat answers, which agree
    # with themselves at any precision, then cost in both passes.
    quantized_task: bool = False
    eval_every: int = 250
    threads: int = 2

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def set_fake_quant(model: Any, on: bool) -> None:
    from torch.ao.quantization import disable_fake_quant, enable_fake_quant

    model.apply(enable_fake_quant if on else disable_fake_quant)


def row_batch(rows: Sequence[TrainRow], pad_id: int) -> dict[str, Any]:
    """Labelled training rows as the upstream model's inputs (the layout inference uses)."""
    import torch

    n, length, k = len(rows), max(len(r.ids) for r in rows), max(len(r.markers) for r in rows)
    ids = torch.full((n, length), pad_id, dtype=torch.long)
    mask = torch.zeros((n, length), dtype=torch.long)
    marker_pos = torch.zeros((n, k), dtype=torch.long)
    marker_mask = torch.zeros((n, k), dtype=torch.bool)
    target = torch.zeros((n, k))
    for i, row in enumerate(rows):
        ids[i, : len(row.ids)] = torch.tensor(row.ids)
        mask[i, : len(row.ids)] = 1
        marker_pos[i, : len(row.markers)] = torch.tensor(row.markers)
        marker_mask[i, : len(row.markers)] = True
        target[i, : len(row.target)] = torch.tensor(row.target)
    return {"input_ids": ids, "attention_mask": mask, "marker_pos": marker_pos, "marker_mask": marker_mask,
            "qtype": torch.tensor([r.qtype for r in rows]), "target": target}


def _probabilities(model: Any, batch: dict[str, Any], temperature: Any) -> tuple[Any, Any, Any]:
    """(logits, option probabilities at `temperature` with padding zeroed, act probabilities)."""
    import torch

    logits, act_logits = model(batch["input_ids"], batch["attention_mask"], batch["marker_pos"],
                               batch["marker_mask"], batch["qtype"])
    p = torch.softmax(logits / temperature, -1) * batch["marker_mask"]
    return logits, p, torch.softmax(act_logits, -1)


def both_passes(model: Any, batch: dict[str, Any], temperature: Any) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    set_fake_quant(model, False)
    fp32 = _probabilities(model, batch, temperature)
    set_fake_quant(model, True)
    return fp32, _probabilities(model, batch, temperature)


def consistency(fp32: tuple[Any, ...], quant: tuple[Any, ...], band: float, band_weight: float) -> Any:
    import torch

    dp, dact = quant[1] - fp32[1], quant[2] - fp32[2]
    squared = (dp ** 2).sum(-1).mean() + (dact ** 2).sum(-1).mean()
    beyond = (torch.relu(dp.abs() - band) ** 2).sum() + (torch.relu(dact.abs() - band) ** 2).sum()
    return squared + band_weight * beyond


def self_fidelity(model: Any, examples: Sequence[Any]) -> dict[str, Any]:
    """The gate's figures in PyTorch: the fake-quantized model against the same weights in FP32."""
    import torch

    errors, act_errors, hard = [], [], 0
    model.eval()
    with torch.no_grad():
        for example in examples:
            (_, p, act), (_, q, qact) = both_passes(model, example.batch, example.temperature)
            errors += (q - p).abs().amax(-1).tolist()
            act_errors += (qact - act).abs().amax(-1).tolist()
            top2 = p.topk(2, -1).values
            hard += int(((q.argmax(-1) != p.argmax(-1)) & (top2[:, 0] - top2[:, 1] >= 0.04)).sum())
    errors.sort()
    return {"rows": len(errors), "max": max(errors, default=0.0), "median": errors[len(errors) // 2],
            "p90": errors[int(len(errors) * 0.9)], "max_act": max(act_errors, default=0.0), "hard": hard}


def accuracy(model: Any, rows: Sequence[TrainRow], pad_id: int, batch_size: int = 32) -> dict[str, float]:
    """FP32 accuracy per question type (score within one level), as `train.evaluate` counts it."""
    import torch

    from .train import correct

    set_fake_quant(model, False)
    model.eval()
    totals: dict[str, list[float]] = {}
    with torch.no_grad():
        for start in range(0, len(rows), batch_size):
            chunk = rows[start:start + batch_size]
            logits, _ = model(*[row_batch(chunk, pad_id)[k] for k in
                                ("input_ids", "attention_mask", "marker_pos", "marker_mask", "qtype")])
            for i, row in enumerate(chunk):
                name = next(k for k, v in QTYPE_INDEX.items() if v == row.qtype)
                probs = logits[i, : len(row.markers)].softmax(-1).tolist()
                totals.setdefault(name, []).append(float(correct(row.target, probs, row.qtype)))
    return {name: sum(v) / len(v) for name, v in sorted(totals.items())}


def _task_loss(logits: Any, batch: dict[str, Any], weights: Any) -> Any:
    """Soft cross-entropy against the labelled targets, weighted per question type (as `train` weighs it)."""
    import torch

    per_row = -(batch["target"] * torch.log_softmax(logits, -1) * batch["marker_mask"]).sum(-1)
    return (per_row * weights).sum() / weights.sum()


def train_robust(model: Any, rows: Sequence[TrainRow], cases: Sequence[Any], temperatures: Sequence[float],
                 pad_id: int, settings: RobustSettings, measure: Callable[[int], None], progress: Progress) -> None:
    """Train the head and the top `train_layers` encoder layers of a fake-quantized `model` in place."""
    import torch

    n_layers = len(model.encoder.encoder.layer)
    top = ["encoder.encoder.layer.%d." % i for i in range(n_layers - settings.train_layers, n_layers)]
    names = [n for n, _ in model.named_parameters()
             if not n.startswith("encoder.") or any(n.startswith(t) for t in top)]
    params = dict(model.named_parameters())
    for name, param in params.items():
        param.requires_grad_(name in names)
    optimizer = torch.optim.AdamW([params[n] for n in names], lr=settings.lr, weight_decay=0.01)
    rng = random.Random(settings.seed)
    type_temp = torch.tensor(temperatures)
    type_weights = torch.tensor(settings.type_weights)
    order: list[int] = []
    measure(0)
    started, ema = time.perf_counter(), None
    for step in range(settings.steps):
        factor = (step + 1) / settings.warmup if step < settings.warmup else \
            0.5 * (1 + math.cos(math.pi * (step - settings.warmup) / max(1, settings.steps - settings.warmup)))
        for group in optimizer.param_groups:
            group["lr"] = settings.lr * factor
        if len(order) < settings.batch_size:
            order += rng.sample(range(len(rows)), len(rows))
        chunk, order = [rows[i] for i in order[: settings.batch_size]], order[settings.batch_size:]
        model.eval()  # no dropout: the two passes must differ by the quantization alone
        batch = row_batch(chunk, pad_id)
        fp32, quant = both_passes(model, batch, type_temp[batch["qtype"]][:, None])
        weights = type_weights[batch["qtype"]]
        task = _task_loss(fp32[0], batch, weights)
        if settings.quantized_task:
            task = 0.5 * (task + _task_loss(quant[0], batch, weights))
        case = cases[rng.randrange(len(cases))]
        case_fp32, case_quant = both_passes(model, case.batch, case.temperature)
        agree = consistency(fp32, quant, settings.band, settings.band_weight) + \
            consistency(case_fp32, case_quant, settings.band, settings.band_weight)
        loss = task + settings.consistency_weight * agree
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_([params[n] for n in names], 1.0)
        optimizer.step()
        value = (float(task.detach()), float(agree.detach()))
        ema = value if ema is None else (0.95 * ema[0] + 0.05 * value[0], 0.95 * ema[1] + 0.05 * value[1])
        done = step + 1
        if done % 25 == 0:
            rate = (time.perf_counter() - started) / done
            progress("step %d/%d task %.3f consistency %.4f (ema), %.2f s/step, %.0f min left"
                     % (done, settings.steps, ema[0], ema[1], rate, rate * (settings.steps - done) / 60))
        if done % settings.eval_every == 0 or done == settings.steps:
            measure(done)
    model.eval()
    set_fake_quant(model, False)
