"""The deployed checkpoints: which deciders are resident, how a routing decision lands on one, reloads.

Deciders are kept in LRU order (least recently used first), which is what `/health` reports.
After an idle unload the next request reloads them through `reload` (verified again).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..core.abstention import Threshold
from ..core.cpu_share import CpuShare
from ..core.decider import Decider
from ..errors import InvalidRequest, SettingsError
from .routing import Detector, Registry, route

Revisions = Mapping[str, str | None]
Reload = Callable[[], tuple[Mapping[str, Decider], Revisions]]


@dataclass(frozen=True)
class Controls:
    """A request's resolved per-request controls, shared by both decision routes."""

    model: str | None = None
    task: Any = None
    lang: str | None = None
    lang_guess: str | None = None
    max_len: int | None = None
    head_max_len: int | None = None
    min_confidence: Threshold | None = None

    def to_spec(self) -> dict[str, Any]:
        """The checked controls as a job's spec keeps them (set fields only), read back by `from_spec`."""
        return {name: value for name, value in vars(self).items() if value is not None}

    @classmethod
    def from_spec(cls, data: dict[str, Any]) -> Controls:
        """Controls written by `to_spec` (already checked when the job was submitted: not checked again)."""
        return cls(**{name: data[name] for name in cls.__dataclass_fields__ if name in data})


@dataclass
class ServedOn:
    """What the load chose for the host it ran on; a SnapStart restore on another CPU re-checks it (`reclass`)."""

    cpu_class: str  # the int8 kernel class the artifacts were chosen for (`artifact.platform.int8_kernels`)
    artifacts: dict[str, tuple[str, str, str]]  # routing name -> (stored checkpoint, artifact id, target)
    cpu_share: CpuShare | None = None  # how the sessions' threads were sized
    class_switches: list[dict[str, str]] = field(default_factory=list)  # every switch since the load, in order


class Deployment:
    def __init__(self, deciders: Mapping[str, Decider], registry: Registry, default: str,
                 revisions: Revisions | None = None, reload: Reload | None = None,
                 target_fallbacks: Mapping[str, Mapping[str, str]] | None = None,
                 served_on: ServedOn | None = None) -> None:
        self.names = list(deciders)
        self.served_on = served_on
        self.target_fallbacks = {name: dict(why) for name, why in (target_fallbacks or {}).items()}
        self.deciders, self.revisions = dict(deciders), dict(revisions or {})
        self.registry, self.reload = registry, reload
        self.default = registry.resolve(default)
        if self.default not in self.deciders:
            raise SettingsError("the default checkpoint %r is not deployed (deployed: %s)"
                                % (self.default, sorted(self.deciders)))

    def unload(self) -> bool:
        """Drop every resident decider; False when there was none."""
        if not self.deciders:
            return False
        self.deciders, self.revisions = {}, {}
        return True

    def swap(self, name: str, decider: Decider, revision: str | None, fallback: Mapping[str, str] | None) -> None:
        """Serve `decider` for `name` from now on (another artifact of the same checkpoint), in its LRU place."""
        self.deciders[name], self.revisions[name] = decider, revision
        if fallback is None:
            self.target_fallbacks.pop(name, None)
        else:
            self.target_fallbacks[name] = dict(fallback)

    def resident_revisions(self) -> dict[str, str | None]:
        """Revisions of the resident checkpoints, in load order."""
        return {name: self.revisions.get(name) for name in self.names if name in self.deciders}

    def _ensure_resident(self) -> None:
        if not self.deciders:  # unloaded while idle: the next request pays the (verified) load
            if self.reload is None:
                raise SettingsError("the checkpoints were unloaded and this deployment cannot reload them")
            deciders, revisions = self.reload()
            self.deciders, self.revisions = dict(deciders), dict(revisions)

    def decide(self, state: Any, questions: Any, detect: Detector, controls: Controls,
               auto_task: bool) -> tuple[Decider, dict[str, Any]]:
        """The decider that answers `state` and the `routing` block that says why."""
        decision = route(self.registry, state, questions, detect, model=controls.model, task=controls.task,
                         lang=controls.lang, lang_guess=controls.lang_guess, auto_task=auto_task)
        key = decision["model"]
        if key not in self.names:
            if controls.model is not None or controls.task is not None:
                raise InvalidRequest("checkpoint %r is not deployed here; deployed: %s" % (key, sorted(self.names)),
                                     location=("model",))
            # Detection and hints never pick an absent checkpoint: the default answers, and says so.
            decision = dict(decision, model=self.default, repo=self.registry.sources[self.default],
                            reason="%s; %r is not deployed, so the default %r answers"
                            % (decision["reason"], key, self.default))
        self._ensure_resident()
        decider = self.deciders.pop(decision["model"])
        self.deciders[decision["model"]] = decider  # most recently used last
        return decider, decision
