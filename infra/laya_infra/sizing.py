"""The functions' memory: what the checkpoints a function holds need at INIT, added up, plus headroom.

A function that serves a deployment loads every deployed checkpoint at INIT, each graph in memory while ONNX Runtime
builds its session (docs/deploy.md#memory). One checkpoint's INIT peak is the figure recorded for it
(`-c init_peak_mb`), or else the rule `INIT_MB_PER_GRAPH_MB` x its graph's MiB (`-c graph_mb`) x what the graph
grows to at load (`-c expands_at_load`: 2 for a graph stored in FP16 that loads as FP32) + `INIT_RUNTIME_MB`. The
function gets the sum over the checkpoints it serves, not the largest, plus `INIT_HEADROOM`; synth refuses what it
cannot size: a checkpoint of unknown size, or a sum above Lambda's 10,240 MB.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from laya_serverless import settings as runtime
from laya_serverless.configuration import Invalid

from . import constants as c

EVERY = "*"   # the key of a bare number: it holds for every deployed checkpoint


def per_checkpoint(read: Callable[[str], float], what: str) -> Callable[[str], dict[str, float]]:
    """A parser of `STORED=VALUE,...` (a stored checkpoint name, hub ids included) or one VALUE for all."""
    def parse(text: str) -> dict[str, float]:
        values: dict[str, float] = {}
        for part in filter(None, (p.strip() for p in text.split(","))):
            name, _, value = part.rpartition("=")
            try:
                values[name.strip() or EVERY] = read(value.strip())
            except Invalid as exc:
                raise Invalid("entry %r: %s %s" % (part, what, exc)) from None
        if not values:
            raise Invalid("names no checkpoint (STORED=VALUE,... or one VALUE)")
        return values
    return parse


def init_peak_mb(graph_mb: float, expands_at_load: float = 1.0) -> int:
    """The rule: the INIT peak (MB) of one checkpoint whose graph is `graph_mb` MiB as stored, `expands_at_load`
    times that once loaded."""
    return math.ceil(c.INIT_MB_PER_GRAPH_MB * graph_mb * expands_at_load + c.INIT_RUNTIME_MB)


def memory_for(peaks_mb: list[int]) -> int:
    """The memory (MB, a multiple of 64) of a function whose checkpoints peak at `peaks_mb` each at INIT."""
    needed = math.ceil(sum(peaks_mb) * (1 + c.INIT_HEADROOM))
    return -(-needed // 64) * 64


@dataclass(frozen=True)
class Held:
    """One served checkpoint: its served and stored names, its INIT peak, and where the peak comes from."""
    served: str
    stored: str
    peak_mb: int
    source: str

    def describe(self) -> str:
        return "%s %s MB (%s)" % (self.served, format(self.peak_mb, ","), self.source)


def _one(served: str, stored: str, values: Mapping[str, Any]) -> Held | None:
    recorded = _lookup(values.get("init_peak_mb"), stored)
    if recorded is not None:
        return Held(served, stored, math.ceil(recorded), "recorded")
    graph = _lookup(values.get("graph_mb"), stored)
    if graph is None and stored == c.DEMO_CHECKPOINT:
        graph = c.DEMO_GRAPH_MB
    if graph is None:
        return None
    expands = _lookup(values.get("expands_at_load"), stored) or 1.0
    source = "%s MiB graph%s" % (format(round(graph), ","), " x%g at load" % expands if expands != 1 else "")
    return Held(served, stored, init_peak_mb(graph, expands), source)


def _lookup(table: Mapping[str, float] | None, stored: str) -> float | None:
    if not table:
        return None
    return table.get(stored, table.get(EVERY))


def held(values: Mapping[str, Any], refuse: Callable[[str], Exception]) -> list[Held]:
    """Every checkpoint a function of this deployment holds (one session per served name), with its INIT peak;
    one of unknown size is refused naming the flag that gives it."""
    text = values.get("deployed") or c.DEFAULT_DEPLOYED
    deployed = runtime.Settings.from_environ({runtime.DEPLOYED: text}).deployment.deployed
    found = []
    for served, stored in deployed.items():
        one = _one(served, stored, values)
        if one is None:
            raise refuse("context 'deployed' serves %s=%s, whose graph size is unknown, so synth cannot size the "
                         "functions' memory (use -c graph_mb=%s=<MiB of its graph>, which `laya-artifacts deploy` "
                         "passes, or -c init_peak_mb=%s=<MB measured at INIT>)" % (served, stored, stored, stored))
        found.append(one)
    return found


def needed_mb(values: Mapping[str, Any], refuse: Callable[[str], Exception]) -> tuple[int, list[Held]]:
    """The memory one function of this deployment needs, refused above Lambda's maximum in one line."""
    checkpoints = held(values, refuse)
    needed = memory_for([one.peak_mb for one in checkpoints])
    if needed > c.MAX_MEMORY_MB:
        fits = _fitting(checkpoints)
        raise refuse(
            "one function cannot hold these checkpoints: at INIT they need %s MB (%s, +%d%% headroom; "
            "docs/deploy.md#memory), above Lambda's %s MB; the stack deploys no function per checkpoint yet, so serve "
            "fewer from this stack (use -c deployed=%s)"
            % (format(needed, ","), " + ".join(one.describe() for one in checkpoints), round(c.INIT_HEADROOM * 100),
               format(c.MAX_MEMORY_MB, ","), ",".join("%s=%s" % (one.served, one.stored) for one in fits)))
    return needed, checkpoints


def _fitting(checkpoints: list[Held]) -> list[Held]:
    """The longest run of the deployed checkpoints, in order, that one function can hold (at least the first)."""
    count = 1
    while count < len(checkpoints) and memory_for([one.peak_mb for one in checkpoints[:count + 1]]) <= c.MAX_MEMORY_MB:
        count += 1
    return checkpoints[:count]
