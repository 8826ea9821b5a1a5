"""The parity gate run as another x86 CPU class, under qemu user-mode emulation (`qemu-x86_64-static -cpu`).

int8 results depend on the int8 kernels ONNX Runtime picks from cpuid: a VNNI machine cannot see what an
AVX2-only CPU (most of Lambda's x86 fleet) answers, except by emulating one. `-cpu Haswell` is AVX2
without VNNI. Only the gate's replay runs emulated (torch-free, one session thread: ONNX Runtime's
spinning thread pool crawls under emulation), so it takes a minute or two on a small slice: fidelity,
never timing. Run as a module, it is the emulated side: it gates and prints the report as JSON.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

QEMU = "qemu-x86_64-static"
AVX2_CPU = "Haswell"
_MARK = "laya-emulated-gate:"


def emulated_gate(artifact_dir: Path, goldens_path: Path, target: str, cpu: str = AVX2_CPU,
                  timeout_s: float = 900) -> dict[str, Any]:
    """The gate report of `artifact_dir` against `goldens_path` as seen by an emulated `cpu`, plus the CPU
    profile and int8 kernel class the emulated process saw (`cpu`, `int8_kernels`)."""
    if platform.machine() != "x86_64" or shutil.which(QEMU) is None:
        raise RuntimeError("the emulated gate needs %s on an x86_64 machine (apt-get install qemu-user-static)"
                           % QEMU)
    command = [QEMU, "-cpu", cpu, sys.executable, "-m", "laya_artifacts.emulated", str(artifact_dir),
               str(goldens_path), target]
    run = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
    found = [line[len(_MARK):] for line in run.stdout.splitlines() if line.startswith(_MARK)]
    if run.returncode != 0 or not found:
        tail = "\n".join(line for line in run.stderr.splitlines() if "TCG doesn't support" not in line)[-4000:]
        raise RuntimeError("the gate under %s -cpu %s failed (exit %d):\n%s" % (QEMU, cpu, run.returncode, tail))
    result: dict[str, Any] = json.loads(found[-1])
    return result


def main(argv: Sequence[str] | None = None) -> int:
    from laya_serverless.artifact.platform import cpu_profile, int8_kernels

    from .goldens import load_goldens
    from .parity import run_gate

    parser = argparse.ArgumentParser(prog="python -m laya_artifacts.emulated")
    parser.add_argument("artifact")
    parser.add_argument("goldens")
    parser.add_argument("target")
    args = parser.parse_args(argv)
    # repeat=False: whether a replay is bit-identical is not a property of the CPU class; the native gate checks it
    report = run_gate(Path(args.artifact), load_goldens(Path(args.goldens)), args.target, threads=1, repeat=False)
    profile = cpu_profile()
    print(_MARK + json.dumps({"cpu": profile, "int8_kernels": int8_kernels(profile), "report": report.as_dict()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
