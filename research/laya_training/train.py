"""Training the demo checkpoint's decision head on a frozen, pretrained MiniLM encoder.

Why this recipe (measured; see ``research/training_report.md``):

- The encoder stays frozen, so its output for every training sequence is computed once and
  cached. An epoch then costs only the small head, and tens of epochs fit in minutes on two
  CPU cores, where fine-tuning the whole model end to end managed ~2 epochs and stayed at chance.
- The question-type embedding is added to every encoder state before the head. Its default
  initialisation (unit normal, norm ~20 at width 384) is ~4x the norm of MiniLM's token
  states, so after the head's first LayerNorm every token mostly reads "this is a choice
  question" and the state's content is drowned out. It starts at the scale of the encoder's own
  outputs times `type_scale` instead.
- Linear warmup then cosine decay; soft cross-entropy against the generator's target
  distributions (a little mass on neighbouring score levels).

The trained head is a plain upstream `DecisionModel`: the checkpoint this produces is read by
`laya`, exported by `laya-artifacts` and served by the runtime like any other.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch

from .examples import Example

QTYPE_INDEX = {"choice": 0, "score": 1, "noul": 2}


@dataclass(frozen=True)
class TrainSettings:
    seed: int = 0
    n_worlds: int = 4000
    val_worlds: int = 600
    epochs: int = 5
    batch_size: int = 32
    lr: float = 1e-3
    warmup_steps: int = 100
    weight_decay: float = 0.01
    type_scale: float = 0.5
    head_layers: int = 2
    # Top encoder layers trained with the head; the layers below stay frozen and cached.
    train_layers: int = 2
    encoder_lr_factor: float = 0.3
    binding_weight: float = 1.0
    data_version: int = 1              # the generator version (data.domains)
    # Decision-loss weight per question type (choice, score, noul): a later stage can lean on the
    # types that lag once choice has learned.
    type_weights: tuple[float, float, float] = (1.0, 1.0, 1.0)
    resume_from: str | None = None    # a previous run's output folder: continue from its weights
    # Extra choice questions about single vocabulary words, labelled by the pretrained encoder's own
    # sentence similarity (distill); 0: none.
    teacher_questions: int = 0
    # Distilling the product of the resumed head and the teacher (product); 0: plain targets.
    # Choice targets become (1 - product_weight) x target + product_weight x product.
    product_weight: float = 0.0
    product_beta: float = 20.0
    wide_label_questions: int = 0     # extra teacher-labelled questions about the texts of ...
    wide_label_source: str = "generated"   # ... the generator ("generated") or the hand-written sets trained on
    # Hand-written case files (repo-relative) trained on next to the generated worlds (handwritten),
    # each question `hand_written_repeats` times; and the files the per-epoch hand-written check reads
    # (empty: research/cases/train-1.jsonl).
    hand_written: tuple[str, ...] = ()
    hand_written_repeats: int = 1
    check_cases: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class TrainRow:
    ids: list[int]
    markers: list[int]
    qtype: int
    target: list[float]
    domain: str
    spans: list[tuple[int, int]]   # each option's tokens after its marker: [start, end)
    source: int = -1               # the example's index in the list it was built from


def build_sequences(tok: Any, examples: Sequence[Example], max_len: int, head_max_len: int) -> list[TrainRow]:
    """Token sequences exactly as inference lays them out; examples whose options collapse are dropped."""
    from laya.common import build_sequence

    out = []
    for number, ex in enumerate(examples):
        ids, markers = build_sequence(tok, ex.state, ex.question, max_len, head_max_len,
                                      truncate_left=isinstance(ex.state, list))
        if len(markers) != len(ex.target):
            continue
        head_end = ids.index(tok.sep_token_id, markers[-1])
        spans = [(m + 1, nxt) for m, nxt in zip(markers, markers[1:] + [head_end], strict=True)]
        out.append(TrainRow(ids, markers, QTYPE_INDEX[ex.question["t"]], list(ex.target), ex.domain, spans, number))
    return out


def encode_states(encoder: Any, seqs: Sequence[TrainRow], train_layers: int, batch_size: int = 32,
                  progress: Callable[[str], None] | None = None) -> list[torch.Tensor]:
    """The frozen part's output for each sequence (fp16, unpadded): the hidden states entering the
    first of the `train_layers` top encoder layers (the last hidden state when 0)."""
    order = sorted(range(len(seqs)), key=lambda i: -len(seqs[i].ids))
    states: list[torch.Tensor | None] = [None] * len(seqs)
    started = time.perf_counter()
    with torch.inference_mode():
        for start in range(0, len(order), batch_size):
            chunk = order[start:start + batch_size]
            length = max(len(seqs[i].ids) for i in chunk)
            ids = torch.zeros((len(chunk), length), dtype=torch.long)
            mask = torch.zeros_like(ids)
            for row, i in enumerate(chunk):
                ids[row, : len(seqs[i].ids)] = torch.tensor(seqs[i].ids)
                mask[row, : len(seqs[i].ids)] = 1
            out = encoder(input_ids=ids, attention_mask=mask, output_hidden_states=True)
            hidden = out.hidden_states[len(out.hidden_states) - 1 - train_layers]
            for row, i in enumerate(chunk):
                states[i] = hidden[row, : len(seqs[i].ids)].to(torch.float16).clone()
            done = start + len(chunk)
            if progress and (done // batch_size) % 50 == 0:
                progress("encoded %d/%d sequences (%.0f s)" % (done, len(seqs), time.perf_counter() - started))
    return [s for s in states if s is not None]


def collate(seqs: Sequence[TrainRow], states: Sequence[torch.Tensor]) -> dict[str, torch.Tensor]:
    n, length = len(seqs), max(len(s.ids) for s in seqs)
    k = max(len(s.markers) for s in seqs)
    hidden = torch.zeros((n, length, states[0].shape[-1]))
    attention = torch.zeros((n, length), dtype=torch.long)
    marker_pos = torch.zeros((n, k), dtype=torch.long)
    marker_mask = torch.zeros((n, k), dtype=torch.bool)
    target = torch.zeros((n, k))
    spans = torch.zeros((n, k, length))
    for row, (seq, state) in enumerate(zip(seqs, states, strict=True)):
        for i, (start, end) in enumerate(seq.spans):
            spans[row, i, start:end] = 1.0 / max(1, end - start)
        hidden[row, : len(seq.ids)] = state.float()
        attention[row, : len(seq.ids)] = 1
        marker_pos[row, : len(seq.markers)] = torch.tensor(seq.markers)
        marker_mask[row, : len(seq.markers)] = True
        target[row, : len(seq.target)] = torch.tensor(seq.target)
    qtype = torch.tensor([s.qtype for s in seqs])
    return {"hidden": hidden, "attention_mask": attention, "marker_pos": marker_pos,
            "marker_mask": marker_mask, "qtype": qtype, "target": target, "spans": spans}


def top_layers(model: Any, train_layers: int) -> list[Any]:
    layers = model.encoder.encoder.layer
    return list(layers[len(layers) - train_layers:]) if train_layers else []


def head_logits(model: Any, hidden: torch.Tensor, attention_mask: torch.Tensor, marker_pos: torch.Tensor,
                marker_mask: torch.Tensor, qtype: torch.Tensor, train_layers: int) -> torch.Tensor:
    """`DecisionModel.forward`'s option logits, from the cached output of the frozen encoder layers
    through the top `train_layers` encoder layers and the head (a test holds them equal)."""
    return forward(model, hidden, attention_mask, marker_pos, marker_mask, qtype, train_layers)[0]


def forward(model: Any, hidden: torch.Tensor, attention_mask: torch.Tensor, marker_pos: torch.Tensor,
            marker_mask: torch.Tensor, qtype: torch.Tensor, train_layers: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The option logits and the encoder's output states (for the binding loss)."""
    h = hidden
    if train_layers:
        from transformers.masking_utils import create_bidirectional_mask

        mask = create_bidirectional_mask(config=model.encoder.config, inputs_embeds=h, attention_mask=attention_mask)
        for layer in top_layers(model, train_layers):
            h = layer(h, mask)
            h = h[0] if isinstance(h, tuple) else h
    encoded = h
    h = h + model.type_emb(qtype)[:, None, :]
    if model.head is not None:
        pad = ~attention_mask.bool()
        for layer in model.head.layers:
            h = layer(h, src_key_padding_mask=pad)
    index = marker_pos.clamp(min=0)[:, :, None].expand(-1, -1, h.size(-1))
    logits = model.scorer(torch.gather(h, 1, index)).squeeze(-1).float()
    return logits.masked_fill(~marker_mask, -1e4), encoded


def binding_loss(encoded: torch.Tensor, marker_pos: torch.Tensor, marker_mask: torch.Tensor,
                 spans: torch.Tensor, tau: float = 0.1) -> torch.Tensor:
    """Contrastive: each option marker's encoder state should resemble its own option's tokens more
    than the other options'. Breaks the symmetry that stalls training: a frozen MiniLM gives every
    `[MASK]` marker almost the same state (cosine ~0.95), and the head has no positions to tell
    them apart with; this teaches the top encoder layers to bind each marker to its option text."""
    index = marker_pos.clamp(min=0)[:, :, None].expand(-1, -1, encoded.size(-1))
    markers = torch.nn.functional.normalize(torch.gather(encoded, 1, index), dim=-1)
    options = torch.nn.functional.normalize(torch.bmm(spans, encoded), dim=-1).detach()
    sims = (markers @ options.transpose(1, 2)) / tau
    sims = sims.masked_fill(~marker_mask[:, None, :], -1e4)
    targets = torch.arange(sims.size(1)).expand(sims.size(0), -1)
    loss = torch.nn.functional.cross_entropy(sims.reshape(-1, sims.size(-1)), targets.reshape(-1), reduction="none")
    return (loss * marker_mask.reshape(-1)).sum() / marker_mask.sum()


def soft_cross_entropy(logits: torch.Tensor, target: torch.Tensor, marker_mask: torch.Tensor,
                       weights: torch.Tensor | None = None) -> torch.Tensor:
    """Mean over rows of the cross-entropy against soft targets, each row weighted if `weights` is given."""
    logp = torch.log_softmax(logits, -1)
    per_row = -(target * logp * marker_mask).sum(-1)
    return per_row.mean() if weights is None else (per_row * weights).sum() / weights.sum()


def _batches(seqs: Sequence[TrainRow], batch_size: int, rng: random.Random) -> list[list[int]]:
    """Batches of similar length (less padding), in a shuffled order."""
    order = list(range(len(seqs)))
    rng.shuffle(order)
    pool = 50 * batch_size
    batches: list[list[int]] = []
    for start in range(0, len(order), pool):
        chunk = sorted(order[start:start + pool], key=lambda i: len(seqs[i].ids))
        batches.extend(chunk[j:j + batch_size] for j in range(0, len(chunk), batch_size))
    rng.shuffle(batches)
    return batches


def correct(target: Sequence[float], probs: Sequence[float], qtype: int) -> bool:
    """Top-1 for choice and noul; within one level of the target's mode for score."""
    want = max(range(len(target)), key=lambda i: target[i])
    got = max(range(len(probs)), key=lambda i: probs[i])
    return abs(want - got) <= 1 if qtype == QTYPE_INDEX["score"] else want == got


@torch.no_grad()
def predict_logits(model: Any, seqs: Sequence[TrainRow], states: Sequence[torch.Tensor], train_layers: int,
                   batch_size: int = 64) -> list[list[float]]:
    model.eval()
    out = []
    for start in range(0, len(seqs), batch_size):
        batch = collate(seqs[start:start + batch_size], states[start:start + batch_size])
        logits = head_logits(model, batch["hidden"], batch["attention_mask"], batch["marker_pos"],
                             batch["marker_mask"], batch["qtype"], train_layers)
        for row, seq in enumerate(seqs[start:start + batch_size]):
            out.append(logits[row, : len(seq.markers)].tolist())
    return out


def evaluate(model: Any, seqs: Sequence[TrainRow], states: Sequence[torch.Tensor],
             train_layers: int) -> dict[str, float]:
    """Loss and accuracy per question type (score: within one level)."""
    logits = predict_logits(model, seqs, states, train_layers)
    totals: dict[str, list[float]] = {}
    loss = 0.0
    for seq, row in zip(seqs, logits, strict=True):
        probs = torch.softmax(torch.tensor(row), -1)
        loss -= float((torch.tensor(seq.target) * torch.log(probs.clamp_min(1e-9))).sum())
        name = next(k for k, v in QTYPE_INDEX.items() if v == seq.qtype)
        totals.setdefault(name, []).append(float(correct(seq.target, probs.tolist(), seq.qtype)))
    report = {"loss": loss / max(1, len(seqs))}
    report.update({name: sum(v) / len(v) for name, v in sorted(totals.items())})
    return report


def init_head(model: Any, encoder_state_norm: float, settings: TrainSettings) -> None:
    """Type embeddings at the encoder's output scale (times `type_scale`), not unit normal."""
    with torch.no_grad():
        emb = model.type_emb.weight
        emb.normal_(0.0, 1.0)
        emb.mul_(settings.type_scale * encoder_state_norm / emb.norm(dim=-1, keepdim=True))


def train_head(model: Any, train: tuple[Sequence[TrainRow], Sequence[torch.Tensor]],
               checks: Mapping[str, tuple[Sequence[TrainRow], Sequence[torch.Tensor]]], settings: TrainSettings,
               progress: Callable[[str], None]) -> list[dict[str, Any]]:
    """Train the head and the top encoder layers; returns the learning curve per epoch."""
    seqs, states = train
    n = settings.train_layers
    head = [p for name, p in model.named_parameters() if not name.startswith("encoder.")]
    top = [p for layer in top_layers(model, n) for p in layer.parameters()]
    for p in top:
        p.requires_grad_(True)
    params = head + top
    optimizer = torch.optim.AdamW([{"params": head, "lr": settings.lr},
                                   {"params": top, "lr": settings.lr * settings.encoder_lr_factor}],
                                  weight_decay=settings.weight_decay)
    rng = random.Random(settings.seed)
    # Equal weights take the plain mean, so a stage-1 run reproduces the weights it shipped with bit for bit.
    type_weights = None if set(settings.type_weights) == {1.0} else torch.tensor(settings.type_weights)
    steps_per_epoch = math.ceil(len(seqs) / settings.batch_size)
    total = steps_per_epoch * settings.epochs

    def lr_at(step: int) -> float:
        if step < settings.warmup_steps:
            return (step + 1) / settings.warmup_steps
        progress_ = (step - settings.warmup_steps) / max(1, total - settings.warmup_steps)
        return 0.5 * (1 + math.cos(math.pi * min(1.0, progress_)))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_at)
    curve: list[dict[str, Any]] = [{"epoch": 0, "train_loss": None,
                                    **{name: evaluate(model, *data, n) for name, data in checks.items()}}]
    progress("epoch 0: %s" % _summary(curve[-1]))
    for epoch in range(1, settings.epochs + 1):
        model.train()
        started, running, bound = time.perf_counter(), 0.0, 0.0
        batches = _batches(seqs, settings.batch_size, rng)
        for batch_ids in batches:
            batch = collate([seqs[i] for i in batch_ids], [states[i] for i in batch_ids])
            logits, encoded = forward(model, batch["hidden"], batch["attention_mask"], batch["marker_pos"],
                                      batch["marker_mask"], batch["qtype"], n)
            row_weights = None if type_weights is None else type_weights[batch["qtype"]]
            decision = soft_cross_entropy(logits, batch["target"], batch["marker_mask"], row_weights)
            binding = binding_loss(encoded, batch["marker_pos"], batch["marker_mask"], batch["spans"])
            loss = decision + settings.binding_weight * binding
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            optimizer.step()
            scheduler.step()
            running += float(decision.detach())
            bound += float(binding.detach())
        row = {"epoch": epoch, "train_loss": running / len(batches), "binding_loss": bound / len(batches),
               "seconds": time.perf_counter() - started,
               **{name: evaluate(model, *data, n) for name, data in checks.items()}}
        curve.append(row)
        progress("epoch %d: %s" % (epoch, _summary(row)))
    model.eval()
    return curve


def _summary(row: dict[str, Any]) -> str:
    parts = [] if row.get("train_loss") is None else ["train loss %.3f (binding %.3f)"
                                                      % (row["train_loss"], row["binding_loss"])]
    for name, value in row.items():
        if isinstance(value, dict):
            parts.append("%s: " % name + " ".join("%s %.3f" % (k, v) for k, v in value.items()))
    return " | ".join(parts)


def fit_temperatures(seqs: Sequence[TrainRow], logits: Sequence[Sequence[float]],
                     bucket_of: Callable[[int, int], str]) -> tuple[list[float], dict[str, float]]:
    """Per-type and per-(type, option-count) temperatures minimising held-out NLL on a grid in [0.5, 5]."""
    grid = [round(0.5 + 0.05 * i, 2) for i in range(91)]

    def best(rows: list[tuple[TrainRow, Sequence[float]]]) -> float:
        def nll(t: float) -> float:
            total = 0.0
            for seq, row in rows:
                logp = torch.log_softmax(torch.tensor(row) / t, -1)
                total -= float((torch.tensor(seq.target) * logp).sum())
            return total
        return min(grid, key=nll)

    pairs = list(zip(seqs, logits, strict=True))
    per_type = []
    for qtype in range(3):
        rows = [p for p in pairs if p[0].qtype == qtype]
        per_type.append(best(rows) if rows else 1.0)
    by_bucket: dict[str, list] = {}
    for seq, row in pairs:
        by_bucket.setdefault(bucket_of(seq.qtype, len(seq.markers)), []).append((seq, row))
    # Buckets with few held-out rows keep the per-type value rather than a noisy fit of their own.
    return per_type, {name: best(rows) for name, rows in sorted(by_bucket.items()) if len(rows) >= 40}
