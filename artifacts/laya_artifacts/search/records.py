"""Choose once: a precision search's decision, kept and reused while nothing it depended on changed.

A search's outcome is a function of the checkpoint's weights, the gate corpus (its inputs), the
onnxruntime version, the int8 arithmetic, the quantization recipe and what was searched (`candidates`,
`min_speedup`). Those form the record's key; a build that finds a record with its key reuses the
decision instead of searching: it builds and gates only the chosen candidate (the gate still runs on
both splits), or, when the record says nothing passed, fails at once so the caller builds cpu-fp32.
`--research` searches again and replaces the record.

Accuracy and speed are kept apart. With 7-bit weights every x86 int8 kernel class computes the same
integers (`quantize.REDUCE_RANGE`), so which candidates pass selection is the same on all of them: the
key names the arithmetic (`x86-exact`), not the class. Which passing candidate is fastest is not, so a
record that chose one (or found passing ones too slow) is reused only on the class it was timed on
(`int8_kernels` in the record). A record in which nothing passed is reused on every class of its
arithmetic when every candidate missed by a margin (`PORTABLE_MARGIN` x the tolerance): the FP32 parts
of a graph still round differently per class, and a near miss could pass elsewhere.

Records live in a directory (the quickstart's `.cache/search-records`), and the package ships the
demo's (`search_records/` here), so `make serve` on x86 goes straight to the artifact its record names.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Iterable, Sequence
from importlib.metadata import version
from pathlib import Path
from typing import Any

from laya_artifacts.checkpoints.sources import weights_sha256
from laya_artifacts.search.quantize import REDUCE_RANGE
from laya_serverless.artifact.platform import cpu_profile, int8_kernels

SHIPPED = Path(__file__).parent / "search_records"
RECIPE = ("dynamic-int8 per-channel QInt8, %d-bit weights; MatMulNBits 8-bit block 32, fp32 or int8 compute; "
          "MatMulNBits 8-bit symmetric block 32 and 64, int8 compute, all layers or the ends in FP32; "
          "mixes by layer and by node; SmoothQuant alpha 0.5 and 0.9; static QDQ MinMax on the probe slice"
          % (7 if REDUCE_RANGE else 8))


# A refusal holds on another x86 class only if every figure misses by half the tolerance again: the largest
# difference between two classes measured with the exact recipe was 2.3e-3 in max |dp| (the tiny random
# model, docs/artifacts-gate.md), a quarter of the 1e-2 this leaves at the int8 tolerance of 0.02.
PORTABLE_MARGIN = 1.5


def int8_arithmetic(kernels: str) -> str:
    """The classes whose int8 kernels compute the same integers for this recipe: every x86 class with 7-bit
    weights (`x86-exact`); otherwise each class alone."""
    x86 = not kernels.startswith(("arm64", "aarch64"))
    return "x86-exact" if x86 and REDUCE_RANGE else kernels


def decision_key(checkpoint_dir: Path, goldens: dict[str, Any], candidates: Sequence[str],
                 min_speedup: float | None) -> dict[str, Any]:
    """Everything the search's accuracy verdicts depend on (the speed part: `usable`)."""
    return {"weights_sha256": weights_sha256(Path(checkpoint_dir)),
            "corpus_sha256": (goldens.get("corpus") or {}).get("sha256"), "onnxruntime": version("onnxruntime"),
            "int8_arithmetic": int8_arithmetic(int8_kernels(cpu_profile())), "recipe": RECIPE,
            "candidates": sorted(candidates), "min_speedup": min_speedup or 0}


def usable(record: dict[str, Any], kernels: str, tolerance: float) -> bool:
    """Whether a record with a matching key decides this class's search (module docstring)."""
    if record.get("int8_kernels") == kernels:
        return True
    figures = list((record.get("candidates") or {}).values())
    return (record.get("chosen") is None and record.get("passed") == [] and bool(figures)
            and all(isinstance(f, (int, float)) and f >= PORTABLE_MARGIN * tolerance for f in figures))


def record_file(key: dict[str, Any]) -> str:
    return "%s.json" % hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:32]


def find_record(key: dict[str, Any], directories: Iterable[Path],
                tolerance: float | None = None) -> tuple[dict[str, Any], Path] | None:
    """The first record with exactly `key` in `directories` (and where it was) that decides this CPU's search
    (`usable`; any record with the key when `tolerance` is None), or None."""
    kernels = int8_kernels(cpu_profile())
    for directory in directories:
        path = Path(directory) / record_file(key)
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(record, dict) and record.get("key") == key and "chosen" in record and (
                tolerance is None or usable(record, kernels, tolerance)):
            return record, path
    return None


def save_record(key: dict[str, Any], search: dict[str, Any], directory: Path) -> Path:
    """Keep a finished search's decision under `directory` (replacing an older one with the same key)."""
    chosen = search.get("chosen")
    candidates = [c for c in search.get("candidates", []) if "name" in c]
    recipe = next((c.get("recipe") or {} for c in candidates if c["name"] == chosen), {})
    layers, nodes = recipe.get("layers"), recipe.get("nodes")
    figures: dict[str, Any] = {c["name"]: (c.get("selection") or {}).get("max_probability_error") for c in candidates}
    for name in ("layer-mix", "node-mix"):  # a mix that found nothing: its best unit alone, for `usable`
        probes = (search.get(name.replace("-", "_")) or {}).get("sensitivity") or []
        if probes and name not in figures:
            figures[name] = min(p["max_probability_error"] for p in probes)
    record = {"key": key, "chosen": chosen, "layers": layers if isinstance(layers, list) else None,
              "nodes": nodes if isinstance(nodes, list) else None, "int8_kernels": int8_kernels(cpu_profile()),
              "why": search.get("why"), "recorded": dt.date.today().isoformat(),
              "passed": [c["name"] for c in candidates if (c.get("selection") or {}).get("passed")],
              "candidates": figures}
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / record_file(key)
    path.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return path


def merge_refusals(key: dict[str, Any], parts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One refusal record for `key` from refusals of disjoint parts of its candidates (e.g. the candidates a new
    release adds, searched on their own). Sound because nothing passed in any part: a candidate's verdict does
    not depend on the others, and with nothing passing no mix is skipped for a pass, so the union refuses too.
    The merged record decides only through the margin rule (`usable`: its `int8_kernels` is a list)."""
    fixed = {k: v for k, v in key.items() if k not in ("candidates", "recipe")}
    searched: list[str] = []
    for part in parts:
        if part.get("chosen") is not None or part.get("passed") != []:
            raise ValueError("only refusals merge: a part chose %r, passed %r" % (part.get("chosen"),
                                                                                  part.get("passed")))
        if {k: v for k, v in part["key"].items() if k not in ("candidates", "recipe")} != fixed:
            raise ValueError("a part was searched on other weights, corpus, onnxruntime or speed rule")
        searched += part["key"]["candidates"]
    if sorted(searched) != sorted(key["candidates"]) or len(set(searched)) != len(searched):
        raise ValueError("the parts' candidates %s are not exactly %s" % (sorted(searched), key["candidates"]))
    return {"key": key, "chosen": None, "layers": None, "nodes": None, "passed": [],
            "int8_kernels": sorted({str(p.get("int8_kernels")) for p in parts}),
            "why": "no candidate passed selection (merged from %d searches of disjoint candidates)" % len(parts),
            "recorded": max(str(p.get("recorded")) for p in parts),
            "candidates": {name: figure for p in parts for name, figure in p["candidates"].items()},
            "merged_from": [{"candidates": p["key"]["candidates"], "recipe": p["key"]["recipe"],
                             "int8_kernels": p.get("int8_kernels"), "recorded": p.get("recorded")} for p in parts]}
