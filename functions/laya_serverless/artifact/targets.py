"""The compute targets an artifact is built, gated and served for: `<device>-<precision>`.

One name per configuration family the gate knows (`cpu-int8`, `cpu-fp32`, `cuda-fp16`, `cuda-fp32`);
the build side, the runtime and the CDK app all name targets through this module.
"""

from __future__ import annotations

CPU_INT8, CPU_FP32 = "cpu-int8", "cpu-fp32"
CUDA_FP16, CUDA_FP32 = "cuda-fp16", "cuda-fp32"
CPU_TARGETS = (CPU_INT8, CPU_FP32)
CUDA_TARGETS = (CUDA_FP16, CUDA_FP32)
TARGETS = CPU_TARGETS + CUDA_TARGETS
# What a deployment serves when its int8 artifact was never gated on this CPU's int8 kernels.
FALLBACK_TARGET = CPU_FP32
DEFAULT_CPU_TARGET, DEFAULT_CUDA_TARGET = CPU_INT8, CUDA_FP16
# The parity gate's largest allowed |probability change| per target, fixed before measurement: the build's
# gate applies them, and the runtime checks a gate record's figures against them before trusting it.
GATE_TOLERANCES = {CPU_FP32: 1e-4, CPU_INT8: 0.02, CUDA_FP16: 0.02, CUDA_FP32: 1e-4}
# How far another CPU class's answers may be from the build's for the build's gate to hold there too (the
# build's equivalence check, `laya_artifacts.search.emulated`): kernel-exact int8 differs by float summation only.
CLASS_EQUIVALENCE_TOLERANCE = 1e-5


def device_of(target: str) -> str:
    """`cuda` for the cuda-* targets, `cpu` for everything else."""
    return "cuda" if target.startswith("cuda-") else "cpu"
