"""What to build, in one frozen object (`BuildSpec`); what tests swap in a build (`BuildSeams`).

A spec holds a build's target, search, gate and fine-tune settings: all but the checkpoint it is built
from and the directory it is written to.

After optimum's `QuantizationConfig`: `build_artifact(checkpoint, spec, out_dir)` takes it, the decision key
of a cpu-int8 search is computed once from it, and the manifest records it (`BuildSpec.record`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from laya_artifacts.qat.finetune import QatSettings
from laya_artifacts.search.precision import MIN_SPEEDUP, SpeedTimer, check_candidate_names, wall_clock
from laya_serverless.artifact.targets import TARGETS
from laya_serverless.core.providers import ONNXRUNTIME, Placement


def _quiet(_message: str) -> None:
    """The default progress: a build says nothing unless its caller listens."""


@dataclass(frozen=True)
class BuildSpec:
    """One (checkpoint, target) build's settings; `build_artifact` documents each one's effect.

    `goldens`: a recorded golden file to gate against (None: record the corpus now with upstream).
    `gate_cases`: users' JSONL files added to the corpus. `candidates`, `exhaustive_search`, `min_speedup`,
    `search_records` and `research` steer the cpu-int8 precision search; `emulate_classes` proves the AVX2
    class under qemu; `quantization_aware` fine-tunes a copy first (cpu-int8).
    """

    target: str
    name: str | None = None
    revision: str | None = None
    goldens: Path | None = None
    gate_cases: tuple[str | Path, ...] = ()
    candidates: tuple[str, ...] | None = None
    exhaustive_search: bool = False
    min_speedup: float | None = MIN_SPEEDUP
    search_records: Path | None = None
    research: bool = False
    emulate_classes: bool = False
    quantization_aware: QatSettings | None = None

    def __post_init__(self) -> None:
        """A spec names a known target and known candidates, or it is not made (argument validation)."""
        if self.target not in TARGETS:
            raise ValueError("unknown target %r; choose one of %s" % (self.target, ", ".join(TARGETS)))
        check_candidate_names(self.candidates)

    @classmethod
    def of(cls, target: str, *, gate_cases: Sequence[str | Path] = (), candidates: Sequence[str] | None = None,
           **settings: Any) -> BuildSpec:
        """A spec from lists as callers hold them (the CLI's, the tests'); tuples inside, so it stays frozen."""
        return cls(target, gate_cases=tuple(gate_cases), candidates=tuple(candidates) if candidates else None,
                   **settings)

    def record(self) -> dict[str, Any]:
        """What the manifest says of the spec: every setting, paths as text, the fine-tune's own settings."""
        qat = asdict(self.quantization_aware) if self.quantization_aware is not None else None
        if qat is not None:  # where the fine-tune kept its state is the builder's, not the artifact's
            qat.pop("work_dir", None)
        return {"target": self.target, "name": self.name, "revision": self.revision,
                "goldens": "given" if self.goldens is not None else "recorded",
                "gate_cases": [Path(p).name for p in self.gate_cases],
                "candidates": list(self.candidates) if self.candidates else None,
                "exhaustive_search": self.exhaustive_search, "min_speedup": self.min_speedup,
                "search_records": self.search_records is not None, "research": self.research,
                "emulate_classes": self.emulate_classes, "quantization_aware": qat}


@dataclass(frozen=True)
class BuildSeams:
    """What tests and callers swap in a build: where progress goes, how candidates are timed, which
    onnxruntime offers which devices."""

    progress: Callable[[str], None] = field(default=_quiet)
    timer: SpeedTimer = field(default=wall_clock)
    placement: Placement = field(default=ONNXRUNTIME)


DEFAULT_SEAMS = BuildSeams()

__all__ = ["DEFAULT_SEAMS", "BuildSeams", "BuildSpec"]
