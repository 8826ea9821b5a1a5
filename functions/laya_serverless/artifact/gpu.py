"""Which GPU and onnxruntime a CUDA artifact was gated on, and whether that proof holds where it is served.

FP16 results depend on the kernels the GPU architecture and the onnxruntime build pick, as int8
results depend on the CPU's (`artifact.platform`): a `cuda-*` artifact serves only on the GPU model
and onnxruntime version its gate ran on, or where a re-gate left a record under `gates/`. The
manifest's `configuration.cuda` block holds what the build saw (`gpu_profile()` there).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from typing import Any

from .manifest import Manifest
from .platform import proven_by_record
from .store import ObjectStore

_QUERY = ("name", "driver_version", "memory.total", "compute_cap")


def _nvidia_smi() -> list[dict[str, str]]:
    """One row per visible GPU from `nvidia-smi` (the container toolkit mounts it); [] when it is absent."""
    tool = shutil.which("nvidia-smi")
    if tool is None:
        return []
    try:
        done = subprocess.run([tool, "--query-gpu=%s" % ",".join(_QUERY), "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=15, check=True)
    except (OSError, subprocess.SubprocessError):
        return []
    return [dict(zip(_QUERY, (v.strip() for v in line.split(",")), strict=False))
            for line in done.stdout.splitlines() if line.strip()]


def onnxruntime_build() -> dict[str, str | None]:
    """The onnxruntime that is imported (not whichever distribution metadata says): version, package, CUDA."""
    import onnxruntime as ort

    try:
        from onnxruntime.capi import build_and_package_info as info
    except ImportError:  # a CPU-only build has no package info module in some versions
        info = None
    return {"onnxruntime": str(ort.__version__), "package": getattr(info, "package_name", None),
            "cuda_version": getattr(info, "cuda_version", None)}


def gpu_profile() -> dict[str, Any]:
    """This machine's first GPU (model, driver, memory, compute capability) and the imported onnxruntime."""
    gpus = _nvidia_smi()
    return {"gpu": gpus[0] if gpus else None, "gpu_count": len(gpus), **onnxruntime_build()}


def gpu_key(profile: dict[str, Any]) -> str:
    """A store-key-safe name for the kernel class a profile stands for: GPU model and onnxruntime version."""
    gpu = (profile.get("gpu") or {}).get("name") or "unknown-gpu"
    return re.sub(r"[^a-z0-9.]+", "-", ("%s-ort-%s" % (gpu, profile.get("onnxruntime"))).lower()).strip("-")


def cuda_block(manifest: Manifest) -> dict[str, Any]:
    block = manifest.raw["configuration"].get("cuda")
    return block if isinstance(block, dict) else {}


def cpu_retry_proven(manifest: Manifest) -> bool:
    """Whether the build gated this graph on the CPU provider too, which is what allows the out-of-memory retry."""
    retry = cuda_block(manifest).get("cpu_retry")
    return isinstance(retry, dict) and retry.get("passed") is True


def unproven_on_this_gpu(manifest: Manifest, artifact_id: str, store: ObjectStore,
                         here: dict[str, Any]) -> str | None:
    """Why a cuda artifact's gate does not hold on this GPU and onnxruntime, or None when it does."""
    built = cuda_block(manifest).get("build_gpu")
    if not isinstance(built, dict) or not built.get("gpu"):
        return "cuda artifact %s records no GPU it was gated on; rebuild it on the GPU that serves" % artifact_id[:12]
    if here.get("gpu") is None:
        return ("cannot tell which GPU this is (nvidia-smi is not available), so the gate of cuda artifact %s "
                "cannot be checked here" % artifact_id[:12])
    wanted, have = gpu_key(built), gpu_key(here)
    if wanted == have:
        return None
    record = proven_by_record(store, artifact_id, have, manifest.target)  # a valid re-gate record, not any file
    if record is None:
        return None
    return ("cuda artifact %s was gated on %s and never here (%s; %s); FP16 kernels differ between GPUs and "
            "onnxruntime builds. Build or re-gate it on this GPU with `laya-artifacts import`"
            % (artifact_id[:12], wanted, have, record))
