"""Run once while the image is built: the imported onnxruntime is the GPU build, and the build side is absent.

It cannot check that a GPU is reachable (there is none at build time): the app refuses at start,
and `/ping` says why, when CUDAExecutionProvider does not become active.
"""

import importlib.util
import sys

import onnxruntime
from onnxruntime.capi import build_and_package_info as info

problems = []
if info.package_name != "onnxruntime-gpu" or "CUDAExecutionProvider" not in onnxruntime.get_available_providers():
    problems.append("onnxruntime is %s %s, not the CUDA build" % (info.package_name, onnxruntime.__version__))
problems += ["%s is installed; the runtime never imports it" % name
             for name in ("torch", "transformers", "optimum", "laya_artifacts") if importlib.util.find_spec(name)]
import laya_serverless.http.service  # noqa: E402,F401  (the app imports with what the image holds)

print("onnxruntime-gpu %s for CUDA %s" % (onnxruntime.__version__, info.cuda_version))
sys.exit("\n".join(problems) if problems else 0)
