"""Publish a gated artifact to a store, and import one built elsewhere after re-gating it here.

Publishing uploads every file under `artifacts/<id>/` (the id is the sha256 of manifest.json),
reads each back and checks its hash, writes the manifest last, and only then moves the pointer
of (checkpoint, target) by compare-and-swap: a concurrent publish makes this one fail loudly
rather than interleave.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from laya_artifacts.deploy.rollback import pointer_record
from laya_artifacts.deploy.sign import Signer, sign_artifact, sign_release, upload_signatures
from laya_serverless.artifact.fetch import fetch_published
from laya_serverless.artifact.layout import MANIFEST_FILE
from laya_serverless.artifact.manifest import sha256_file, verify_artifact, verify_file
from laya_serverless.artifact.store import ObjectStore, artifact_key, pointer_key
from laya_serverless.errors import ArtifactError
from laya_serverless.gate.regate import goldens_key, publish_goldens, record_gate
from laya_serverless.gate.replay import GateReport, run_gate


def _upload_verified(store: ObjectStore, key: str, source: Path, name: str, expected: dict[str, Any]) -> None:
    store.upload(key, source)
    with tempfile.TemporaryDirectory(prefix="laya-publish-") as scratch:
        echo = Path(scratch) / "echo"
        verify_file(echo, name, expected, sha256=store.download(key, echo))


def publish(artifact_dir: Path, store: ObjectStore, progress: Callable[[str], None] = lambda _m: None,
            signer: Signer | None = None) -> str:
    """Upload a verified artifact (signed by `signer` first, when given) with its signatures and point
    (checkpoint, target) at it, keeping the artifacts it pointed at before (`rollback`); returns the artifact id."""
    manifest = verify_artifact(Path(artifact_dir))
    if signer is not None:
        progress("signed with key %s (%s)" % (sign_artifact(Path(artifact_dir), signer).stem[:12], signer.source))
    manifest_bytes = (Path(artifact_dir) / MANIFEST_FILE).read_bytes()
    artifact_id = sha256_file(Path(artifact_dir) / MANIFEST_FILE)
    checkpoint, target = manifest.checkpoint["name"], manifest.target
    pointer = pointer_key(checkpoint, target)
    before = store.read(pointer)  # read first: the swap below succeeds only if nobody moved it meanwhile
    if store.read(artifact_key(artifact_id, MANIFEST_FILE)) is None:
        for name, expected in sorted(manifest.files.items()):
            progress("uploading %s (%d bytes)" % (name, expected["bytes"]))
            _upload_verified(store, artifact_key(artifact_id, name), Path(artifact_dir) / name, name, expected)
        if not store.create(artifact_key(artifact_id, MANIFEST_FILE), manifest_bytes):
            progress("artifact %s was completed by another publisher" % artifact_id)
    else:
        progress("artifact %s is already in %s" % (artifact_id, store.uri))
    if publish_goldens(Path(artifact_dir), manifest, store):
        progress("uploaded the goldens it was gated on (the deploy-time gate replays them)")
    for key in upload_signatures(Path(artifact_dir), artifact_id, store):  # before the pointer: a reader checks them
        progress("uploaded its signature by key %s" % key[:12])
    if signer is not None:  # what the runtime checks the pointer against (`laya_serverless.artifact.releases`)
        release = sign_release(store, checkpoint, target, artifact_id, "publish", signer)
        progress("signed release %d of %s/%s" % (release.serial, checkpoint, target))
    record = pointer_record(artifact_id, checkpoint, target, manifest.revision, before[0] if before else None)
    if not store.swap(pointer, record, before[1] if before else None):
        raise ArtifactError("the pointer %s moved while publishing %s; another publish won, nothing was overwritten"
                            % (pointer, artifact_id))
    progress("published %s/%s -> %s in %s" % (checkpoint, target, artifact_id, store.uri))
    return artifact_id


def import_artifact(source: ObjectStore, checkpoint: str, target: str, goldens: dict[str, Any],
                    destination: ObjectStore, cache_dir: Path,
                    progress: Callable[[str], None] = lambda _m: None) -> tuple[str, GateReport]:
    """Fetch (checkpoint, target) from `source`, re-run the gate on this machine, publish to `destination`."""
    progress("fetching %s/%s from %s" % (checkpoint, target, source.uri))
    artifact_id, artifact_dir, manifest = fetch_published(source, checkpoint, target, cache_dir)
    report = run_gate(artifact_dir, goldens, manifest.target)
    progress(report.table())
    if not report.passed:
        raise ArtifactError("artifact %s fails the parity gate on this machine; it was not imported" % artifact_id)
    published = publish(artifact_dir, destination, progress)
    corpus = manifest.raw["parity"].get("goldens_sha256")
    original = source.read(goldens_key(corpus)) if corpus else None
    if original is not None:  # the corpus it was built against travels with it, for the deploy-time gate
        destination.create(goldens_key(corpus), original[0])
    # The proof that the gate holds on this CPU's int8 kernels, which the runtime reads (artifact/platform.py).
    record_gate(destination, published, report)
    return published, report
