"""Which ONNX Runtime execution provider runs a decision session, and the proof that it really does.

onnxruntime quietly runs a session on the CPU when the CUDA provider cannot load (CUDA or cuDNN
libraries missing, a driver too old): the call succeeds and only the session's list of active
providers tells. So a CUDA session is opened only when CUDAExecutionProvider is offered, and kept
only when it is active afterwards; otherwise `DeviceUnavailable` names what is missing. `Placement`
is the seam: tests pass a fake provider list and a fake session instead of onnxruntime.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ..artifact import targets
from ..errors import DeviceUnavailable
from .session import RAW_EXPORT, DecisionSession, Loading, OnnxDecisionSession, ProviderSpec, Threads

CPU, CUDA = "cpu", "cuda"
DEVICES = (CPU, CUDA)
CPU_PROVIDER, CUDA_PROVIDER = "CPUExecutionProvider", "CUDAExecutionProvider"
# TF32 would round FP32 matrix products to 10 mantissa bits: off, so cuda-fp32 is the FP32 that was gated.
CUDA_OPTIONS = {"use_tf32": "0"}


class ProviderSession(DecisionSession, Protocol):
    """A decision session that can say which providers onnxruntime registered for it."""

    def active_providers(self) -> list[str]: ...


# (graph, providers, threads, how to load it: level and what to free once parsed) -> a session
OpenSession = Callable[[Path, Sequence[ProviderSpec], Threads, Loading], ProviderSession]


def _open_onnx(graph: Path, providers: Sequence[ProviderSpec], threads: Threads, loading: Loading) -> ProviderSession:
    return OnnxDecisionSession(graph, threads=threads, level=loading.level, providers=providers,
                               after_parse=loading.after_parse, restore=loading.restore)


def _offered() -> list[str]:
    import onnxruntime as ort

    return list(ort.get_available_providers())


@dataclass(frozen=True)
class Placement:
    """Where sessions come from: the providers this onnxruntime offers, and how one session is opened."""

    available: Callable[[], Sequence[str]] = _offered
    open: OpenSession = _open_onnx


ONNXRUNTIME = Placement()


def device_of_target(target: str) -> str:
    """The device a compute target runs on: `cuda-fp16` and `cuda-fp32` on CUDA, everything else on the CPU."""
    return CUDA if targets.device_of(target) == CUDA else CPU


def providers_for(device: str) -> list[ProviderSpec]:
    """What to ask onnxruntime for. CUDA lists the CPU second: onnxruntime places the few nodes CUDA has no
    kernel for (shape arithmetic) there, as it does anyway; the session itself must still be on CUDA."""
    if device == CPU:
        return [CPU_PROVIDER]
    if device == CUDA:
        return [(CUDA_PROVIDER, dict(CUDA_OPTIONS)), CPU_PROVIDER]
    raise ValueError("unknown device %r; choose one of %s" % (device, ", ".join(DEVICES)))


def require_device(device: str, placement: Placement = ONNXRUNTIME) -> None:
    """Refuse at once when this onnxruntime cannot even offer `device`'s provider (before any download or load)."""
    if device == CPU:
        return
    providers_for(device)  # an unknown device is a ValueError
    offered = list(placement.available())
    if CUDA_PROVIDER not in offered:
        raise DeviceUnavailable(
            "device cuda needs onnxruntime's %s, and this onnxruntime offers only %s: install onnxruntime-gpu "
            "(and not onnxruntime beside it) on a machine with an NVIDIA GPU" % (CUDA_PROVIDER, ", ".join(offered)))


def open_session(graph: Path, device: str, *, threads: Threads = None, loading: Loading = RAW_EXPORT,
                 placement: Placement = ONNXRUNTIME) -> ProviderSession:
    """A session over `graph` that really runs on `device`, or `DeviceUnavailable` saying why not."""
    requested = providers_for(device)
    if device == CPU:
        return placement.open(graph, requested, threads, loading)
    require_device(device, placement)
    session = placement.open(graph, requested, threads, loading)
    active = session.active_providers()
    if CUDA_PROVIDER not in active:
        raise DeviceUnavailable(
            "device cuda was asked for, but onnxruntime placed the session on %s: %s failed to load (CUDA or cuDNN "
            "libraries missing, or a driver too old; onnxruntime's log says which). Refused rather than served "
            "on the CPU" % (", ".join(active), CUDA_PROVIDER))
    return session
