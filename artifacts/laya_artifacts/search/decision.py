"""A build's search decision: its key, a kept refusal looked up before the export, and after it either the kept
decision reused or the precision search run and its decision kept (`records.py` says when a record holds)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from laya_artifacts.search.precision import (
    SearchResult,
    SpeedTimer,
    check_candidate_names,
    precision_search,
    reuse_decision,
)
from laya_artifacts.search.quantize import FIXED_CANDIDATES, LAYER_MIX, NODE_MIX, layer_candidate, node_candidate
from laya_artifacts.search.records import SHIPPED, decision_key, find_record, save_record
from laya_serverless.artifact.layout import GRAPH_FILE
from laya_serverless.gate.replay import TOLERANCES


def search_key(checkpoint_dir: Path, goldens: dict[str, Any], candidates: Sequence[str] | None,
               min_speedup: float | None) -> dict[str, Any]:
    """The search's identity (`records.decision_key`), every candidate named when none are given."""
    return decision_key(checkpoint_dir, goldens, check_candidate_names(candidates), min_speedup)


def kept_refusal(key: dict[str, Any], records: Path | None, research: bool,
                 tolerance: float) -> tuple[dict[str, Any], Path] | None:
    """A kept record saying no candidate passes this search on this CPU (and where it is), unless told to search."""
    if records is None or research:
        return None
    found = find_record(key, [records, SHIPPED], tolerance)
    return found if found is not None and found[0]["chosen"] is None else None


def decide(raw: Path, scratch: Path, goldens: dict[str, Any], target: str, key: dict[str, Any],
           candidates: Sequence[str] | None, *, exhaustive: bool, min_speedup: float | None, records: Path | None,
           research: bool, progress: Callable[[str], None], timer: SpeedTimer) -> SearchResult:
    """The precision search on the export in `raw`, or the decision a record kept for exactly this search."""
    found = None if records is None or research else find_record(key, [records, SHIPPED], TOLERANCES[target])
    if found is not None:
        record, path = found
        progress("    reusing the search record %s (recorded %s): %s" % (path.name, record.get("recorded"),
                                                                        record.get("why")))
        if record["chosen"] is None:
            return SearchResult(None, {"mode": "reused", "reused_record": path.name, "chosen": None,
                                       "why": "%s (search record %s; --research searches again)"
                                              % (record.get("why") or "nothing passed", path.name)})
        chosen = str(record["chosen"])
        candidate = (layer_candidate(record.get("layers") or [], LAYER_MIX) if chosen == LAYER_MIX
                     else node_candidate(record.get("nodes") or [], NODE_MIX) if chosen == NODE_MIX
                     else next(c for c in FIXED_CANDIDATES if c.name == chosen))
        return reuse_decision(raw / GRAPH_FILE, raw, scratch, goldens, target, candidate, path, progress=progress)
    result = precision_search(raw / GRAPH_FILE, raw, scratch, goldens, target, candidates=candidates,
                              exhaustive=exhaustive, min_speedup=min_speedup, progress=progress, timer=timer)
    if records is not None:
        progress("    search record kept: %s" % save_record(key, result.record, records))
    return result


__all__ = ["decide", "kept_refusal", "search_key"]
