"""A quantization-aware fine-tune's saved state (`finetune`): written every `save_every` steps, read by `resume`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from laya_artifacts.errors import QatError

STATE_FILE = "qat_state.pt"


def save_state(path: Path, step: int, model: Any, names: Sequence[str], optimizer: Any, recipe: dict[str, Any],
               reference: str, before: dict[str, Any], seconds: float) -> None:
    import torch

    params = dict(model.named_parameters())
    tmp = path.with_suffix(".tmp")
    torch.save({"step": step, "trainable": {n: params[n].detach().cpu().clone() for n in names},
                "optimizer": optimizer.state_dict(), "recipe": recipe, "reference": reference,
                "before": before, "seconds": seconds, "rng": torch.get_rng_state()}, tmp)
    tmp.replace(path)


def restore(state_path: Path, resume: bool, steps: int, recipe: dict[str, Any], reference: str, params: dict[str, Any],
            optimizer: Any, progress: Callable[[str], None]) -> tuple[int, dict[str, Any] | None, float]:
    """(step, fidelity before, seconds spent) of a saved run when resuming; (0, None, 0) otherwise."""
    import torch

    if not (resume and state_path.is_file()):
        return 0, None, 0.0
    state = torch.load(state_path, weights_only=False)
    if state["reference"] != reference or state["recipe"] != recipe:
        raise QatError("%s is a fine-tune of other weights or with another recipe; remove it or drop --resume"
                         % state_path)
    with torch.no_grad():
        for name, value in state["trainable"].items():
            params[name].copy_(value)
    optimizer.load_state_dict(state["optimizer"])
    torch.set_rng_state(state["rng"])
    progress("    qat: resuming at step %d/%d from %s" % (state["step"], steps, state_path))
    return state["step"], state["before"], state["seconds"]
