"""Session-scoped test checkpoints and artifacts: built once per run, offline, in a temp dir."""

from __future__ import annotations

from pathlib import Path

import pytest


def _build(tmp_path_factory: pytest.TempPathFactory, kind: str) -> tuple[Path, Path]:
    from laya_artifacts.checkpoints import make_checkpoint
    from laya_artifacts.export import export_checkpoint

    root = tmp_path_factory.mktemp(kind)
    checkpoint = make_checkpoint(kind, root / "checkpoint", seed=0)
    artifact = export_checkpoint(checkpoint, root / "artifact-cpu-fp32")
    return checkpoint, artifact


@pytest.fixture(scope="session")
def minilm(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(checkpoint dir, FP32 artifact dir) of the pretrained MiniLM encoder with a seeded head."""
    return _build(tmp_path_factory, "minilm")


@pytest.fixture(scope="session")
def tiny_modernbert(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(checkpoint dir, FP32 artifact dir) of a tiny random ModernBERT with a byte-level BPE tokenizer."""
    return _build(tmp_path_factory, "tiny-modernbert")
