"""Session-scoped test checkpoints and artifacts: built once per run, offline, in a temp dir."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GOLDENS = ROOT / "goldens"


def _build(tmp_path_factory: pytest.TempPathFactory, kind: str) -> tuple[Path, Path]:
    from laya_artifacts.checkpoints import make_checkpoint
    from laya_artifacts.export import export_checkpoint

    root = tmp_path_factory.mktemp(kind)
    checkpoint = make_checkpoint(kind, root / "checkpoint", seed=0)
    artifact = export_checkpoint(checkpoint, root / "export-fp32")
    return checkpoint, artifact


@pytest.fixture(scope="session")
def minilm(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(checkpoint dir, raw FP32 export) of the pretrained MiniLM encoder with a seeded head."""
    return _build(tmp_path_factory, "minilm")


@pytest.fixture(scope="session")
def tiny_modernbert(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(checkpoint dir, raw FP32 export) of a tiny random ModernBERT with a byte-level BPE tokenizer."""
    return _build(tmp_path_factory, "tiny-modernbert")


@pytest.fixture(scope="session")
def tiny_fp32(tmp_path_factory: pytest.TempPathFactory, tiny_modernbert: tuple[Path, Path]) -> Path:
    """A gated, manifested cpu-fp32 artifact of the tiny ModernBERT, against the committed goldens.

    The store, handler and service tests use it: FP32 passes its gate on every x86 CPU, while
    int8 results depend on the CPU's instruction set (VNNI or not), so an int8 fixture would tie
    those tests to one CPU family."""
    from laya_artifacts.build import build_artifact

    out = tmp_path_factory.mktemp("tiny-fp32") / "artifact"
    build_artifact(tiny_modernbert[0], "cpu-fp32", out, name="tiny-modernbert",
                   goldens_path=GOLDENS / "tiny-modernbert" / "goldens.json")
    return out


@pytest.fixture(scope="session")
def tiny_int8(tmp_path_factory: pytest.TempPathFactory, tiny_modernbert: tuple[Path, Path]) -> Path:
    """A gated, manifested cpu-int8 artifact of the tiny ModernBERT, against the committed goldens."""
    from laya_artifacts.build import build_artifact

    out = tmp_path_factory.mktemp("tiny-int8") / "artifact"
    build_artifact(tiny_modernbert[0], "cpu-int8", out, name="tiny-modernbert",
                   goldens_path=GOLDENS / "tiny-modernbert" / "goldens.json")
    return out
