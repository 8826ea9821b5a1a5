"""This machine's CPU as the code running on it sees it: architecture, vendor, model, instruction sets.

`/proc/cpuinfo` describes the host. The process may run on another CPU: under `qemu-x86_64 -cpu
Haswell` (how this project gates the AVX2 class on any x86 machine) or behind a hypervisor that
masks features, cpuid answers for the CPU that executes, and ONNX Runtime picks its kernels from
cpuid. numpy's runtime dispatch table is read from cpuid (hwcaps on Arm), so it is the check: when
it denies a flag the host claims, only the flags it confirms count.

On Arm the int8 kernels are picked from the kernel's hwcaps (`getauxval(AT_HWCAP)`, `AT_HWCAP2`), which
describe the CPU that executes: under `qemu-aarch64 -cpu neoverse-n1` the emulated Graviton2, while
/proc/cpuinfo still shows the x86 host. So an aarch64 process takes its flags from hwcaps alone.
"""

from __future__ import annotations

import platform
from collections.abc import Mapping
from pathlib import Path
from typing import Any

# The flags that pick ONNX Runtime's int8 kernels and PyTorch's FP32 kernels, in /proc/cpuinfo's names.
ISA_FLAGS = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx_vnni", "avx512_bf16",
             "amx_int8", "amx_bf16", "asimddp", "i8mm")
# The same flags in numpy's `__cpu_features__` (cpuid); the others (avx_vnni, amx_*, i8mm) it cannot name.
_CPUID_NAMES = {"sse4_2": "SSE42", "avx": "AVX", "avx2": "AVX2", "fma": "FMA3", "avx512f": "AVX512F",
                "avx512bw": "AVX512BW", "avx512_vnni": "AVX512VNNI", "avx512_bf16": "AVX512BF16",
                "asimddp": "ASIMDDP"}
ARM_MACHINES = ("aarch64", "arm64")
# <asm/hwcap.h>: auxiliary-vector keys and the bits of the Arm flags that pick int8 kernels.
AT_HWCAP, AT_HWCAP2 = 16, 26
_HWCAP_BITS = {"asimddp": (AT_HWCAP, 20), "i8mm": (AT_HWCAP2, 13)}


def read_hwcaps() -> dict[int, int]:
    """The executing CPU's AT_HWCAP and AT_HWCAP2 words (glibc `getauxval`); empty where they cannot be read."""
    try:
        import ctypes

        getauxval = ctypes.CDLL(None).getauxval
    except (ImportError, OSError, AttributeError):
        return {}
    getauxval.restype, getauxval.argtypes = ctypes.c_ulong, [ctypes.c_ulong]
    return {key: int(getauxval(key)) for key in (AT_HWCAP, AT_HWCAP2)}


def hwcap_flags(hwcaps: Mapping[int, int]) -> set[str]:
    """The int8-kernel flags (`asimddp`, `i8mm`, in /proc/cpuinfo's names) that hwcap words set."""
    return {flag for flag, (key, bit) in _HWCAP_BITS.items() if hwcaps.get(key, 0) >> bit & 1}


def cpuid_features() -> dict[str, bool]:
    """numpy's view of the executing CPU (cpuid on x86); empty where numpy does not expose it."""
    try:
        from numpy._core._multiarray_umath import __cpu_features__
    except ImportError:  # pragma: no cover - numpy < 2 names the module differently
        return {}
    return {str(k): bool(v) for k, v in __cpu_features__.items()}


def read_cpuinfo(text: str | None = None) -> dict[str, str]:
    """The first processor's fields of /proc/cpuinfo (or of `text`)."""
    if text is None:
        try:
            text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            text = ""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() and value.strip():
            fields.setdefault(key.strip(), value.strip())
    return fields


def cpu_profile(cpuinfo: str | None = None, cpuid: Mapping[str, bool] | None = None,
                hwcaps: Mapping[int, int] | None = None, machine: str | None = None) -> dict[str, Any]:
    """This CPU: machine, vendor, model and the kernel-picking flags (`ISA_FLAGS`) cpuid confirms.

    `isa_source` is ``cpuid`` when cpuid denied a flag /proc/cpuinfo claims (an emulated or masked
    CPU: only confirmed flags are kept), else ``cpuinfo``; ``hwcaps`` on Arm (`arm_profile`)."""
    machine = platform.machine() if machine is None else machine
    fields = read_cpuinfo(cpuinfo)
    if machine.lower() in ARM_MACHINES:
        return arm_profile(machine, fields, read_hwcaps() if hwcaps is None else hwcaps)
    flags = set((fields.get("flags") or fields.get("Features") or "").split())
    features = cpuid_features() if cpuid is None else dict(cpuid)
    denied = [f for f, name in _CPUID_NAMES.items() if f in flags and features.get(name) is False]
    source = "cpuinfo"
    if denied:
        flags = {f for f in flags if features.get(_CPUID_NAMES.get(f, ""), False)}
        source = "cpuid"
    return {"machine": machine, "vendor": fields.get("vendor_id", ""),
            "model": fields.get("model name") or platform.processor(),
            "isa": [f for f in ISA_FLAGS if f in flags], "isa_source": source}


def arm_profile(machine: str, fields: Mapping[str, str], hwcaps: Mapping[int, int]) -> dict[str, Any]:
    """An Arm CPU's profile: flags from hwcaps; its implementer and part from /proc/cpuinfo when that describes
    an Arm CPU, else the model says the process is emulated on another host (qemu-user shows the host's)."""
    if "CPU implementer" in fields:
        vendor = fields["CPU implementer"]
        model = "Arm implementer %s part %s" % (vendor, fields.get("CPU part", "?"))
    else:
        vendor, model = "", "emulated %s on %s" % (machine, fields.get("model name") or "an unnamed host")
    flags = hwcap_flags(hwcaps)
    return {"machine": machine, "vendor": vendor, "model": model, "isa": [f for f in ISA_FLAGS if f in flags],
            "isa_source": "hwcaps"}


def cpu_family(profile: dict[str, Any] | None = None) -> str:
    """The CPU as far as FP32 reproducibility goes (vendor / model / kernel flags), recorded with goldens."""
    profile = cpu_profile() if profile is None else profile
    fp32_flags = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16")
    return " / ".join([profile.get("vendor") or "?", profile.get("model") or "?",
                       ",".join(f for f in fp32_flags if f in profile.get("isa", ()))])
