#!/usr/bin/env bash
# The GPU check, prepared for a session that is lent a GPU machine (docs/gpu.md; not run yet: no device
# was lent to the task that wrote it). It builds and gates cuda-fp16 and cuda-fp32 for the test checkpoints
# and the demo on that GPU, proves the refusal of a session onnxruntime puts on the CPU, and benchmarks
# beside upstream laya.Agent(device="cuda"). Results land under $OUT.
#
#   scripts/gpu_check.sh prepare          here (CPU, network to PyPI): fills .gpu-carry/ (git-ignored)
#   scripts/gpu_check.sh receive          there, once per part: keeps the carried part in /tmp/gpu-carry
#   scripts/gpu_check.sh check            there, last: install, build, gate, benchmark
#
# A call carries at most 64 MiB with the repository, and onnxruntime-gpu is ~244 MiB, so big files travel
# as 44 MiB parts (ort-NN, demo-NN), one per call while the machine stays warm (30 s): carry [".gpu-carry/small",
# ".gpu-carry/parts/PART"] for each part with `receive`, then [".gpu-carry/small"] with `check`.
# The device image has CUDA 13 libraries (pip nvidia-*-cu13) and torch 2.11, so the check runs
# onnxruntime-gpu 1.31.1 (CUDA 13); the endpoint image pins 1.26.0 (CUDA 12). Its gates prove the recipe
# and the code path on an H200; the served configuration is gated again on the serving GPU (docs/gpu.md).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CARRY="$ROOT/.gpu-carry"
ORT_GPU="onnxruntime-gpu==1.31.1"
PART_BYTES=$((44 * 1024 * 1024))

prepare() {   # here: wheels, checkpoints and goldens (upstream on PyTorch CPU FP32 is the reference)
    local exclude
    exclude="$(git -C "$ROOT" rev-parse --git-common-dir)/info/exclude"
    grep -qx '/.gpu-carry/' "$exclude" 2>/dev/null || echo '/.gpu-carry/' >> "$exclude"
    rm -rf "$CARRY" && mkdir -p "$CARRY/small/wheels" "$CARRY/big" "$CARRY/parts"
    local pip=(python -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp
               --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64)
    "${pip[@]}" -d "$CARRY/big" "$ORT_GPU"
    "${pip[@]}" -d "$CARRY/small/wheels" laya==0.4.15 backports-zstd==1.8.0
    laya-artifacts make-checkpoint tiny-modernbert --out "$CARRY/small/tiny-modernbert"
    cp "$ROOT/goldens/tiny-modernbert/goldens.json" "$CARRY/small/tiny-modernbert.goldens.json"
    laya-artifacts make-checkpoint demo --out "$CARRY/big/demo"
    laya-artifacts goldens "$CARRY/big/demo" --name demo --out "$CARRY/small/demo-goldens"
    tar -C "$CARRY/big" -cf "$CARRY/big/demo.tar" demo
    split -b "$PART_BYTES" -d "$CARRY"/big/onnxruntime_gpu-*.whl "$CARRY/parts/ort-"
    split -b "$PART_BYTES" -d "$CARRY/big/demo.tar" "$CARRY/parts/demo-"
    rm -rf "$CARRY/big"
    ls -l "$CARRY"/parts "$CARRY"/small
}

receive() {   # there: keep the part this call carried (the machine keeps /tmp while it stays warm)
    mkdir -p /tmp/gpu-carry && cp -v "$CARRY"/parts/* /tmp/gpu-carry/
}

check() {
    : "${OUT:?run on the device machine, where OUT is set}"
    exec > >(tee "$OUT/gpu_check.log") 2>&1
    nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv | tee "$OUT/gpu.csv"
    local wheel=/tmp/onnxruntime_gpu-1.31.1-cp312-cp312-manylinux_2_28_x86_64.whl
    cat /tmp/gpu-carry/ort-* > "$wheel"
    mkdir -p /tmp/ckpt && cat /tmp/gpu-carry/demo-* | tar -C /tmp/ckpt -xf -
    # The GPU onnxruntime shadows the image's CPU one; our two packages come from the working tree.
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$wheel" "$CARRY"/small/wheels/*.whl
    export PYTHONPATH="/tmp/site:$ROOT/functions:$ROOT/artifacts"
    export PATH="$ROOT/.gpu-bin:$PATH" && mkdir -p "$ROOT/.gpu-bin"
    printf '#!/bin/sh\nexec python3 -m laya_artifacts.cli "$@"\n' > "$ROOT/.gpu-bin/laya-artifacts" && chmod +x "$ROOT/.gpu-bin/laya-artifacts"

    # 1. No silent fallback, live: before the CUDA libraries are on the loader path, onnxruntime hands back
    #    a CPU session for a CUDA request; open_session must refuse it.
    python3 - <<'EOF' | tee "$OUT/refusal.txt" || true
import onnx, onnxruntime as ort
from onnx import TensorProto, helper
from laya_serverless.core.providers import Placement, open_session, providers_for
from laya_serverless.errors import DeviceUnavailable
graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
onnx.save(helper.make_model(graph), "/tmp/identity.onnx")
raw = ort.InferenceSession("/tmp/identity.onnx", providers=providers_for("cuda"))
print("offered", ort.get_available_providers(), "; onnxruntime placed a CUDA request on", raw.get_providers())
class Raw:
    def __init__(self, session): self.session = session
    def active_providers(self): return self.session.get_providers()
    def run(self, feeds): return self.session.run(None, feeds)
try:
    open_session("/tmp/identity.onnx", "cuda", placement=Placement(open=lambda g, p, t, o: Raw(
        ort.InferenceSession(str(g), providers=list(p)))))
    print("NOT refused: the session is on CUDA already (libraries found without LD_LIBRARY_PATH)")
except DeviceUnavailable as exc:
    print("refused:", exc)
EOF
    # The pip-installed CUDA 13 / cuDNN libraries of the device image, for onnxruntime's loader.
    LD_LIBRARY_PATH="$(python3 -c 'import glob, os, nvidia; print(":".join(sorted({os.path.dirname(p) for d in nvidia.__path__ for p in glob.glob(d + "/*/lib/lib*.so*")})))')"
    export LD_LIBRARY_PATH

    # 2. Build and gate every (checkpoint, target) on this GPU; a failing gate is a result, not a stop.
    for target in cuda-fp16 cuda-fp32; do
        laya-artifacts build "$CARRY/small/tiny-modernbert" --target "$target" --name tiny-modernbert \
            --goldens "$CARRY/small/tiny-modernbert.goldens.json" --out "/tmp/art/tiny-$target" || true
        laya-artifacts build /tmp/ckpt/demo --target "$target" --name demo \
            --goldens "$CARRY/small/demo-goldens/goldens.json" --out "/tmp/art/demo-$target" || true
    done
    # Every configuration in two files (at most 8 files come back): manifests in one JSON, reports in one text.
    python3 - <<'EOF' > "$OUT/manifests.json"
import glob, json, os
print(json.dumps({os.path.basename(d): json.load(open(d + "/manifest.json")) if os.path.exists(d + "/manifest.json")
                  else None for d in sorted(glob.glob("/tmp/art/*"))}, indent=1))
EOF
    for report in /tmp/art/*/parity_report.txt; do echo "== $report"; cat "$report"; done > "$OUT/parity_reports.txt" || true

    # 3. Warm latency beside upstream on the GPU, for the gated demo artifacts.
    for target in cuda-fp16 cuda-fp32; do
        [ -f "/tmp/art/demo-$target/manifest.json" ] || continue
        python3 "$ROOT/scripts/bench_gpu.py" --artifact "/tmp/art/demo-$target" --checkpoint /tmp/ckpt/demo \
            > "$OUT/bench-demo-$target.json" || true
    done
}

"${1:?usage: gpu_check.sh prepare|receive|check}"
