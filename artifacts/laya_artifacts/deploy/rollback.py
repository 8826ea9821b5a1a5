"""Pointer history and rollback: `laya-artifacts rollback NAME TARGET` points back at the previous artifact.

A pointer (`pointers/<checkpoint>/<target>.json`) names the published artifact and keeps the ones it named
before, newest first (`history`, at most `HISTORY` of them). Each was gated before it was published, and
artifacts are immutable, so going back is one compare-and-swap of the pointer, as publishing is: a
concurrent publish or rollback makes this one fail rather than interleave. The artifact rolled back from
leaves the history (a second rollback goes one further back) and is recorded as `rolled_back_from`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from laya_serverless.artifact.fetch import read_manifest
from laya_serverless.artifact.store import ObjectStore, pointer_key
from laya_serverless.errors import ArtifactError

HISTORY = 20  # artifacts a pointer remembers


def _history(previous: bytes | None) -> list[str]:
    """The previous pointer's artifact, then its own history (a pointer from before history was kept has none)."""
    if previous is None:
        return []
    try:
        record = json.loads(previous)
        older = [a for a in record.get("history", []) if isinstance(a, str)]
        return [str(record["artifact"]), *older]
    except (ValueError, KeyError, TypeError, AttributeError):
        return []


def pointer_record(artifact_id: str, checkpoint: str, target: str, revision: str | None,
                   previous: bytes | None, **extra: Any) -> bytes:
    """The pointer naming `artifact_id`, remembering what `previous` (the pointer's bytes before) named."""
    chain = _history(previous)
    # Publishing the served artifact again changes nothing; an older one moves to the front.
    history = chain[1:] if chain[:1] == [artifact_id] else [a for a in chain if a != artifact_id]
    history = history[:HISTORY]
    return json.dumps({"artifact": artifact_id, "checkpoint": checkpoint, "target": target, "revision": revision,
                       "history": history, **extra}, sort_keys=True).encode()


def rollback(store: ObjectStore, checkpoint: str, target: str,
             progress: Callable[[str], None] = lambda _m: None) -> tuple[str, str]:
    """Point (checkpoint, target) back at the artifact it named before; returns (from, to) artifact ids."""
    key = pointer_key(checkpoint, target)
    found = store.read(key)
    if found is None:
        raise ArtifactError("nothing is published for %s/%s in %s: there is nothing to roll back"
                            % (checkpoint, target, store.uri))
    history = _history(found[0])
    current, earlier = history[0], history[1:]
    if not earlier:
        raise ArtifactError("the pointer for %s/%s in %s remembers no earlier artifact (it names %s only): "
                            "publish the one to go back to" % (checkpoint, target, store.uri, current))
    previous = earlier[0]
    _, manifest = read_manifest(store, previous)  # still there and whole: checked against its id
    if (manifest.checkpoint.get("name"), manifest.target) != (checkpoint, target):
        raise ArtifactError("artifact %s in the history of %s/%s is %s/%s: the pointer was edited by hand"
                            % (previous, checkpoint, target, manifest.checkpoint.get("name"), manifest.target))
    record = json.dumps({"artifact": previous, "checkpoint": checkpoint, "target": target,
                         "revision": manifest.revision, "history": earlier[1:], "rolled_back_from": current},
                        sort_keys=True).encode()
    if not store.swap(key, record, found[1]):
        raise ArtifactError("the pointer %s moved during the rollback; nothing was overwritten, run it again" % key)
    progress("rolled %s/%s back from %s to %s in %s" % (checkpoint, target, current, previous, store.uri))
    return current, previous


__all__ = ["HISTORY", "pointer_record", "rollback"]
