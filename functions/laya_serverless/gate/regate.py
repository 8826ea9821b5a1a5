"""Re-gate a published artifact where it serves, without torch: the deploy-time gate on Lambda's own CPU.

int8 results depend on the CPU's int8 kernels (`laya_serverless.artifact.platform`), so the stack replays
the gate corpus on the serving function's CPU before it serves. A CloudFormation custom resource (the CDK's
Provider framework, asynchronous) invokes `handler`: first with CloudFormation's request (onEvent, which only
checks it), then, every poll until it says complete, with that request and what onEvent returned (isComplete).
Each isComplete call is a step (`gate.stepwise`): for each deployed (checkpoint, target) it fetches the artifact
(verified; the graph kept in memory, never in the 512 MB `/tmp`), reads the goldens it was gated on from
`goldens/<sha256>.json` (pinned by the manifest's `parity.goldens_sha256`), replays the next cases within the
step's time, and saves its progress. When a replay is whole and passes, it writes the create-only record
`gates/<artifact id>/<int8 kernels>.json`. The runtime reads that record at load; without one it serves the
checkpoint's cpu-fp32 artifact and says so in /health.
"""

from __future__ import annotations

import json
import logging
import re
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..artifact.fetch import fetch_verified, published_id, read_manifest
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
from ..artifact.trust import check_binding
from ..core.cpu_share import size_threads
from ..core.decider import Decider
from ..core.providers import CPU, device_of_target
from ..core.session import Threading
from ..errors import ArtifactError
from .replay import GateReport
from .stepwise import Progress, final_report, ordered_cases, progress_key, replay_step, runtime_versions

LOG = logging.getLogger(__name__)
_ARTIFACT_ID = re.compile(r"^[0-9a-f]{64}$")
GOLDENS_SUFFIX = ".goldens.json"  # the sidecar a build writes beside (not in) the artifact directory
# A step's replay time. The Provider framework's isComplete function waits for ours within its own 15 minutes.
STEP_SECONDS = 600.0
STEP_MARGIN_S = 120.0  # kept free before the invocation's end: the progress, the record and the answer
STEP_MARKER = "LayaGateStep"  # what onEvent returns in Data; the Provider passes it on to every isComplete call
_opened: dict[str, Decider] = {}  # the artifact the last step opened, kept for the next step on a warm instance


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


def gate_threads() -> Threading:
    """The threads the API function's own share gives it (`core.cpu_share`), without spinning: on Lambda the gate has
    the function's CPU to itself, and one thread made an English-shape replay 40 minutes long (docs/operations.md)."""
    return size_threads(None, spinning=False).threading()


def open_for_gate(store: ObjectStore, artifact_id: str, manifest: tuple[bytes, Manifest], cache_dir: Path) -> Decider:
    """The artifact's decider, fetched verified; a CPU graph is kept in memory (a published English graph is larger
    than Lambda's `/tmp`). The last one opened is kept for the next step on this instance."""
    if artifact_id in _opened:
        return _opened[artifact_id]
    _opened.clear()
    device = device_of_target(manifest[1].target)
    fetched = fetch_verified(store, artifact_id, manifest, cache_dir, graph_in_memory=device == CPU)
    try:
        memory = fetched.graph_in_memory
        decider = Decider.from_artifact(fetched.directory, threads=gate_threads(), verify=False, device=device,
                                        graph=fetched.graph, files=fetched.files,
                                        release_graph=memory.close if memory else None)
    finally:
        fetched.release()
    _opened[artifact_id] = decider
    return decider


def regate_published(store: ObjectStore, checkpoint: str, target: str, cache_dir: Path, *,
                     deadline: float | None = None, clock: Callable[[], float] = time.monotonic,
                     pinned: str | None = None) -> dict[str, Any]:
    """Gate what (checkpoint, target) points at (or `pinned`, the artifact id the deployment pins) on this machine,
    one step (`gate.stepwise`) that ends before `deadline` (a `clock` time; None: the whole replay now); record it
    when it passes. Returns a summary, with `pending` set while the replay is not whole."""
    artifact_id = pinned or published_id(store, checkpoint, target)
    manifest = read_manifest(store, artifact_id)
    check_binding(manifest[1], artifact_id, checkpoint, target)  # a pin names what the runtime would accept
    kernels = int8_kernels(cpu_profile())
    summary: dict[str, Any] = {"checkpoint": checkpoint, "target": target, "artifact": artifact_id,
                               "int8_kernels": kernels}
    existing = proven_by_record(store, artifact_id, kernels, manifest[1].target)
    if existing is None:
        return dict(summary, passed=True, recorded="already")
    if existing != NO_RECORD:  # records are create-only: a bad one must be removed by hand, never trusted
        return dict(summary, passed=False, failures=["%s under %s; delete it and deploy again"
                                                     % (existing, gate_record_key(artifact_id, kernels))])
    goldens = published_goldens(store, manifest[1])
    derivation = manifest[1].raw["parity"].get("tolerance_derivation")  # the build's, checked again
    fresh = Progress(artifact=artifact_id, kernels=kernels, corpus=manifest[1].raw["parity"]["goldens_sha256"],
                     runtime=runtime_versions(), cases=len(ordered_cases(goldens)))
    key = progress_key(artifact_id, kernels)
    found = store.read(key)
    progress = Progress.parse(found[0]) if found else None
    if progress is None or _identity(progress) != _identity(fresh):
        progress = fresh
    if progress.verdict is not None:  # a whole replay's verdict on this runtime: answered, not run again
        return dict(summary, **progress.verdict)
    decider = open_for_gate(store, artifact_id, manifest, cache_dir)
    step = replay_step(decider, goldens, manifest[1].target, progress, deadline=deadline, derivation=derivation,
                       clock=clock)
    if step.finished:
        step.verdict = _verdict(store, artifact_id, final_report(step, goldens, manifest[1].target, derivation))
    said = dict(summary, steps=step.steps, replay_seconds=round(step.replay_seconds, 1))
    if not store.swap(key, step.to_bytes(), found[1] if found else None):
        return dict(said, pending="another step saved its progress first; the next step goes on from there")
    if step.verdict is None:
        return dict(said, pending="%d of %d cases replayed" % (step.done, step.cases))
    return dict(said, **step.verdict)


def _identity(progress: Progress) -> tuple[Any, ...]:
    return progress.artifact, progress.kernels, progress.corpus, progress.runtime, progress.cases


def _verdict(store: ObjectStore, artifact_id: str, report: GateReport) -> dict[str, Any]:
    verdict: dict[str, Any] = {"passed": report.passed, "rows": report.rows,
                               "max_probability_error": report.max_probability_error,
                               "hard_mismatches": len(report.hard_mismatches)}
    if report.passed:
        verdict["recorded"] = record_gate(store, artifact_id, report)
    else:
        verdict["failures"] = report.failures[:5]
    return verdict


def fp32_serves(store: ObjectStore, checkpoint: str, target: str) -> dict[str, Any] | None:
    """The stack's default cpu-int8 over a checkpoint that has only cpu-fp32 published (the quickstart's case): the
    functions serve that (`assembly.loader.choose_artifact`), which needs no re-gate; None in every other case."""
    if (target != CPU_INT8 or store.read(pointer_key(checkpoint, target)) is not None
            or store.read(pointer_key(checkpoint, FALLBACK_TARGET)) is None):
        return None
    return {"checkpoint": checkpoint, "target": target, "passed": True,
            "skipped": "no %s artifact is published; its %s serves" % (target, FALLBACK_TARGET)}


REQUEST_TYPES = ("Create", "Update", "Delete")


def _gate_request(event: Any) -> tuple[str, str, list[tuple[str, str, str | None]], str]:
    """(request type, store URI, (checkpoint, target, pinned artifact id or None) pairs, physical id) of a custom
    resource event; a malformed one raises `ArtifactError` naming what is wrong (CloudFormation then reports the
    resource FAILED)."""
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
                and (p.get("artifact") is None or bool(_ARTIFACT_ID.match(str(p["artifact"])))) for p in pairs)):
        raise ArtifactError("the deploy gate's ResourceProperties.Artifacts must be a non-empty list of "
                            "{\"checkpoint\", \"target\"[, \"artifact\": a pinned id]}: nothing to gate is not a pass")
    return (event["RequestType"], store, [(p["checkpoint"], p["target"], p.get("artifact")) for p in pairs or []],
            physical_id)


def step_deadline(context: Any, clock: Callable[[], float] = time.monotonic) -> float | None:
    """When this invocation's step must stop replaying: `STEP_SECONDS` from now, or earlier when the invocation
    ends sooner (less `STEP_MARGIN_S`); None without a Lambda context (a local run replays all of it)."""
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    if remaining is None:
        return None
    return float(clock() + max(0.0, min(STEP_SECONDS, remaining() / 1000.0 - STEP_MARGIN_S)))


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """The custom resource's onEvent and isComplete (CDK Provider framework): onEvent checks the request and starts
    nothing; each isComplete call (the request with onEvent's `Data`) is one step over every pair."""
    request_type, store_uri, pairs, physical_id = _gate_request(event)
    if STEP_MARKER not in (event.get("Data") or {}):  # onEvent: a Delete keeps its id, records stay (proofs)
        kept = str(event.get("PhysicalResourceId") or physical_id) if request_type == "Delete" else physical_id
        return {"PhysicalResourceId": kept, "Data": {STEP_MARKER: request_type}}
    if request_type == "Delete":
        return {"IsComplete": True}
    deadline = step_deadline(context)
    store = open_store(store_uri)
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="laya-gate-") as cache:
        for checkpoint, target, pinned in pairs:
            if deadline is not None and results and time.monotonic() >= deadline:  # the first always moves
                results.append({"checkpoint": checkpoint, "target": target, "pending": "not started in this step"})
                continue
            try:
                result = regate_published(store, checkpoint, target, Path(cache), deadline=deadline, pinned=pinned)
            except ArtifactError as exc:  # nothing published yet, or no goldens: said, never silently passed
                result = fp32_serves(store, checkpoint, target) or {
                    "checkpoint": checkpoint, "target": target, "passed": False, "error": str(exc)}
            LOG.info("deploy gate %s", json.dumps(result, sort_keys=True))
            results.append(result)
    if any("pending" in r for r in results):
        return {"IsComplete": False}  # the Provider refuses Data here; it polls again
    failed = [r for r in results if not r.get("passed")]
    if failed and str(event["ResourceProperties"].get("Strict", "false")).lower() == "true":
        raise ArtifactError("the deploy gate failed on this CPU for %s; the deployment is rolled back (strict)"
                            % ", ".join("%s/%s" % (r["checkpoint"], r["target"]) for r in failed))
    data = {"Passed": str(not failed).lower(), "Results": json.dumps(results, sort_keys=True)[:3500]}
    return {"IsComplete": True, "Data": data}
