"""Stand-ins for GPU tests on a machine without one: a session that reports providers and raises on demand,
a `Placement` over it, and the out-of-memory error onnxruntime's CUDA provider raises."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from laya_serverless import Decider
from laya_serverless.core.fallback import DeviceSession, open_decision_session
from laya_serverless.core.providers import CPU_PROVIDER, CUDA_PROVIDER, Placement
from laya_serverless.core.session import ProviderSpec
from laya_serverless.errors import InferenceError

from .fakes import FixedSession, config, word_encoder

GRAPH = Path("model.onnx")
# What onnxruntime's CUDA provider says when the BFC arena cannot grow (wrapped by OnnxDecisionSession.run).
CUDA_OOM = ("[ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION : Non-zero status code returned while running MatMul node. "
            "Name:'/encoder/layers.0/attn/Wqkv/MatMul' Status Message: CUDA failure 2: out of memory ; GPU=0")


class FakeSession(FixedSession):
    """A session that reports `active` providers and raises `errors` (one per run) before answering."""

    def __init__(self, active: Sequence[str], errors: Sequence[Exception | None] = ()) -> None:
        super().__init__([2.0, 0.0])
        self.active, self.errors = list(active), list(errors)
        self.opened_with: list[ProviderSpec] = []

    def active_providers(self) -> list[str]:
        return self.active

    def run(self, feeds: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        error = self.errors.pop(0) if self.errors else None
        if error is not None:
            raise error
        return super().run(feeds)


def placement(offered: Sequence[str], *sessions: FakeSession) -> tuple[Placement, list[Sequence[ProviderSpec]]]:
    opened: list[Sequence[ProviderSpec]] = []
    queue = list(sessions)

    def open_fake(_graph: Path, providers: Sequence[ProviderSpec], _threads: int | None,
                  _loading: object) -> FakeSession:
        opened.append(list(providers))
        return queue.pop(0)

    return Placement(available=lambda: list(offered), open=open_fake), opened


def oom() -> InferenceError:
    try:
        raise RuntimeError(CUDA_OOM)
    except RuntimeError as exc:
        wrapped = InferenceError("the model session failed: %s" % exc)
        wrapped.__cause__ = exc
        return wrapped


def gpu_decider(gpu: FakeSession, cpu: FakeSession | None) -> tuple[Decider, DeviceSession]:
    fake, _ = placement([CUDA_PROVIDER, CPU_PROVIDER], gpu, *([cpu] if cpu else []))
    session = open_decision_session(GRAPH, "cuda", cpu_retry=cpu is not None, placement=fake)
    assert isinstance(session, DeviceSession)
    return Decider(session, word_encoder(), config()), session
