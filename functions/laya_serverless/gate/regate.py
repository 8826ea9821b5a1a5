"""Re-gate a published artifact where it serves, without torch: the deploy-time gate on Lambda's own CPU.

int8 results depend on the CPU's int8 kernels (`laya_serverless.artifact.platform`), so the stack replays
the gate corpus on the serving function's CPU before it serves: a CloudFormation custom resource (the CDK's
Provider framework) invokes `handler` with the deployed (checkpoint, target) pairs; for each, it fetches
the artifact (verified), reads the goldens it was gated on from `goldens/<sha256>.json` (published beside
it, pinned by the manifest's `parity.goldens_sha256`), runs the same gate, and writes the create-only
record `gates/<artifact id>/<int8 kernels>.json` when it passes. The runtime reads that record at load;
without one it serves the checkpoint's cpu-fp32 artifact and says so in /health.
"""

from __future__ import annotations

import json
import logging
import tempfile
from pathlib import Path
from typing import Any

from ..artifact.fetch import fetch_published
from ..artifact.gpu import gpu_key, gpu_profile
from ..artifact.manifest import Manifest, sha256_bytes
from ..artifact.platform import (
    NO_RECORD,
    cpu_profile,
    gate_record,
    gate_record_key,
    int8_kernels,
    proven_by_record,
)
from ..artifact.store import ObjectStore, open_store, pointer_key
from ..artifact.targets import CPU_INT8, FALLBACK_TARGET, device_of
from ..errors import ArtifactError
from .replay import GateReport, run_gate

LOG = logging.getLogger(__name__)
GOLDENS_SUFFIX = ".goldens.json"  # the sidecar a build writes beside (not in) the artifact directory


def canonical_goldens(goldens: dict[str, Any]) -> bytes:
    """The bytes whose sha256 the manifest records as `parity.goldens_sha256`.

    Key order is kept, not sorted: a row's token lists follow the order of its questions."""
    return json.dumps(goldens, ensure_ascii=False, separators=(",", ":")).encode()


def goldens_sidecar(artifact_dir: Path) -> Path:
    """Where a build keeps the goldens it gated on: beside the directory, which holds only what serves."""
    artifact_dir = Path(artifact_dir)
    return artifact_dir.with_name(artifact_dir.name + GOLDENS_SUFFIX)


def goldens_key(sha256: str) -> str:
    return "goldens/%s.json" % sha256


def publish_goldens(artifact_dir: Path, manifest: Manifest, store: ObjectStore) -> str | None:
    """Upload the build's goldens (create-only) when its sidecar is there; returns the key, or None."""
    sidecar = goldens_sidecar(artifact_dir)
    if not sidecar.is_file():
        return None
    data, expected = sidecar.read_bytes(), manifest.raw["parity"].get("goldens_sha256")
    if sha256_bytes(data) != expected:
        raise ArtifactError("%s does not hash to the manifest's goldens_sha256 %s: it is not the corpus this "
                            "artifact was gated on" % (sidecar, expected))
    store.create(goldens_key(expected), data)
    return goldens_key(expected)


def published_goldens(store: ObjectStore, manifest: Manifest) -> dict[str, Any]:
    """The goldens an artifact was gated on, read from the store and checked against its manifest."""
    expected = manifest.raw["parity"].get("goldens_sha256")
    found = store.read(goldens_key(expected)) if expected else None
    if found is None:
        raise ArtifactError("the goldens this artifact was gated on (%s) are not in %s; publish it again with "
                            "laya-artifacts build --publish, which uploads them" % (goldens_key(str(expected)),
                                                                                     store.uri))
    if sha256_bytes(found[0]) != expected:
        raise ArtifactError("%s in %s does not hash to its name: the object was edited" % (goldens_key(expected),
                                                                                         store.uri))
    goldens: dict[str, Any] = json.loads(found[0])
    return goldens


def record_gate(store: ObjectStore, artifact_id: str, report: GateReport) -> str:
    """Write the create-only proof that `report` passed here: on this CPU's int8 kernels, or for a cuda target
    on this GPU and onnxruntime (the class `artifact.gpu` checks at load); returns its key."""
    if device_of(report.target) == "cuda":
        here = gpu_profile()
        kernels = gpu_key(here)
    else:
        here = cpu_profile()
        kernels = int8_kernels(here)
    key = gate_record_key(artifact_id, kernels)
    derived = getattr(report, "tolerance_derivation", None)  # duck-typed reports (GPU tests) carry none
    store.create(key, gate_record(artifact_id, here, {
        "target": report.target, "passed": report.passed, "rows": report.rows,
        "max_probability_error": report.max_probability_error, "max_action_error": report.max_action_error,
        # a derived FP32 tolerance travels with its derivation: `platform.record_refusal` checks the two agree
        **({"tolerance": report.tolerance, "tolerance_derivation": derived} if derived else {})}, kernels))
    return key


def regate_published(store: ObjectStore, checkpoint: str, target: str, cache_dir: Path) -> dict[str, Any]:
    """Gate what (checkpoint, target) points at on this machine; record it when it passes. Returns a summary."""
    artifact_id, artifact_dir, manifest = fetch_published(store, checkpoint, target, cache_dir)
    kernels = int8_kernels(cpu_profile())
    summary: dict[str, Any] = {"checkpoint": checkpoint, "target": target, "artifact": artifact_id,
                               "int8_kernels": kernels}
    existing = proven_by_record(store, artifact_id, kernels, manifest.target)
    if existing is None:
        return dict(summary, passed=True, recorded="already")
    if existing != NO_RECORD:  # records are create-only: a bad one must be removed by hand, never trusted
        return dict(summary, passed=False, failures=["%s under %s; delete it and deploy again"
                                                     % (existing, gate_record_key(artifact_id, kernels))])
    report = run_gate(artifact_dir, published_goldens(store, manifest), manifest.target,
                      derivation=manifest.raw["parity"].get("tolerance_derivation"))  # the build's, checked again
    summary.update(passed=report.passed, rows=report.rows, max_probability_error=report.max_probability_error,
                   hard_mismatches=sum(len(s.hard_mismatches) for s in report.splits.values()))
    if report.passed:
        summary["recorded"] = record_gate(store, artifact_id, report)
    else:
        summary["failures"] = report.failures[:5]
    return summary


def fp32_serves(store: ObjectStore, checkpoint: str, target: str) -> dict[str, Any] | None:
    """The stack's default cpu-int8 over a checkpoint that has only cpu-fp32 published (the quickstart's case): the
    functions serve that (`assembly.loader.choose_artifact`), which needs no re-gate; None in every other case."""
    if (target != CPU_INT8 or store.read(pointer_key(checkpoint, target)) is not None
            or store.read(pointer_key(checkpoint, FALLBACK_TARGET)) is None):
        return None
    return {"checkpoint": checkpoint, "target": target, "passed": True,
            "skipped": "no %s artifact is published; its %s serves" % (target, FALLBACK_TARGET)}


REQUEST_TYPES = ("Create", "Update", "Delete")


def _gate_request(event: Any) -> tuple[str, str, list[tuple[str, str]], str]:
    """(request type, store URI, (checkpoint, target) pairs, physical id) of a custom resource event; a malformed
    one raises `ArtifactError` naming what is wrong (CloudFormation then reports the resource FAILED)."""
    if not isinstance(event, dict) or event.get("RequestType") not in REQUEST_TYPES:
        raise ArtifactError("the deploy gate takes a CloudFormation custom resource event (RequestType one of %s)"
                            % ", ".join(REQUEST_TYPES))
    properties = event.get("ResourceProperties")
    store = properties.get("Store") if isinstance(properties, dict) else None
    if not isinstance(store, str) or not store.strip():
        raise ArtifactError("the deploy gate's ResourceProperties.Store must name the artifact store")
    physical_id = "laya-deploy-gate-%s" % sha256_bytes(store.encode())[:16]  # never the store's name itself
    pairs = properties.get("Artifacts") if isinstance(properties, dict) else None
    if event["RequestType"] != "Delete" and (
            not isinstance(pairs, list) or not pairs or not all(
                isinstance(p, dict) and isinstance(p.get("checkpoint"), str) and isinstance(p.get("target"), str)
                for p in pairs)):
        raise ArtifactError("the deploy gate's ResourceProperties.Artifacts must be a non-empty list of "
                            "{\"checkpoint\", \"target\"}: nothing to gate is not a pass")
    return event["RequestType"], store, [(p["checkpoint"], p["target"]) for p in pairs or []], physical_id


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """The custom resource's onEvent (CDK Provider framework): re-gate every pair on Create and Update."""
    request_type, store_uri, pairs, physical_id = _gate_request(event)
    properties = event["ResourceProperties"]
    if request_type == "Delete":  # records are proofs about immutable artifacts: they stay
        return {"PhysicalResourceId": str(event.get("PhysicalResourceId") or physical_id)}
    store = open_store(store_uri)
    results = []
    with tempfile.TemporaryDirectory(prefix="laya-gate-") as cache:
        for checkpoint, target in pairs:
            try:
                result = regate_published(store, checkpoint, target, Path(cache))
            except ArtifactError as exc:  # nothing published yet, or no goldens: said, never silently passed
                result = fp32_serves(store, checkpoint, target) or {
                    "checkpoint": checkpoint, "target": target, "passed": False, "error": str(exc)}
            LOG.info("deploy gate %s", json.dumps(result, sort_keys=True))
            results.append(result)
    failed = [r for r in results if not r.get("passed")]
    if failed and str(properties.get("Strict", "false")).lower() == "true":
        raise ArtifactError("the deploy gate failed on this CPU for %s; the deployment is rolled back (strict)"
                            % ", ".join("%s/%s" % (r["checkpoint"], r["target"]) for r in failed))
    data = {"Passed": str(not failed).lower(), "Results": json.dumps(results, sort_keys=True)[:3500]}
    return {"PhysicalResourceId": physical_id, "Data": data}
