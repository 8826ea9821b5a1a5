"""What the job tests share: fake deployments (importable by spawned worker processes), states, questions."""

from __future__ import annotations

import time
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from laya_serverless import Decider
from laya_serverless.artifact.store import ObjectStore, open_store
from laya_serverless.jobs.job_service import Engine, JobService
from laya_serverless.jobs.worker import Worker
from laya_serverless.local_edge.jobs_engine import LocalEngine
from laya_serverless.protocol.deployment import Deployment
from laya_serverless.protocol.detect import analyse
from laya_serverless.protocol.routing import Registry
from laya_serverless.settings import Settings
from tests.unit.fakes import RowSession, config, word_encoder

QUESTIONS = {
    "team": {"type": "choice", "instructions": "which team ?", "criteria": {"billing": "refunds", "tech": None}},
    "urgency": {"type": "score", "instructions": "which level ?", "criteria": ["low", "high", "level 3"]},
    "churn": {"type": "noul", "instructions": "does the statement hold ?"},
}
_WORDS = "i was charged twice billing tech refunds a b c d e f g low high yes no the statement".split()
POISON_WORD = "h"
SETTINGS = Settings.of(jobs_time_budget=0.05, jobs_token_rate=20_000)  # ~1,000 tokens a shard


def states(n: int, poison_at: tuple[int, ...] = ()) -> list[Any]:
    """`n` distinct short states (some JSON objects); `poison_at` indices carry the poison word."""
    out: list[Any] = []
    for i in range(n):
        text = " ".join(_WORDS[(i * 7 + k * 3) % len(_WORDS)] for k in range(1 + i % 9))
        if i in poison_at:
            text += " " + POISON_WORD
        out.append({"ticket": text} if i % 5 == 0 else text)
    return out


class SlowSession(RowSession):
    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay = delay

    def run(self, feeds: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        time.sleep(self.delay)
        return super().run(feeds)


def decider(poison: bool = False, delay: float = 0.0) -> Decider:
    encoder = word_encoder()
    bad = tuple(encoder.encode(POISON_WORD)) if poison else ()
    return Decider(SlowSession(delay) if delay else RowSession(bad), encoder, config(max_positions=512))


def deployment(poison: bool = False, delay: float = 0.0) -> Deployment:
    return Deployment({"english": decider(poison, delay)}, Registry(), "english")


def make_worker(store: str | Path, poison: bool = False, settings: Settings = SETTINGS, delay: float = 0.0) -> Worker:
    """A worker over a fake deployment; `functools.partial(make_worker, ...)` pickles into worker processes."""
    return Worker(open_store(store), deployment(poison, delay), settings.protocol, settings.limits, Registry(), analyse)


def job_service(store: ObjectStore, engine: Engine, settings: Settings = SETTINGS) -> JobService:
    """A job service given the parts of `settings` it takes, as the edges build it."""
    return JobService(store, engine, settings.jobs, settings.protocol, settings.limits)


def run_engine(store: str, delay: str, processes: str = "") -> None:
    """A server's job engine in a process of its own (for the kill tests): resumes the store's jobs, forever."""
    engine = LocalEngine(open_store(store), partial(make_worker, store, delay=float(delay)),
                         processes=bool(processes))
    engine.open()
    while True:
        time.sleep(1)
