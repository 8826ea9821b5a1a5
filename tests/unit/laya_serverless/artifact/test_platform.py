"""Whether an artifact's gate holds on the serving CPU: int8 kernel classes, gate records."""

from __future__ import annotations

import json
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from laya_serverless.artifact.cpu import AT_HWCAP, AT_HWCAP2, hwcap_flags, read_hwcaps
from laya_serverless.artifact.manifest import Manifest
from laya_serverless.artifact.platform import (
    ARM64_CLASSES,
    cpu_profile,
    gate_record,
    gate_record_key,
    int8_kernels,
    proven_for_class,
    unproven_here,
)
from laya_serverless.artifact.store import LocalStore
from tests.prerequisites import qemu_needed, require

VNNI = {"machine": "x86_64", "model": "Xeon", "isa": ["avx2", "avx512f", "avx512bw", "avx512_vnni"]}
AVX2 = {"machine": "x86_64", "model": "EPYC", "isa": ["avx2", "fma"]}


@pytest.mark.parametrize(("profile", "kernels"), [
    (VNNI, "avx512-vnni"), (AVX2, "avx2"),
    ({"machine": "x86_64", "isa": ["avx2", "avx512_vnni", "amx_int8"]}, "amx-int8"),
    ({"machine": "x86_64", "isa": ["avx2", "avx_vnni"]}, "avx-vnni"),
    ({"machine": "x86_64", "isa": ["avx2", "avx512bw"]}, "avx512"),
    ({"machine": "x86_64", "isa": ["sse4_2"]}, "x86_64-baseline"),
    ({"machine": "aarch64", "isa": ["asimddp", "i8mm"]}, "arm64-i8mm"),
    ({"machine": "aarch64", "isa": ["asimddp"]}, "arm64-dotprod"),
    ({"machine": "aarch64", "isa": []}, "arm64-none"), ({"machine": "arm64", "isa": ["i8mm"]}, "arm64-i8mm"),
    ({}, "unknown-baseline"),
])
def test_int8_kernel_classes(profile: dict[str, Any], kernels: str) -> None:
    assert int8_kernels(profile) == kernels


HOST = ("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC\n"
        "flags\t\t: fpu avx2 fma avx512f avx512bw avx512_vnni avx_vnni\nprocessor\t: 1\nflags\t\t: other\n")


def test_the_cpu_profile_reads_flags_and_model_name() -> None:
    confirmed = {"AVX2": True, "FMA3": True, "AVX512F": True, "AVX512BW": True, "AVX512VNNI": True}
    profile = cpu_profile(HOST, cpuid=confirmed)
    assert profile["model"] == "AMD EPYC" and profile["vendor"] == "AuthenticAMD"
    assert profile["isa"] == ["avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx_vnni"]
    assert profile["isa_source"] == "cpuinfo" and int8_kernels(profile) == "avx512-vnni"


def test_cpuid_overrules_the_hosts_cpuinfo_when_it_denies_a_flag() -> None:
    # what qemu -cpu Haswell shows a process on a VNNI host: /proc/cpuinfo unchanged, cpuid AVX2 only
    haswell = {"AVX2": True, "FMA3": True, "AVX512F": False, "AVX512BW": False, "AVX512VNNI": False}
    profile = cpu_profile(HOST, cpuid=haswell)
    assert profile["isa"] == ["avx2", "fma"] and profile["isa_source"] == "cpuid"
    assert int8_kernels(profile) == "avx2"  # avx_vnni, which cpuid cannot name, is not trusted either


def test_an_emulated_haswell_is_seen_as_the_avx2_class() -> None:
    require(qemu_needed())
    code = "from laya_serverless.artifact.platform import cpu_profile, int8_kernels; print(int8_kernels(cpu_profile()))"
    seen = subprocess.run(["qemu-x86_64-static", "-cpu", "Haswell", sys.executable, "-c", code],
                          capture_output=True, text=True, check=True, timeout=120).stdout.split()
    assert seen == ["avx2"]


def _manifest(target: str, built: dict[str, Any]) -> Manifest:
    weights = "int8" if "int8" in target else "fp32"
    return Manifest({"configuration": {"target": target, "precision": {"weights": weights}, "build_cpu": built},
                     "files": {}})


def test_fp32_is_served_anywhere_and_int8_only_where_gated(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    assert unproven_here(_manifest("cpu-fp32", VNNI), "a" * 64, store, AVX2) is None
    assert unproven_here(_manifest("cpu-int8", VNNI), "a" * 64, store, dict(VNNI, model="other Xeon")) is None
    reason = unproven_here(_manifest("cpu-int8", VNNI), "a" * 64, store, AVX2)
    assert reason is not None and "avx512-vnni" in reason and "avx2" in reason and "laya-artifacts import" in reason


PASSED = {"target": "cpu-int8", "passed": True, "rows": 377, "max_probability_error": 0.012,
          "max_action_error": 0.004}


def test_a_gate_record_for_this_cpus_kernels_proves_it_here(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    store.create(gate_record_key("b" * 64, "avx2"), gate_record("b" * 64, AVX2, PASSED))
    assert unproven_here(_manifest("cpu-int8", VNNI), "b" * 64, store, AVX2) is None
    assert unproven_here(_manifest("cpu-int8", VNNI), "c" * 64, store, AVX2) is not None


def _record(artifact: str = "b" * 64, **changes: Any) -> bytes:
    return gate_record(artifact, AVX2, {**PASSED, **changes})


@pytest.mark.parametrize("raw, why", [
    (b"", "not JSON"), (b"garbage{", "not JSON"), (b"[1, 2]", "not a JSON object"), (b"{}", "names artifact"),
    (b'{"passed": false}', "names artifact"),
    (_record("d" * 64), "names artifact 'dddd"),
    (_record(passed=False), "does not say passed"),
    (_record(target="cpu-fp32"), "for target 'cpu-fp32'"),
    (_record(rows=0), "gated no rows"),
    (_record(max_probability_error=0.3), "not within the gate's tolerance 0.02"),
    (_record(max_action_error=float("nan")), "not within"),
    (_record(max_probability_error="0.001"), "not within"),
    (json.dumps({"artifact": "b" * 64, "int8_kernels": "avx512-vnni", "report": PASSED}).encode(),
     "gated on 'avx512-vnni' kernels, not 'avx2'"),
])
def test_a_gate_record_is_trusted_only_for_what_it_proves(tmp_path: Path, raw: bytes, why: str) -> None:
    """A record that exists proves nothing by existing: garbage, another artifact's, another class's, a failed
    or an out-of-tolerance one is ignored, and the int8 artifact is refused here (its FP32 is served)."""
    store = LocalStore(tmp_path)
    store.create(gate_record_key("b" * 64, "avx2"), raw)
    reason = unproven_here(_manifest("cpu-int8", VNNI), "b" * 64, store, AVX2)
    assert reason is not None and "gate record was ignored: " in reason and why in reason


# AT_HWCAP bit 20 is ASIMDDP (SDOT/UDOT), AT_HWCAP2 bit 13 is I8MM: what Linux tells a Graviton2 / Graviton3 process.
GRAVITON2_HWCAPS = {AT_HWCAP: 0x119FFB, AT_HWCAP2: 0}               # qemu -cpu neoverse-n1, read 2026-12-04
GRAVITON3_HWCAPS = {AT_HWCAP: 0xECFFFFFB, AT_HWCAP2: 0x7F877FFF}    # qemu -cpu max
ARM_CPUINFO = ("processor\t: 0\nBogoMIPS\t: 243.75\nFeatures\t: fp asimd asimddp\nCPU implementer\t: 0x41\n"
               "CPU part\t: 0xd0c\n")


@pytest.mark.parametrize(("hwcaps", "isa", "kernels"), [
    (GRAVITON2_HWCAPS, ["asimddp"], "arm64-dotprod"),
    (GRAVITON3_HWCAPS, ["asimddp", "i8mm"], "arm64-i8mm"),
    ({AT_HWCAP: 0x8FB, AT_HWCAP2: 0}, [], "arm64-none"),               # qemu -cpu cortex-a72: NEON only
    ({AT_HWCAP: 1 << 20}, ["asimddp"], "arm64-dotprod"), ({AT_HWCAP2: 1 << 13}, ["i8mm"], "arm64-i8mm"),
    ({}, [], "arm64-none"),                                             # unreadable hwcaps: no int8 class claimed
])
def test_an_arm_cpus_int8_class_is_read_from_its_hwcaps(hwcaps: dict[int, int], isa: list[str], kernels: str) -> None:
    # under qemu-aarch64 /proc/cpuinfo shows the x86 host (HOST, with AVX-512): none of its flags may count
    profile = cpu_profile(HOST, hwcaps=hwcaps, machine="aarch64")
    assert profile["isa"] == isa and profile["isa_source"] == "hwcaps" and int8_kernels(profile) == kernels
    assert profile["model"] == "emulated aarch64 on AMD EPYC" and profile["vendor"] == ""
    assert kernels in ARM64_CLASSES and sorted(hwcap_flags(hwcaps)) == sorted(isa)


def test_a_real_arm_cpuinfo_names_the_implementer_and_part_but_not_the_flags() -> None:
    # Features lists asimddp, hwcaps say neither: the executing CPU's hwcaps decide (a masked or emulated CPU)
    profile = cpu_profile(ARM_CPUINFO, hwcaps={AT_HWCAP: 0, AT_HWCAP2: 0}, machine="aarch64")
    assert profile["vendor"] == "0x41" and profile["model"] == "Arm implementer 0x41 part 0xd0c"
    assert profile["isa"] == [] and int8_kernels(profile) == "arm64-none"


def test_hwcaps_are_read_from_the_auxiliary_vector() -> None:
    words = read_hwcaps()
    assert set(words) == {AT_HWCAP, AT_HWCAP2} and all(isinstance(w, int) and w >= 0 for w in words.values())
    if platform.machine() == "x86_64":  # x86 hwcaps are other bits: the x86 profile never reads them
        assert cpu_profile(HOST, cpuid={"AVX2": True})["isa_source"] != "hwcaps"


GRAVITON2 = {"machine": "aarch64", "model": "emulated aarch64 on AMD EPYC", "isa": ["asimddp"]}


def _int8_classes_manifest(classes: dict[str, Any]) -> Manifest:
    manifest = _manifest("cpu-int8", VNNI)
    manifest.raw["configuration"]["int8_classes"] = classes
    return manifest


def test_an_arm64_class_proven_by_the_build_serves_and_another_does_not(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    equivalent = {"proof": "equivalence", "rows": 8, "equivalent": True, "max_probability_difference": 1e-7}
    gated = {"proof": "emulated-gate", "target": "cpu-int8", "passed": True, "rows": 30,
             "max_probability_error": 0.011, "max_action_error": 0.002}
    assert unproven_here(_int8_classes_manifest({"arm64-dotprod": equivalent}), "a" * 64, store, GRAVITON2) is None
    assert unproven_here(_int8_classes_manifest({"arm64-dotprod": gated}), "a" * 64, store, GRAVITON2) is None
    assert not proven_for_class(_int8_classes_manifest({"arm64-dotprod": dict(gated, passed=False)}), "arm64-dotprod")
    reason = unproven_here(_int8_classes_manifest({"arm64-i8mm": gated}), "a" * 64, store, GRAVITON2)
    assert reason is not None and "arm64-dotprod" in reason and "avx512-vnni" in reason
    store.create(gate_record_key("a" * 64, "arm64-dotprod"), gate_record("a" * 64, GRAVITON2, PASSED))
    assert unproven_here(_int8_classes_manifest({}), "a" * 64, store, GRAVITON2) is None  # re-gated on Graviton2
