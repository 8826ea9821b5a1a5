"""Provider selection and its refusals, and the counted CPU retry after a GPU out-of-memory error,
with fake provider lists and fake sessions (no GPU, no onnxruntime session)."""

from __future__ import annotations

import pytest

from laya_serverless.core.fallback import DeviceSession, device_of, fallbacks_of, oom_reason, open_decision_session
from laya_serverless.core.providers import (
    CPU_PROVIDER,
    CUDA_PROVIDER,
    device_of_target,
    open_session,
    providers_for,
)
from laya_serverless.errors import DeviceOutOfMemory, DeviceUnavailable, InferenceError
from laya_serverless.settings import Settings
from tests.unit.gpu_fakes import GRAPH, FakeSession, gpu_decider, oom, placement


def test_targets_name_their_device_and_cuda_asks_for_tf32_off() -> None:
    assert [device_of_target(t) for t in ("cpu-int8", "cpu-fp32", "cuda-fp16", "cuda-fp32")] == [
        "cpu", "cpu", "cuda", "cuda"]
    assert providers_for("cpu") == [CPU_PROVIDER]
    assert providers_for("cuda") == [(CUDA_PROVIDER, {"use_tf32": "0"}), CPU_PROVIDER]
    with pytest.raises(ValueError, match="unknown device 'mps'"):
        providers_for("mps")


def test_cuda_is_refused_when_this_onnxruntime_does_not_offer_it() -> None:
    fake, opened = placement([CPU_PROVIDER], FakeSession([CPU_PROVIDER]))
    with pytest.raises(DeviceUnavailable, match="needs onnxruntime's CUDAExecutionProvider.*offers only "
                                                "CPUExecutionProvider"):
        open_session(GRAPH, "cuda", placement=fake)
    assert opened == []   # refused before any session was made


def test_a_session_onnxruntime_quietly_put_on_the_cpu_is_refused() -> None:
    """CUDA offered but its libraries failed to load: onnxruntime still returns a session, on the CPU."""
    fake, opened = placement([CUDA_PROVIDER, CPU_PROVIDER], FakeSession([CPU_PROVIDER]))
    with pytest.raises(DeviceUnavailable, match="placed the session on CPUExecutionProvider.*Refused"):
        open_session(GRAPH, "cuda", placement=fake)
    assert opened == [providers_for("cuda")]


def test_a_session_really_on_cuda_is_kept_and_reports_cuda() -> None:
    fake, _ = placement([CUDA_PROVIDER, CPU_PROVIDER], FakeSession([CUDA_PROVIDER, CPU_PROVIDER]))
    session = open_decision_session(GRAPH, "cuda", placement=fake)
    assert isinstance(session, DeviceSession) and device_of(session) == "cuda"
    assert fallbacks_of(session) == {"count": 0, "last_reason": None}


def test_cpu_is_asked_for_alone_and_reports_cpu() -> None:
    fake, opened = placement([CPU_PROVIDER], FakeSession([CPU_PROVIDER]))
    session = open_decision_session(GRAPH, "cpu", placement=fake)
    assert opened == [[CPU_PROVIDER]] and device_of(session) == "cpu"


def test_out_of_memory_is_told_apart_from_other_failures() -> None:
    assert oom_reason(oom()) is not None and "out of memory" in (oom_reason(oom()) or "")
    assert oom_reason(InferenceError("the model session failed: invalid input shape")) is None


QUESTIONS = {"team": {"type": "choice", "instructions": "which team ?", "criteria": ["billing", "tech"]}}


def test_an_out_of_memory_request_is_retried_on_the_cpu_once_and_counted() -> None:
    gpu = FakeSession([CUDA_PROVIDER], errors=[oom()])
    cpu = FakeSession([CPU_PROVIDER])
    decider, session = gpu_decider(gpu, cpu)
    answer = decider.predict("i was charged twice", QUESTIONS)
    assert answer["answers"]["team"]["choice"] == "billing"
    assert (len(gpu.calls), len(cpu.calls)) == (0, 1)
    assert session.fallbacks.count == 1 and "out of memory" in (session.fallbacks.last_reason or "")
    decider.predict("i was charged twice", QUESTIONS)   # the next request is back on the GPU
    assert (len(gpu.calls), len(cpu.calls), session.fallbacks.count) == (1, 1, 1)
    assert device_of(session) == "cuda"   # where work runs; the retry is counted, not a move


def test_a_split_batch_counts_one_fallback_and_stays_on_the_cpu_for_that_request() -> None:
    gpu = FakeSession([CUDA_PROVIDER], errors=[oom()])
    cpu = FakeSession([CPU_PROVIDER])
    decider, session = gpu_decider(gpu, cpu)
    results = decider.predict_batch(["a", "b", "c"], QUESTIONS, batch_size=1)
    assert len(results) == 3 and (len(gpu.calls), len(cpu.calls)) == (0, 3)
    assert session.fallbacks.count == 1


def test_without_a_gated_cpu_retry_out_of_memory_is_a_503_to_retry() -> None:
    decider, session = gpu_decider(FakeSession([CUDA_PROVIDER], errors=[oom()]), None)
    with pytest.raises(DeviceOutOfMemory, match="out of memory; try again later"):
        decider.predict("x", QUESTIONS)
    assert session.fallbacks.count == 0


def test_other_gpu_failures_are_not_retried() -> None:
    decider, session = gpu_decider(FakeSession([CUDA_PROVIDER], errors=[InferenceError("bad shape")]),
                                    FakeSession([CPU_PROVIDER]))
    with pytest.raises(InferenceError, match="bad shape"):
        decider.predict("x", QUESTIONS)
    assert session.fallbacks.count == 0


@pytest.mark.parametrize(("environ", "message"), [
    ({"LAYA_DEVICE": "gpu"}, r"invalid LAYA_DEVICE 'gpu': must be one of cpu, cuda"),
    ({"LAYA_DEVICE": "cuda:0"}, r"invalid LAYA_DEVICE 'cuda:0'"),
    ({"LAYA_DEVICE": "cuda", "LAYA_TARGET": "cpu-int8"}, r"LAYA_DEVICE=cuda cannot serve LAYA_TARGET=cpu-int8"),
    ({"LAYA_TARGET": "cuda-fp16"}, r"LAYA_DEVICE=cpu cannot serve LAYA_TARGET=cuda-fp16"),
])
def test_laya_device_is_read_strictly(environ: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Settings.from_environ(environ)


def test_laya_device_picks_its_default_target() -> None:
    plain = Settings.from_environ({}).deployment
    assert (plain.device, plain.target) == ("cpu", "cpu-int8")
    cuda = Settings.from_environ({"LAYA_DEVICE": " CUDA "}).deployment
    assert (cuda.device, cuda.target) == ("cuda", "cuda-fp16")
    assert Settings.from_environ({"LAYA_DEVICE": "cuda", "LAYA_TARGET": "cuda-fp32"}).deployment.target == "cuda-fp32"
