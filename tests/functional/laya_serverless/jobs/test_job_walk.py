"""A job's walk: the runtime modules one submission enters, traced from `JobService.submit` down on the local
engine over a fake deployment. No module walks back into one that called it, no module goes back to a
module it already left where one visit would do, and the walk drawn in docs/architecture.md ("A job's
walk") is the walk that runs."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from types import FrameType
from typing import Any

from laya_serverless.artifact.store import LocalStore
from laya_serverless.local_edge.jobs_engine import LocalEngine
from laya_serverless.protocol.routing import Registry
from tests.functional.laya_serverless.jobs.jobs_support import QUESTIONS, job_service, make_worker, states
from tests.paths import ROOT

PACKAGE = "laya_serverless."

# Callers that go back and forth to one module by nature; each pair is (caller, callee).
ALTERNATING = {
    # The protocol's refusal order: the model field (routing) is checked between the hooks and the budgets
    # (limits), as upstream checks them; one visit to limits would change which refusal a body with two faults gets.
    ("protocol.decisions", "protocol.limits"),
    # A job's documents are named (store_keys), encoded (state) and written create-only (store) one after the
    # other, in the order that keeps a readable job whole (spec, shards, manifest, job: jobs.job_service).
    ("jobs.job_service", "jobs.store_keys"),
    ("jobs.job_service", "jobs.state"),
    ("jobs.job_service", "artifact.store"),
}


@dataclass
class Visit:
    """One stay in a module, from its entry from another module until it returns there."""

    path: tuple[str, ...]
    entered: list[str] = field(default_factory=list)  # the modules it went on to, one entry per visit


@dataclass
class Walk:
    """A profiler (`sys.setprofile`) for the calling thread: the runtime modules entered from another module."""

    open_visits: list[Visit] = field(default_factory=list)
    frames: list[bool] = field(default_factory=list)  # per open frame: whether it began a visit
    drawn: list[tuple[str, ...]] = field(default_factory=list)  # each path from the entry, first time walked
    walked_back: list[str] = field(default_factory=list)
    went_back: list[str] = field(default_factory=list)
    package: str = PACKAGE   # whose modules are rooms (the build wing's walk traces `laya_artifacts.`)
    depth: int | None = None   # how many parts of a module's name make its room (None: the whole name)
    alternating: set[tuple[str, str]] = field(default_factory=lambda: set(ALTERNATING))

    def __call__(self, frame: FrameType, event: str, _arg: Any) -> None:
        if event == "call":
            self._enter(str(frame.f_globals.get("__name__", "")), frame.f_code.co_name)
        elif event == "return" and self.frames and self.frames.pop():
            self.open_visits.pop()

    def _enter(self, name: str, function: str) -> None:
        module = ".".join(name[len(self.package):].split(".")[:self.depth]) if name.startswith(self.package) else None
        here = self.open_visits[-1] if self.open_visits else None
        if module is None or (here is not None and here.path[-1] == module):
            self.frames.append(False)
            return
        if here is not None:
            self._check(here, module, function)
        visit = Visit((*(here.path if here else ()), module))
        if visit.path not in self.drawn:
            self.drawn.append(visit.path)
        self.open_visits.append(visit)
        self.frames.append(True)

    def _check(self, here: Visit, module: str, function: str) -> None:
        caller = here.path[-1]
        if module in here.path:
            self.walked_back.append("%s -> %s.%s" % (" -> ".join(here.path), module, function))
        elif module in here.entered and here.entered[-1] != module and (caller, module) not in self.alternating:
            self.went_back.append("%s went back to %s.%s after %s" % (caller, module, function, here.entered))
        if not here.entered or here.entered[-1] != module:
            here.entered.append(module)

    def lines(self, parent: tuple[str, ...] = ()) -> list[str]:
        """The walk as a tree: each module under the one that entered it, in the order first walked."""
        children = [path for path in self.drawn if path[:-1] == parent]
        return [line for path in children for line in ["    " * len(parent) + path[-1], *self.lines(path)]]


def _drawn_walk() -> list[str]:
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = page.split("## A job's walk", 1)[1]
    block = re.search(r"```\n(.*?)```", section, re.DOTALL)
    assert block, "docs/architecture.md: the section \"A job's walk\" has no drawing"
    return block.group(1).splitlines()


def _submission_walk(root: Path) -> Walk:
    store = LocalStore(root)
    engine = LocalEngine(store, partial(make_worker, root), processes=False, backoff=0.0)
    service, registry, walk = job_service(store, engine), Registry(), Walk()
    body = {"states": states(150), "questions": QUESTIONS, "lang": "en"}
    engine.open()  # as the server's lifespan opens it, before any request
    sys.setprofile(walk)
    try:
        accepted = service.submit(body, registry, ["english"])
    finally:
        sys.setprofile(None)
    try:
        assert engine.wait(accepted["id"], timeout=60)["status"] == "succeeded"  # a real job, answered
    finally:
        engine.close()
    return walk


def test_a_submission_walks_forward_and_as_drawn(tmp_path: Path) -> None:
    walk = _submission_walk(tmp_path)
    assert walk.walked_back == []
    assert walk.went_back == []
    assert walk.lines()[0] == "jobs.job_service" and len(walk.lines()) > 10
    assert walk.lines() == _drawn_walk(), "docs/architecture.md's job walk is stale: print Walk.lines()"


def test_the_walk_sees_a_module_walking_back_into_its_caller() -> None:
    walk = Walk()
    for name in ("jobs.spec", "protocol.decisions", "jobs.spec"):  # spec -> decisions -> spec
        walk._enter(PACKAGE + name, "f")
    assert walk.walked_back == ["jobs.spec -> protocol.decisions -> jobs.spec.f"]


def test_the_walk_sees_a_caller_going_back_where_one_visit_would_do() -> None:
    walk = Walk()
    walk._enter(PACKAGE + "jobs.spec", "job_request")
    for name in ("protocol.decisions", "protocol.limits", "protocol.decisions"):
        walk._enter(PACKAGE + name, "f")
        walk(sys._getframe(), "return", None)
    assert walk.went_back == ["jobs.spec went back to protocol.decisions.f after ['protocol.decisions', "
                              "'protocol.limits']"]
