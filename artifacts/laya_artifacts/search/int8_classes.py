"""Which int8 kernel classes an int8 build's gate holds on: the build machine's own, AVX2 under emulation (most of
Lambda's x86 fleet) and the Arm classes when the arm64 package is built here; the manifest records them and the
runtime serves int8 only on a recorded class (`laya_serverless.artifact.platform`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from laya_artifacts.search.arm64_classes import arm64_classes
from laya_artifacts.search.emulated import (
    AVX2_CPU,
    EMULATED_GATE_MAX_CASES,
    QEMU,
    can_emulate,
    emulated_class_gate,
    equivalence,
    equivalence_rows,
)
from laya_serverless.artifact.platform import cpu_profile, int8_kernels

AVX2_CLASS = "avx2"


def int8_classes(out_dir: Path, goldens: dict[str, Any], progress: Callable[[str], None]) -> dict[str, Any]:
    """The int8 kernel classes the gate holds on: the build's own, and AVX2 (most of Lambda's x86 fleet) when an
    emulated AVX2 CPU answers a slice the same (`emulated.equivalence`) or, failing that on a corpus small enough
    to replay emulated, passes the whole gate. The runtime accepts what is recorded here (`artifact.platform`)."""
    here = int8_kernels(cpu_profile())
    classes: dict[str, Any] = {here: {"proof": "gate"}}
    if here != AVX2_CLASS:
        classes.update(_avx2_class(out_dir, goldens, here, progress))
    # the Arm classes (Graviton2 dotprod, i8mm): the arm64 Lambda package run emulated, when it is built here
    classes.update(arm64_classes(out_dir, goldens, progress))
    return classes


def _avx2_class(out_dir: Path, goldens: dict[str, Any], here: str,
                progress: Callable[[str], None]) -> dict[str, Any]:
    if not can_emulate():
        progress("    %s is not installed: the AVX2 class is left to the deploy-time gate" % QEMU)
        return {}
    progress("    checking that an AVX2 CPU (qemu -cpu %s) answers as this %s one, on %d short cases"
             % (AVX2_CPU, here, len(equivalence_rows(goldens))))
    check = equivalence(out_dir, goldens)
    progress("    max |dp| between the classes: %.2g over %d rows"
             % (check["max_probability_difference"], check["rows"]))
    if not check["equivalent"] and len(goldens["rows"]) <= EMULATED_GATE_MAX_CASES:
        progress("    not equivalent (> %g): replaying the whole gate as an AVX2 CPU (%d cases)"
                 % (check["tolerance"], len(goldens["rows"])))
        check = emulated_class_gate(out_dir, goldens, check)
    proven = check.get("equivalent") or check.get("passed")
    progress("    %s: %s" % (check["kernels"], "proven (%s)" % check["proof"] if proven
                               else "not proven here: left to the deploy-time gate on the serving CPU"))
    return {check["kernels"]: check}
