"""Quantization-aware fine-tuning: a copy of a checkpoint taught to answer as the original under int8.

For a checkpoint whose post-training int8 candidates all fail the gate (`search/precision.py`). A copy (the
student) runs its encoder under fake quantization that is the artifact's own int8 scheme, and learns to
answer as the original checkpoint's upstream FP32 (the teacher) does: its temperature-scaled option
probabilities and act probabilities, on the gate's selection cases and states generated from them
(`qat/data.py`; no labels, never the confirmation split). The build then exports the student, quantizes
it with the precision search's `encoder` candidate and gates it against the goldens of the **original**:
the reference never moves.

The scheme is the artifact's own int8, in PyTorch's QAT modules (`qat/scheme.py`).

What is trained (`trainable`): `head` (default) is the decision head (FP32 in the artifact, right before
the probabilities), the encoder's norms and biases, and the top `train_layers` encoder layers whole; `all`
adds every encoder weight matrix. The tuned copy keeps the original's files; only `model.safetensors` changes
(trained tensors in FP16, as upstream stores every tensor) and `laya_qat.json` records the fine-tune (recipe,
data, steps, seed, both hashes, fidelity before and after). Progress is printed every `log_every` steps,
the state is saved every `save_every` steps in `work_dir`, and `resume` continues from it.
"""

from __future__ import annotations

import json
import math
import random
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from laya_artifacts.errors import QatError
from laya_artifacts.goldens.record import _encode_case, weights_sha256
from laya_artifacts.qat.data import held_out, training_cases
from laya_artifacts.qat.scheme import WEIGHT_RANGE, attach_fake_quant, trainable_names
from laya_artifacts.qat.state import STATE_FILE, restore, save_state
from laya_artifacts.search.quantize import REDUCE_RANGE
from laya_serverless.artifact.manifest import sha256_file

QAT_RECORD = "laya_qat.json"
CHECKPOINT_DIR = "checkpoint"
# The search a tuned copy gets: the candidate it was tuned for first; the mixes only if that fails, so a
# refusal still carries the per-layer and per-node tables.
QAT_CANDIDATES = ("encoder", "layer-mix", "node-mix")
HARD_MARGIN = 0.04  # the gate's hard-mismatch band at the int8 tolerance (2 x 0.02)

Progress = Callable[[str], None]


@dataclass(frozen=True)
class QatSettings:
    """How a fine-tune runs. `work_dir` keeps its state and the tuned copy (resumable); None: the build's."""

    steps: int = 2000
    lr: float = 2e-5
    accumulate: int = 4
    seed: int = 0
    trainable: str = "head"
    train_layers: int = 0
    warmup: int = 20
    generated_per_case: int = 3
    # The gate fails on one row, not on the mean: differences past `band` are also penalized, squared, weighted
    # and summed over rows, so rows within it stop pulling and the rows beyond get the gradient (`_loss`).
    band: float = 0.005
    band_weight: float = 100.0
    held_out_every: int = 5  # one generated case in this many is never trained on: the fine-tune's own overfit check
    save_every: int = 50
    log_every: int = 10
    threads: int = 2
    device: str = "cpu"  # where the student trains ("cuda" where there is one); the teacher runs on the CPU
    resume: bool = False
    work_dir: Path | None = None

    def recipe(self) -> dict[str, Any]:
        """What decides the tuned weights (not how the run is paced or where it is kept)."""
        return {k: v for k, v in asdict(self).items()
                if k in ("steps", "lr", "accumulate", "seed", "trainable", "train_layers", "warmup",
                          "generated_per_case", "band", "band_weight", "held_out_every")}


@dataclass
class _Example:
    case_id: str
    origin: str
    batch: dict[str, Any]
    temperature: Any  # [rows, 1]
    teacher_p: Any  # [rows, options], temperature-scaled, padded options 0
    teacher_act: Any  # [rows, acts]
    rows: int


def _examples(agent: Any, cases: Sequence[dict[str, Any]], progress: Progress) -> list[_Example]:
    """Every case encoded as upstream encodes it, with the teacher's (the original's FP32) answers."""
    import torch
    from laya.common import QTYPES, collate_items, temp_bucket

    examples = []
    for n, case in enumerate(cases):
        try:
            accepted, items, _ = _encode_case(agent, case)
        except (ValueError, TypeError):
            continue  # a generated question the checkpoint's budget cannot take
        if not items:
            continue
        batch = collate_items([items], agent.tok.pad_token_id)
        temps = []
        for qid, item in zip(accepted, items, strict=True):
            qt = QTYPES[case["questions"][qid]["type"]]
            temps.append(agent.temperature_by_options.get(temp_bucket(qt, len(item["markers"])),
                                                          agent.temperature[qt]))
        temperature = torch.tensor(temps, dtype=torch.float32)[:, None]
        with torch.no_grad():
            logits, act = agent._forward(batch)
        p = torch.softmax(torch.from_numpy(logits) / temperature, -1) * batch["marker_mask"]
        examples.append(_Example(case["id"], case.get("origin", "selection"), batch, temperature, p,
                                 torch.from_numpy(act), len(items)))
        if (n + 1) % 100 == 0:
            progress("    qat: teacher answered %d/%d cases" % (n + 1, len(cases)))
    return examples


def _student_outputs(model: Any, example: _Example) -> tuple[Any, Any, Any, Any]:
    """(option probabilities, act probabilities, and their logarithms) of the student on one case."""
    import torch

    device = next(model.parameters()).device
    b = {k: v.to(device) for k, v in example.batch.items() if hasattr(v, "to")}
    logits, act_logits = model(b["input_ids"], b["attention_mask"], b["marker_pos"], b["marker_mask"], b["qtype"])
    log_p = torch.log_softmax(logits / example.temperature.to(device), -1).cpu()
    log_act = torch.log_softmax(act_logits, -1).cpu()
    return log_p.exp() * example.batch["marker_mask"], log_act.exp(), log_p, log_act


def _loss(outputs: tuple[Any, Any, Any, Any], example: _Example, band: float = 0.0, band_weight: float = 0.0) -> Any:
    """The squared differences of the option and act probabilities (what the gate reads), plus half the KL from
    the teacher's, plus `band_weight` x the squared part of each difference beyond `band`. The KL is taken on
    log-probabilities: a saturated wrong answer still has a gradient there, where squared probabilities (and a
    clamped log) have none. The band term is summed over rows, not averaged: the gate fails on one row."""
    import torch

    p, act, log_p, log_act = outputs
    mask = example.batch["marker_mask"]

    def kl(target: Any, log_ours: Any) -> Any:
        return (torch.xlogy(target, target) - target * log_ours.masked_fill(target == 0, 0.0)).sum(-1).mean()

    dp, dact = p - example.teacher_p, act - example.teacher_act
    squared = (dp ** 2).sum(-1).mean() + (dact ** 2).sum(-1).mean()
    beyond = (torch.relu(dp.abs() - band) ** 2).sum() + (torch.relu(dact.abs() - band) ** 2).sum()
    return squared + 0.5 * (kl(example.teacher_p * mask, log_p) + kl(example.teacher_act, log_act)) + \
        band_weight * beyond


def fidelity(model: Any, examples: Sequence[_Example]) -> dict[str, Any]:
    """The student (fake-quantized) against the teacher on `examples`: the gate's figures, in PyTorch."""
    import torch

    errors, act_errors, hard = [], [], 0
    with torch.no_grad():
        for example in examples:
            p, act, _, _ = _student_outputs(model, example)
            diff = (p - example.teacher_p).abs().amax(-1)
            errors += diff.tolist()
            act_errors += (act - example.teacher_act).abs().amax(-1).tolist()
            top2 = example.teacher_p.topk(2, -1).values
            flipped = p.argmax(-1) != example.teacher_p.argmax(-1)
            hard += int((flipped & (top2[:, 0] - top2[:, 1] >= HARD_MARGIN)).sum())
    errors.sort()
    return {"rows": len(errors), "max_probability_error": max(errors, default=0.0),
            "median_probability_error": errors[len(errors) // 2] if errors else 0.0,
            "max_action_error": max(act_errors, default=0.0), "hard_mismatches": hard}


def _figures(f: dict[str, Any]) -> str:
    return "max|dp| %.4f median %.2g, max|d act| %.4f, hard %d over %d rows" % (
        f["max_probability_error"], f["median_probability_error"], f["max_action_error"], f["hard_mismatches"],
        f["rows"])


def _measure(model: Any, selection: Sequence[_Example], held: Sequence[_Example]) -> dict[str, Any]:
    """Fidelity on the selection cases, and (`held_out`) on the generated cases the fine-tune never trains on:
    selection improving while they do not is a copy memorising its data, which the gate's confirmation refuses."""
    return dict(fidelity(model, selection), held_out=fidelity(model, held))


def training_order(examples: Sequence[_Example], settings: QatSettings) -> list[int]:
    """Which example each step trains on: shuffled epochs of every example but the held-out ones."""
    trained = [i for i, e in enumerate(examples) if not held_out(e.case_id, settings.held_out_every)]
    order = random.Random(settings.seed)
    return [i for _ in range(math.ceil(settings.steps / max(1, len(trained))) + 1)
            for i in order.sample(trained, len(trained))]


def _lr_factor(step: int, settings: QatSettings) -> float:
    if step < settings.warmup:
        return (step + 1) / settings.warmup
    span = max(1, settings.steps - settings.warmup)
    return 0.5 * (1 + math.cos(math.pi * min(1.0, (step - settings.warmup) / span)))


def write_tuned(original: Path, out: Path, tensors: dict[str, Any], record: dict[str, Any]) -> Path:
    """The original's files with `model.safetensors` rewritten (`tensors` replace theirs) and `laya_qat.json`."""
    from safetensors.torch import load_file, save_file

    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(original, out, ignore=shutil.ignore_patterns("model.safetensors", QAT_RECORD))
    weights = load_file(str(original / "model.safetensors"))
    unknown = sorted(set(tensors) - set(weights))
    if unknown:
        raise QatError("tuned tensors the original does not have: %s" % ", ".join(unknown[:5]))
    weights.update({name: value.contiguous() for name, value in tensors.items()})
    save_file(weights, str(out / "model.safetensors"))
    tuned = sha256_file(out / "model.safetensors")
    if record.get("tuned_weights_sha256") not in (None, tuned):
        raise QatError("the tuned weights written to %s are not the ones recorded (%s…)"
                         % (out, str(record["tuned_weights_sha256"])[:12]))
    record = dict(record, tuned_weights_sha256=tuned)
    (out / QAT_RECORD).write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return out


def tuned_record(checkpoint_dir: Path) -> dict[str, Any] | None:
    """The fine-tune record of a tuned copy, or None for an ordinary checkpoint."""
    path = Path(checkpoint_dir) / QAT_RECORD
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def fine_tune(checkpoint_dir: Path, goldens: dict[str, Any], settings: QatSettings, work_dir: Path,
              progress: Progress = lambda _m: None) -> Path:
    """The tuned copy of `checkpoint_dir` in `work_dir/checkpoint` (its record in `laya_qat.json`).

    A finished copy with the same reference and recipe is reused; `settings.resume` continues a run from the
    state saved in `work_dir`. The goldens must be the original's (they decide nothing here but the data)."""
    checkpoint_dir, work_dir = Path(checkpoint_dir), Path(work_dir)
    reference = weights_sha256(checkpoint_dir)
    if goldens.get("checkpoint", {}).get("weights_sha256") != reference:
        raise QatError("quantization-aware fine-tuning needs the goldens of %s itself (its upstream FP32 is the "
                         "teacher and the gate's reference)" % checkpoint_dir)
    out = work_dir / CHECKPOINT_DIR
    done = tuned_record(out)
    if done is not None and done.get("reference_weights_sha256") == reference and \
            done.get("recipe") == settings.recipe() and weights_sha256(out) == done.get("tuned_weights_sha256"):
        progress("    qat: reusing the tuned copy in %s (%s)" % (out, _figures(done["fidelity"]["after"])))
        return out
    work_dir.mkdir(parents=True, exist_ok=True)
    examples, data = teacher_examples(checkpoint_dir, goldens, settings, progress)
    tensors, record = train(checkpoint_dir, examples, data, settings, work_dir, progress)
    return write_tuned(checkpoint_dir, out, tensors, record)


def teacher_examples(checkpoint_dir: Path, goldens: dict[str, Any], settings: QatSettings,
                     progress: Progress = lambda _m: None) -> tuple[list[_Example], dict[str, Any]]:
    """The training cases (`qat_data`) with the original's upstream FP32 answers, on the CPU as the goldens."""
    import laya
    import torch

    cases, data = training_cases(goldens, settings.seed, settings.generated_per_case)
    progress("    qat: %d training cases (%d selection, %d generated from them); teacher: upstream FP32 of %s"
             % (len(cases), data["selection_cases"], data["generated_cases"], checkpoint_dir))
    before, started = torch.get_num_threads(), time.perf_counter()
    torch.set_num_threads(settings.threads)
    try:
        agent = laya.Agent(str(checkpoint_dir), device="cpu")
        examples = _examples(agent, cases, progress)
    finally:
        torch.set_num_threads(before)
    progress("    qat: the teacher answered %d cases in %.0f s" % (len(examples), time.perf_counter() - started))
    data["rows"] = sum(e.rows for e in examples)
    data["cases_used"] = len(examples)
    return examples, data


def train(checkpoint_dir: Path, examples: Sequence[_Example], data: dict[str, Any], settings: QatSettings,
          work_dir: Path, progress: Progress = lambda _m: None) -> tuple[dict[str, Any], dict[str, Any]]:
    """Fine-tune a copy of `checkpoint_dir` on `examples`; (its trained tensors in FP16, the record)."""
    import torch

    before_threads = torch.get_num_threads()
    torch.set_num_threads(settings.threads)
    try:
        return _train(checkpoint_dir, examples, data, settings, Path(work_dir), progress)
    finally:
        torch.set_num_threads(before_threads)


def _record(settings: QatSettings, data: dict[str, Any], names: Sequence[str], values: int, quantized: int,
            reference: str, before: dict[str, Any], after: dict[str, Any], seconds: float) -> dict[str, Any]:
    import torch

    return {
        "method": "quantization-aware fine-tuning, distilled from the original's upstream FP32",
        "library": "torch %s: torch.ao.nn.qat.Linear, FakeQuantize (MovingAveragePerChannelMinMaxObserver, "
                   "averaging 1, per-channel symmetric [%d, %d]); default_dynamic_fake_quant on MatMul inputs"
                   % (torch.__version__, *WEIGHT_RANGE),
        "scheme": "the artifact's dynamic int8: per-channel %d-bit symmetric weights, uint8 per-tensor dynamic "
                  "activations, every encoder MatMul" % (7 if REDUCE_RANGE else 8),
        "recipe": settings.recipe(),
        "loss": "squared error + 0.5 x KL (on log-probabilities) of the option (temperature-scaled) and act "
                "probabilities + band_weight x the squared part of each difference beyond band (summed over rows)",
        "optimizer": "AdamW, no weight decay, linear warmup then cosine, grad norm 1.0, one case a step, "
                     "gradients accumulated over `accumulate` steps",
        "data": data, "steps": settings.steps, "seed": settings.seed, "device": settings.device,
        "trained_tensors": len(names), "trained_values": values, "stored": "trained tensors in FP16",
        "fake_quantized_matmuls": quantized, "reference_weights_sha256": reference,
        "fidelity": {"measured_on": "selection cases, PyTorch fake quantization vs the teacher; held_out: the "
                                   "generated cases never trained on (held_out_every)",
                     "before": before, "after": after},
        "seconds": round(seconds, 1), "threads": settings.threads,
    }


def _train(checkpoint_dir: Path, examples: Sequence[_Example], data: dict[str, Any], settings: QatSettings,
           work_dir: Path, progress: Progress) -> tuple[dict[str, Any], dict[str, Any]]:
    import torch

    from laya_artifacts.export.onnx_export import load_reference

    started = time.perf_counter()
    reference = weights_sha256(checkpoint_dir)
    torch.manual_seed(settings.seed)
    selection = [e for e in examples if e.origin == "selection"]
    held = [e for e in examples if held_out(e.case_id, settings.held_out_every)]
    model, _tok, _cfg = load_reference(checkpoint_dir)
    quantized = attach_fake_quant(model)
    model.to(settings.device)
    names = trainable_names(model, settings.trainable, settings.train_layers)
    for name, param in model.named_parameters():
        param.requires_grad_(name in names)
    params = dict(model.named_parameters())
    optimizer = torch.optim.AdamW([params[n] for n in names], lr=settings.lr, weight_decay=0.0)
    work_dir.mkdir(parents=True, exist_ok=True)
    state_path = work_dir / STATE_FILE
    start, before, spent = restore(state_path, settings.resume, settings.steps, settings.recipe(), reference, params,
                                   optimizer, progress)
    if before is None:
        before = _measure(model, selection, held)
    values = sum(params[n].numel() for n in names)
    progress("    qat: %d encoder MatMuls fake-quantized, %d tensors trained (%s, top %d layers, %.1fM values); "
             "before: %s" % (len(quantized), len(names), settings.trainable, settings.train_layers, values / 1e6,
                             _figures(before)))
    sequence = training_order(examples, settings)
    ema, t0, cpu0 = None, time.perf_counter(), time.process_time()
    for step in range(start, settings.steps):
        for group in optimizer.param_groups:
            group["lr"] = settings.lr * _lr_factor(step, settings)
        example = examples[sequence[step]]
        loss = _loss(_student_outputs(model, example), example, settings.band, settings.band_weight)
        (loss / settings.accumulate).backward()
        if (step + 1) % settings.accumulate == 0 or step + 1 == settings.steps:
            torch.nn.utils.clip_grad_norm_([params[n] for n in names], 1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        value = float(loss.detach())
        ema = value if ema is None else 0.9 * ema + 0.1 * value
        done = step + 1
        if done % settings.log_every == 0 or done == settings.steps:
            rate = (time.perf_counter() - t0) / (done - start)
            cpu = (time.process_time() - cpu0) / (done - start)  # what a step costs where neighbours take the CPU
            progress("    qat: step %d/%d loss %.4g (ema), %.3f s/step (%.3f CPU s), about %.1f min left"
                     % (done, settings.steps, ema, rate, cpu, rate * (settings.steps - done) / 60))
        if done % settings.save_every == 0 and done % settings.accumulate == 0 and done < settings.steps:
            save_state(state_path, done, model, names, optimizer, settings.recipe(), reference, before,
                        spent + time.perf_counter() - started)
    # What ships is what upstream's own checkpoints hold: FP16 tensors. Measured after that rounding.
    tensors = {n: params[n].detach().cpu().half() for n in names}
    with torch.no_grad():
        for n in names:
            params[n].copy_(tensors[n].float())
    after = _measure(model, selection, held)
    seconds = spent + time.perf_counter() - started
    progress("    qat: after %d steps (%.0f s): %s" % (settings.steps, seconds, _figures(after)))
    if held:
        progress("    qat: generated cases never trained on, before %s; after %s"
                 % (_figures(before["held_out"]), _figures(after["held_out"])))
    record = _record(settings, data, names, values, len(quantized), reference, before, after, seconds)
    state_path.unlink(missing_ok=True)
    return tensors, record
