"""Where a checkpoint to build comes from: a local Laya checkpoint directory, a Hugging Face id, or the demo."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from .demo import DEMO_NAME, demo_checkpoint


def resolve_checkpoint(reference: str, revision: str | None,
                       progress: Callable[[str], None] = lambda _m: None) -> tuple[Path, str, str | None]:
    """(local directory, name, revision): a local checkpoint as is, else a Hugging Face id downloaded."""
    local = Path(reference)
    if local.is_dir():
        if not (local / "rl_agent_config.json").is_file():
            raise FileNotFoundError("%s is not a Laya checkpoint directory (no rl_agent_config.json)" % local)
        return local, local.resolve().name, revision
    if reference.startswith((".", "/", "~")) or reference.count("/") > 2:
        raise FileNotFoundError("local checkpoint %s does not exist" % reference)
    from huggingface_hub import snapshot_download

    parts = reference.split("/")
    repo, subfolder = "/".join(parts[:2]), "/".join(parts[2:]) or None
    prefix = subfolder + "/" if subfolder else ""
    patterns = [prefix + p for p in ("rl_agent_config.json", "model.safetensors", "tokenizer/*", "encoder/*")]
    progress("downloading %s at revision %s" % (reference, revision or "main"))
    path = Path(snapshot_download(repo, revision=revision, allow_patterns=patterns))
    return (path / subfolder if subfolder else path), reference, path.name


def resolve_source(reference: str, revision: str | None, cache: Path,
                   progress: Callable[[str], None] = lambda _m: None) -> tuple[Path, str, str | None]:
    """`resolve_checkpoint`, and `demo` for the shipped demo, assembled once under `cache` (`demo_checkpoint`)."""
    if reference == DEMO_NAME:
        return demo_checkpoint(cache, progress), DEMO_NAME, None
    return resolve_checkpoint(reference, revision, progress)


__all__ = ["resolve_checkpoint", "resolve_source"]
