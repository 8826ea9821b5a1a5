"""What `laya-artifacts deploy` tells the stack about each checkpoint's graphs: their size as stored (`-c graph_mb`)
and how much a compactly stored one grows once loaded (`-c expands_at_load`); the stack sizes memory from both."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from pathlib import Path

from laya_serverless.artifact.layout import GRAPH_FILE, MANIFEST_FILE


def graph_sizes(artifacts: Mapping[str, Iterable[Path]]) -> str:
    """`-c graph_mb`: each stored checkpoint's largest graph (the FP32 fallback included), in whole MiB."""
    sizes = {}
    for name, paths in artifacts.items():
        graphs = [path / GRAPH_FILE for path in paths if (path / GRAPH_FILE).is_file()]
        if graphs:
            sizes[name] = math.ceil(max(g.stat().st_size for g in graphs) / 2**20)
    return ",".join("%s=%d" % item for item in sizes.items())


def graph_expansions(artifacts: Mapping[str, Iterable[Path]]) -> str:
    """`-c expands_at_load`: for each stored checkpoint whose graph is stored compactly (FP16 weights widened to FP32
    at load, the manifest's `precision.storage`), how much larger its largest graph grows once loaded."""
    factors = {}
    for name, paths in artifacts.items():
        grown = [_expansion(path) for path in paths if (path / GRAPH_FILE).is_file()]
        if grown and max(grown) > 1:
            factors[name] = max(grown)
    return ",".join("%s=%.2f" % item for item in factors.items())


def _expansion(artifact: Path) -> float:
    manifest = artifact / MANIFEST_FILE
    raw = json.loads(manifest.read_text(encoding="utf-8")) if manifest.is_file() else {}
    storage = (raw.get("configuration", {}).get("precision") or {}).get("storage") or {}
    stored = (artifact / GRAPH_FILE).stat().st_size
    widened = int(storage.get("bytes_fp32", 0)) - int(storage.get("bytes_fp16", 0))   # what the Casts add at load
    return (stored + max(widened, 0)) / stored if stored else 1.0
