#!/usr/bin/env bash
# The GPU check in three device calls (docs/gpu.md, "On a GPU: how to run"). Here, on the CPU:
#
#   scripts/gpu_check.sh prepare [BUILD]    checkpoints, the base shape's goldens slice, the payload parts (~1 h on
#                                           a shared 2-core machine, most of it recording the base shape's goldens)
#   scripts/gpu_check.sh calls [BUILD]      prints the three `run` calls: command, carry, timeout
#
# BUILD (default build/gpu) must be a git-ignored folder of the checkout the device tool sends, so that `carry`
# can name it. There, gpu_check.py (from the carried code) builds, gates and benchmarks; results come back in $OUT.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${2:-build/gpu}"

prepare() {
    git -C "$ROOT" check-ignore -q "$BUILD" || { echo "gpu_check.sh: $BUILD is not git-ignored" >&2; exit 2; }
    python "$ROOT/scripts/gpu_payload.py" --make --build "$ROOT/$BUILD" --checkpoints "$ROOT/$BUILD/ckpt" \
        --base "$ROOT/$BUILD/base"
}

calls() {
    local parts=("$ROOT/$BUILD"/p[0-9]*/part.*) last n
    n=${#parts[@]}
    for ((i = 1; i < n; i++)); do
        printf 'run %d: timeout_s=120 carry=["%s/p%d"]\n  mkdir -p /tmp/pl && cp %s/p%d/part.%d /tmp/pl/ && sha256sum /tmp/pl/*\n' \
            "$i" "$BUILD" "$i" "$BUILD" "$i" "$i"
    done
    last="$n"
    # 590 s of a 600 s call; where `status` says less device time is left, lower timeout_s and --budget together.
    printf 'run %d (at once, while the machine is warm): timeout_s=590 carry=["%s/p%d", "%s/code"]\n' \
        "$last" "$BUILD" "$last" "$BUILD"
    printf '  set -e; W=/tmp/w; mkdir -p /tmp/pl $W; cp %s/p%d/part.%d /tmp/pl/; sha256sum /tmp/pl/*; ' "$BUILD" "$last" "$last"
    printf 'python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/zs %s/code/backports_zstd-*.whl; ' "$BUILD"
    printf 'Z="import sys,shutil;from backports import zstd;shutil.copyfileobj(zstd.open(sys.stdin.buffer),sys.stdout.buffer,1<<20)"; '
    printf 'cat %s | PYTHONPATH=/tmp/zs python3 -c "$Z" | tar -x -C $W; ' "$(for ((i = 1; i <= n; i++)); do printf '/tmp/pl/part.%d ' "$i"; done)"
    printf 'PYTHONPATH=/tmp/zs python3 -c "$Z" < %s/code/code.tar.zst | tar -x -C $W; ' "$BUILD"
    printf 'cd $W/code && PYTHONUNBUFFERED=1 python3 scripts/gpu_check.py device --work $W --out $OUT --budget 560 2>&1 | tee $OUT/driver.log\n'
}

"${1:?usage: gpu_check.sh prepare|calls [BUILD]}"
