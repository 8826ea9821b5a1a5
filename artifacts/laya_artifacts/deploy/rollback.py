"""Pointer history and rollback: `laya-artifacts rollback NAME TARGET` points back at the previous artifact.

A pointer (`pointers/<checkpoint>/<target>.json`) names the published artifact and keeps the ones it named
before, newest first (`history`, at most `HISTORY` of them). Each was gated before it was published, and
artifacts are immutable, so going back is one compare-and-swap of the pointer, as publishing is: a
concurrent publish or rollback makes this one fail rather than interleave. The artifact rolled back from
leaves the history and is kept in `forward` (newest first) for `roll_forward`; `--from ID` makes a retry
a no-op instead of a second step back. The destination is checked as the deployment would check it (its name,
its gate verdict, and with the deployment's keys its signature), and with keys the move is a signed release
record (`laya_serverless.artifact.releases`), so what the pointer names next can be served.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from laya_artifacts.deploy.sign import sign_release
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


def _pointer(store: ObjectStore, checkpoint: str, target: str) -> tuple[dict[str, Any], list[str], str]:
    """(the pointer's record, its chain: served artifact then history, its version)."""
    found = store.read(pointer_key(checkpoint, target))
    if found is None:
        raise ArtifactError("nothing is published for %s/%s in %s: there is nothing to roll back"
                            % (checkpoint, target, store.uri))
    try:
        record = json.loads(found[0])
        forward = [a for a in record.get("forward", []) if isinstance(a, str)]
    except (ValueError, AttributeError, TypeError):
        record, forward = {}, []
    return {**record, "forward": forward}, _history(found[0]), found[1]


def servable(store: ObjectStore, artifact_id: str, checkpoint: str, target: str, keys: tuple[str, ...] = ()) -> str:
    """Refuse a destination the deployment would refuse: another name, a failed gate, or (with `keys`, the
    deployment's LAYA_ARTIFACT_KEYS) no valid signature by one of them. Returns its revision."""
    from laya_serverless.artifact.signature import trusted_keys, verify_signed
    from laya_serverless.artifact.trust import check_binding

    _, manifest = read_manifest(store, artifact_id)  # still there and whole: checked against its id
    named = (manifest.raw["configuration"].get("checkpoint") or {}).get("name")
    if (named, manifest.target) != (checkpoint, target):
        raise ArtifactError("artifact %s in the history of %s/%s is %s/%s: the pointer was edited by hand"
                            % (artifact_id, checkpoint, target, named, manifest.target))
    check_binding(manifest, artifact_id, checkpoint, target)
    if keys:
        verify_signed(store, artifact_id, trusted_keys(keys))
    return str(manifest.revision) if manifest.revision is not None else ""


@dataclass(frozen=True)
class Move:
    action: str
    to: str
    record: bytes
    version: str
    keys: tuple[str, ...] = ()
    signer: Any = None


def _move(store: ObjectStore, checkpoint: str, target: str, move: Move, progress: Callable[[str], None]) -> None:
    """Sign the release of a destination `servable` passed (with keys the runtime checks it), then swap the pointer."""
    from laya_serverless.artifact.signature import trusted_keys

    if move.keys and (move.signer is None or move.signer.key_id not in trusted_keys(move.keys)):
        raise ArtifactError("signing is configured (%s): a %s needs --sign-key with one of those keys, or the "
                            "deployment refuses the pointer as an older artifact served as the latest"
                            % (", ".join(move.keys), move.action))
    if move.signer is not None:
        release = sign_release(store, checkpoint, target, move.to, move.action, move.signer)
        progress("signed release %d of %s/%s (%s)" % (release.serial, checkpoint, target, move.action))
    if not store.swap(pointer_key(checkpoint, target), move.record, move.version):
        raise ArtifactError("the pointer %s moved during the %s; nothing was overwritten, run it again"
                            % (pointer_key(checkpoint, target), move.action))


def _guard(current: str, expect_from: str | None) -> None:
    if expect_from is not None and current != expect_from:
        raise ArtifactError("the pointer names %s, not the --from %s: it moved since (a retry, or another operator); "
                            "nothing was changed" % (current, expect_from))


def rollback(store: ObjectStore, checkpoint: str, target: str, progress: Callable[[str], None] = lambda _m: None,
             *, to: str | None = None, expect_from: str | None = None, keys: tuple[str, ...] = (),
             signer: Any = None) -> tuple[str, str]:
    """Point (checkpoint, target) back at the artifact it named before (or at `to`, one of its history), refused
    unless that artifact is servable (`servable`) and the pointer still names `expect_from` when given; returns
    (from, to) artifact ids. The artifacts passed over are kept for `roll_forward`."""
    record, chain, version = _pointer(store, checkpoint, target)
    current, earlier = chain[0], chain[1:]
    _guard(current, expect_from)
    if not earlier:
        raise ArtifactError("the pointer for %s/%s in %s remembers no earlier artifact (it names %s only): "
                            "publish the one to go back to" % (checkpoint, target, store.uri, current))
    destination = to or earlier[0]
    if destination not in earlier:
        raise ArtifactError("--to %s is not in the history of %s/%s (%s)"
                            % (destination, checkpoint, target, ", ".join(a[:12] for a in earlier)))
    index = chain.index(destination)
    revision = servable(store, destination, checkpoint, target, keys)
    forward = [*reversed(chain[:index]), *record["forward"]][:HISTORY]
    data = json.dumps({"artifact": destination, "checkpoint": checkpoint, "target": target, "revision": revision
                       or None, "history": chain[index + 1:], "rolled_back_from": current, "forward": forward},
                      sort_keys=True).encode()
    _move(store, checkpoint, target, Move("rollback", destination, data, version, keys, signer), progress)
    progress("rolled %s/%s back from %s to %s in %s" % (checkpoint, target, current, destination, store.uri))
    return current, destination


def roll_forward(store: ObjectStore, checkpoint: str, target: str, progress: Callable[[str], None] = lambda _m: None,
                 *, expect_from: str | None = None, keys: tuple[str, ...] = (), signer: Any = None) -> tuple[str, str]:
    """Undo the last rollback: point at the artifact it passed over most recently; returns (from, to)."""
    record, chain, version = _pointer(store, checkpoint, target)
    _guard(chain[0], expect_from)
    if not record["forward"]:
        raise ArtifactError("%s/%s has not been rolled back since it was published: there is nothing to roll "
                            "forward to" % (checkpoint, target))
    destination, later = record["forward"][0], record["forward"][1:]
    revision = servable(store, destination, checkpoint, target, keys)
    data = json.dumps({"artifact": destination, "checkpoint": checkpoint, "target": target, "revision": revision
                       or None, "history": chain[:HISTORY], "forward": later}, sort_keys=True).encode()
    _move(store, checkpoint, target, Move("roll-forward", destination, data, version, keys, signer), progress)
    progress("rolled %s/%s forward from %s to %s in %s" % (checkpoint, target, chain[0], destination, store.uri))
    return chain[0], destination


def release_dates(store: ObjectStore, checkpoint: str, target: str) -> dict[str, str]:
    """artifact id -> "<date> <action>" of the latest release record naming it (unverified: for display)."""
    from laya_serverless.artifact.releases import parse_release, release_key, serials

    dates: dict[str, str] = {}
    for serial, holders in sorted(serials(store, checkpoint, target).items()):
        found = store.read(release_key(checkpoint, target, serial, holders[0]))
        try:
            release, _ = parse_release(found[0] if found else b"", checkpoint, target, serial, holders[0])
        except ArtifactError:
            continue
        dates[release.artifact] = "%s %s" % (release.created, release.action)
    return dates


def history_rows(store: ObjectStore, checkpoint: str, target: str, keys: tuple[str, ...] = ()) -> list[str]:
    """`laya-artifacts list --history`: each artifact the pointer knows, with the date of its latest release record,
    its gate verdict and its signature state (against `keys` when given, else the keys that signed it)."""
    from laya_serverless.artifact.layout import SIGNATURES_DIR
    from laya_serverless.artifact.signature import trusted_keys, verify_signed

    record, chain, _ = _pointer(store, checkpoint, target)
    trusted = trusted_keys(keys) if keys else {}
    dated = release_dates(store, checkpoint, target)
    rows = []
    for role, artifact_id in ([("forward", a) for a in reversed(record["forward"])] + [("served", chain[0])]
                              + [("history", a) for a in chain[1:]]):
        try:
            _, manifest = read_manifest(store, artifact_id)
            created = dated.get(artifact_id, "no release record")
            gate = "gate passed" if (manifest.raw.get("parity") or {}).get("passed") is True else "gate FAILED"
        except ArtifactError as exc:
            created, gate = "?", "unreadable: %s" % exc
        signers = [k.rsplit("/", 1)[-1].removesuffix(".json")[:12]
                   for k in store.list("artifacts/%s/%s/" % (artifact_id, SIGNATURES_DIR))]
        if trusted:
            try:
                state = "signed by a trusted key %s" % verify_signed(store, artifact_id, trusted)[:12]
            except ArtifactError:
                state = "NOT signed by a trusted key"
        else:
            state = "signed by %s" % ", ".join(signers) if signers else "unsigned"
        rows.append("  %-8s %s  %s  %s  %s" % (role, artifact_id, created, gate, state))
    return rows


__all__ = ["HISTORY", "Move", "history_rows", "pointer_record", "roll_forward", "rollback", "servable"]
