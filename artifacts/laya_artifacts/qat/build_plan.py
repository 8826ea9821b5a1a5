"""A quantization-aware build (`BuildSpec(..., quantization_aware=...)`): which checkpoint is exported and
searched, and the rule that a tuned copy is gated against its original's goldens, never its own."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from laya_artifacts.errors import QatError
from laya_artifacts.qat.finetune import QAT_CANDIDATES, Progress, QatSettings, _figures, fine_tune, tuned_record


def check_reference(record: dict[str, Any], goldens: dict[str, Any]) -> None:
    """A tuned copy is gated against its original's goldens, never its own (`ValueError` otherwise)."""
    recorded = goldens.get("checkpoint", {}).get("weights_sha256")
    if recorded != record.get("reference_weights_sha256"):
        raise QatError("this checkpoint is a quantization-aware copy of weights %s…; gate it against the "
                         "original's goldens (--goldens), not goldens of %s…"
                         % (str(record.get("reference_weights_sha256"))[:12], str(recorded)[:12]))


def prepare_build(checkpoint_dir: Path, goldens: dict[str, Any], target: str, candidates: Sequence[str] | None,
                  settings: QatSettings | None, out_dir: Path,
                  progress: Progress = lambda _m: None) -> tuple[Path, Sequence[str] | None, dict[str, Any] | None]:
    """What `build_artifact` exports and searches: (checkpoint, candidates, fine-tune record).

    With `settings`, the checkpoint is fine-tuned first (kept in `settings.work_dir`, by default beside
    `out_dir`) and its tuned copy is built; a checkpoint that already is a tuned copy (`laya_qat.json`) is
    built as it is. Either way the goldens must be the original's, and the search starts with the candidate
    the copy was tuned for (`QAT_CANDIDATES`) unless `candidates` says otherwise. Other checkpoints pass."""
    from laya_serverless.artifact.targets import CPU_INT8

    record = tuned_record(checkpoint_dir)
    if settings is None and record is None:
        return checkpoint_dir, candidates, None
    if target != CPU_INT8:
        raise QatError("quantization-aware fine-tuning is for %s; %s builds the original checkpoint"
                         % (CPU_INT8, target))
    if settings is not None:
        if record is not None:
            raise QatError("%s is already a quantization-aware copy; build it without --quantization-aware"
                             % checkpoint_dir)
        work_dir = settings.work_dir or Path(out_dir).parent / ("%s.qat" % Path(out_dir).name)
        progress("    quantization-aware fine-tune of a copy of %s in %s (%d steps%s)"
                 % (checkpoint_dir, work_dir, settings.steps, ", resuming" if settings.resume else ""))
        checkpoint_dir = fine_tune(checkpoint_dir, goldens, settings, work_dir, progress)
        record = tuned_record(checkpoint_dir)
    if record is None:  # a fine-tune always writes its record
        raise QatError("%s holds no fine-tune record" % checkpoint_dir)
    check_reference(record, goldens)
    return checkpoint_dir, list(candidates) if candidates else list(QAT_CANDIDATES), record


def trade_off(record: dict[str, Any]) -> str:
    """The fine-tune's effect in one line, for the report (PyTorch fake quantization, selection cases)."""
    fid = record["fidelity"]
    line = "quantization-aware fine-tune (%d steps, %s): on selection, in PyTorch, before %s; after %s" % (
        record["steps"], record["recipe"]["trainable"], _figures(fid["before"]), _figures(fid["after"]))
    held = fid["after"].get("held_out")
    if held and held.get("rows"):  # an overfit copy shows here before the gate's confirmation split refuses it
        line += "; generated cases never trained on, before %s; after %s" % (
            _figures(fid["before"]["held_out"]), _figures(held))
    return line
