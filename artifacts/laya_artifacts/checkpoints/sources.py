"""Where a checkpoint to build comes from: a local Laya checkpoint directory, a Hugging Face id, or the demo."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from laya_artifacts.checkpoints.demo import DEMO_NAME, demo_checkpoint
from laya_artifacts.errors import CheckpointError, CheckpointNotFound
from laya_serverless.artifact.manifest import sha256_file

COMMIT = re.compile(r"^[0-9a-f]{40}$")


def weights_sha256(checkpoint_dir: Path) -> str:
    """The checkpoint's identity everywhere a build records one: the sha256 of its weights file."""
    return sha256_file(Path(checkpoint_dir) / "model.safetensors")


def resolve_checkpoint(reference: str, revision: str | None,
                       progress: Callable[[str], None] = lambda _m: None) -> tuple[Path, str, str | None]:
    """(local directory, name, revision): a local checkpoint as is (no revision: it has none to pin), else a
    Hugging Face id at `revision` (a branch, tag or commit; default main), its revision returned as the commit
    it resolved to, so that the manifest pins what was built. The hub's own settings apply (`HF_HUB_OFFLINE=1`
    reads the cache only, `HF_HUB_CACHE` says where it is)."""
    local = Path(reference)
    if local.is_dir():
        if not (local / "rl_agent_config.json").is_file():
            raise CheckpointNotFound("%s is not a Laya checkpoint directory (no rl_agent_config.json)" % local)
        if revision is not None:
            raise ValueError("--revision %s names a Hugging Face revision; %s is a local directory, which has none"
                             % (revision, local))
        # absolute from here on: a relative `owner/name` path must never reach a loader that would take it for a hub id
        return local.resolve(), local.resolve().name, None
    if reference.startswith((".", "/", "~")) or reference.count("/") > 2:
        raise CheckpointNotFound("local checkpoint %s does not exist" % reference)
    from huggingface_hub import snapshot_download

    parts = reference.split("/")
    repo, subfolder = "/".join(parts[:2]), "/".join(parts[2:]) or None
    prefix = subfolder + "/" if subfolder else ""
    patterns = [prefix + p for p in ("rl_agent_config.json", "model.safetensors", "tokenizer/*", "encoder/*")]
    progress("fetching %s at revision %s" % (reference, revision or "main"))
    path = Path(snapshot_download(repo, revision=revision, allow_patterns=patterns))
    commit = path.name  # the hub cache keeps every revision under snapshots/<commit>
    if not COMMIT.match(commit):
        raise CheckpointError("the hub returned %s for %s, not a snapshot named by its commit" % (path, reference))
    if revision != commit:
        progress("%s resolved to commit %s" % (revision or "main", commit))
    checkpoint = path / subfolder if subfolder else path
    if not (checkpoint / "rl_agent_config.json").is_file():
        raise CheckpointNotFound("%s at %s is not a Laya checkpoint (no rl_agent_config.json)" % (reference, commit))
    return checkpoint, reference, commit


def resolve_source(reference: str, revision: str | None, cache: Path,
                   progress: Callable[[str], None] = lambda _m: None) -> tuple[Path, str, str | None]:
    """`resolve_checkpoint`, and `demo` for the shipped demo, assembled once under `cache` (`demo_checkpoint`)."""
    if reference == DEMO_NAME:
        if revision is not None:
            raise ValueError("--revision %s names a Hugging Face revision; the demo has none" % revision)
        return demo_checkpoint(cache, progress), DEMO_NAME, None
    return resolve_checkpoint(reference, revision, progress)


__all__ = ["resolve_checkpoint", "resolve_source", "weights_sha256"]
