"""Choose once: a precision search's decision, kept and reused while nothing it depended on changed.

A search's outcome is a function of the checkpoint's weights, the gate corpus (its inputs), the
onnxruntime version, this CPU's int8 kernel class, the quantization recipe and what was searched
(`candidates`, `min_speedup`). Those form the record's key; a build that finds a record with its key
reuses the decision instead of searching: it builds and gates only the chosen candidate (the gate
still runs on both splits), or, when the record says nothing passed, fails at once so the caller builds
cpu-fp32. `--research` searches again and replaces the record. Records live in a directory (the
quickstart's `.cache/search-records`), and the package ships the demo's (`search_records/` here), so
`make serve` on a known machine class goes straight to the artifact its record names.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Iterable, Sequence
from importlib.metadata import version
from pathlib import Path
from typing import Any

from laya_serverless.artifact.platform import cpu_profile, int8_kernels

from .goldens import weights_sha256
from .quantize import REDUCE_RANGE

SHIPPED = Path(__file__).parent / "search_records"
RECIPE = "dynamic-int8 per-channel QInt8, %d-bit weights; MatMulNBits 8-bit block 32" % (7 if REDUCE_RANGE else 8)


def decision_key(checkpoint_dir: Path, goldens: dict[str, Any], candidates: Sequence[str],
                 min_speedup: float | None) -> dict[str, Any]:
    """Everything the search's decision depends on."""
    return {"weights_sha256": weights_sha256(Path(checkpoint_dir)),
            "corpus_sha256": (goldens.get("corpus") or {}).get("sha256"), "onnxruntime": version("onnxruntime"),
            "int8_kernels": int8_kernels(cpu_profile()), "recipe": RECIPE, "candidates": sorted(candidates),
            "min_speedup": min_speedup or 0}


def record_file(key: dict[str, Any]) -> str:
    return "%s.json" % hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:32]


def find_record(key: dict[str, Any], directories: Iterable[Path]) -> tuple[dict[str, Any], Path] | None:
    """The first record with exactly `key` in `directories` (and where it was), or None."""
    for directory in directories:
        path = Path(directory) / record_file(key)
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(record, dict) and record.get("key") == key and "chosen" in record:
            return record, path
    return None


def save_record(key: dict[str, Any], search: dict[str, Any], directory: Path) -> Path:
    """Keep a finished search's decision under `directory` (replacing an older one with the same key)."""
    chosen = search.get("chosen")
    layers = next((c.get("recipe", {}).get("layers") for c in search.get("candidates", [])
                   if c.get("name") == chosen), None)
    record = {"key": key, "chosen": chosen, "layers": layers if isinstance(layers, list) else None,
              "why": search.get("why"), "recorded": dt.date.today().isoformat(),
              "candidates": {c["name"]: (c.get("selection") or {}).get("max_probability_error")
                             for c in search.get("candidates", []) if "name" in c}}
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / record_file(key)
    path.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return path
