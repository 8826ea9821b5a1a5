"""The int8 tests hold on both x86 int8 kernel classes this project's machines (and Lambda's) have.

This session runs on one class; the `int8`-marked tests run again in a second pytest process under
`qemu-x86_64-static -cpu Haswell`, an AVX2-only CPU without VNNI, where ONNX Runtime picks its AVX2
int8 kernels (cpuid says Haswell; /proc/cpuinfo still shows the host). On an AVX2 host that is the
same class again, and the run still proves the emulation path. The checkpoints and FP32 exports
built here are reused (they are the same bits on every CPU), so only ONNX Runtime's work — quantize,
optimize, gate — runs emulated. Emulation is many times slower: fidelity, never timing.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import EXPECT_KERNELS_ENV, PREBUILT_ENV, ROOT

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(platform.machine() != "x86_64", reason="emulates an x86 CPU class")]

EMULATED_CPU = "Haswell"
# Long enough for the emulated run on two loaded cores; it took about (see docs/testing.md).
EMULATED_TIMEOUT_S = 1500


def test_the_int8_tests_pass_on_an_emulated_avx2_cpu(minilm: tuple[Path, Path], tiny_modernbert: tuple[Path, Path],
                                                     tmp_path: Path) -> None:
    prebuilt = {"minilm": [str(p) for p in minilm], "tiny-modernbert": [str(p) for p in tiny_modernbert]}
    env = dict(os.environ, **{PREBUILT_ENV: json.dumps(prebuilt), EXPECT_KERNELS_ENV: "avx2"})
    command = ["qemu-x86_64-static", "-cpu", EMULATED_CPU, sys.executable, "-m", "pytest", "-m", "int8",
               "-p", "no:cacheprovider", "-q", "--basetemp", str(tmp_path / "emulated"),
               "tests/functional/test_build.py", "tests/functional/test_deploy_gate.py"]
    run = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=EMULATED_TIMEOUT_S)
    output = "\n".join(line for line in (run.stdout + run.stderr).splitlines() if "TCG doesn't support" not in line)
    assert run.returncode == 0, output[-8000:]
    summary = output.strip().splitlines()[-1]
    assert " passed" in summary and "failed" not in summary and "error" not in summary, summary
    assert int(summary.split(" passed")[0].split()[-1]) >= 9, summary  # every int8 test ran there
