"""The GPU image's Dockerfile, parsed (no Docker engine needed): pinned CUDA base matching the pinned
onnxruntime-gpu, non-root, port 8080, a health check on /ping, SageMaker's `serve`, and no build side."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import ROOT

IMAGE = ROOT / "layers" / "gpu"
# CUDA major of each onnxruntime-gpu on PyPI, read from the wheels' build_and_package_info (2026-12-01):
# 1.25.x-1.26.0 are built for CUDA 12.8, 1.27.0 and later for CUDA 13.0.
ORT_GPU_CUDA_MAJOR = {"1.25.1": 12, "1.26.0": 12, "1.27.0": 13, "1.30.0": 13, "1.31.1": 13}


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order, continuation lines joined and comments dropped."""
    text = (IMAGE / "Dockerfile").read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    joined = re.sub(r"\\\n\s*", " ", "\n".join(lines))
    found = []
    for line in joined.splitlines():
        if line.strip():
            keyword, _, rest = line.strip().partition(" ")
            found.append((keyword.upper(), rest.strip()))
    return found


def only(keyword: str) -> str:
    [value] = [rest for kw, rest in instructions() if kw == keyword]
    return value


def requirements() -> dict[str, str]:
    pins = {}
    for line in (IMAGE / "requirements.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, sep, version = line.partition("==")
            assert sep and version, "every requirement is pinned exactly: %r" % line
            pins[name.strip().lower()] = version.strip()
    return pins


def test_the_base_image_is_a_pinned_cuda_runtime_matching_onnxruntime_gpu() -> None:
    match = re.fullmatch(r"nvidia/cuda:(\d+)\.(\d+)\.(\d+)-cudnn-runtime-ubuntu(22\.04|24\.04)", only("FROM"))
    assert match, only("FROM")
    assert int(match.group(1)) == ORT_GPU_CUDA_MAJOR[requirements()["onnxruntime-gpu"]]


def test_python_312_and_only_the_gpu_onnxruntime_without_the_build_side() -> None:
    pins = requirements()
    assert "onnxruntime" not in pins and "onnxruntime-gpu" in pins   # both ship `onnxruntime`: never together
    text = "\n".join(rest for _, rest in instructions()).lower() + "\n".join(pins)
    for banned in ("torch", "transformers", "optimum", "laya_artifacts", "coreml", "mps", "metal"):
        assert banned not in text, banned
    assert "python3.12" in text
    assert pins["tokenizers"] == "0.23.3" and pins["fastapi"] == "0.165.0"   # the runtime's own pins


def test_non_root_port_8080_health_check_on_ping_and_serve() -> None:
    user = only("USER").split(":")[0]
    assert user not in ("root", "0", "")
    assert only("EXPOSE") == "8080"
    assert "/ping" in only("HEALTHCHECK") and "8080" in only("HEALTHCHECK")
    assert only("ENTRYPOINT") == '["laya-entrypoint"]' and only("CMD") == '["serve"]'
    env = " ".join(rest for kw, rest in instructions() if kw == "ENV")
    for setting in ("LAYA_DEVICE=cuda", "LAYA_PORT=8080", "LAYA_HOST=0.0.0.0", "LAYA_TARGET=cuda-fp16"):
        assert setting in env


def test_every_copied_path_exists_and_the_context_admits_only_them() -> None:
    copies = [rest.split()[0] for kw, rest in instructions() if kw == "COPY"]
    assert copies and all((ROOT / path).exists() for path in copies), copies
    ignore = [line for line in (IMAGE / "Dockerfile.dockerignore").read_text().splitlines()
              if line and not line.startswith("#")]
    assert ignore[0] == "*" and {line for line in ignore if line.startswith("!")} == {
        "!functions/laya_serverless", "!layers/gpu"}
    assert all(any(path.startswith(allowed[1:]) for allowed in ignore if allowed.startswith("!")) for path in copies)


@pytest.mark.parametrize(("args", "environ", "expected"), [
    ([], {}, "-m laya_serverless.local_edge.cli serve port=8080"),
    (["serve"], {"SAGEMAKER_BIND_TO_PORT": "9090"}, "-m laya_serverless.local_edge.cli serve port=9090"),
    (["python", "--version"], {}, "--version port=8080"),
])
def test_the_entrypoint_serves_on_sagemakers_serve_and_runs_anything_else(
        tmp_path: Path, args: list[str], environ: dict[str, str], expected: str) -> None:
    stub = tmp_path / "python"
    stub.write_text('#!/bin/sh\necho "$* port=$LAYA_PORT"\n')
    stub.chmod(0o755)
    env = {"PATH": "%s:%s" % (tmp_path, os.environ["PATH"]), "LAYA_PORT": "8080", **environ}
    done = subprocess.run(["sh", str(IMAGE / "entrypoint.sh"), *args], capture_output=True, text=True, env=env,
                          check=True)
    assert done.stdout.strip() == expected


def test_the_serve_path_imports_with_the_image_requirements_alone() -> None:
    """The image leaves out mangum (Lambda only): `laya-serverless serve` and the app must not need it."""
    code = ("import sys; sys.modules['mangum'] = None; "
            "import laya_serverless.local_edge.cli, laya_serverless.http.service, laya_serverless.http.sagemaker")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "functions"))
    subprocess.run([sys.executable, "-c", code], check=True, env=env)
