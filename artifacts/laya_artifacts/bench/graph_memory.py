"""Peak memory of opening one ONNX graph three ways, each in a fresh process: from a file on disk, from bytes in
Python, and from an anonymous memory file (memfd, what the runtime does on Lambda, `artifact/fetch.py`).

    laya-artifacts bench graph-memory GRAPH.onnx [--threads 2]

Prints, per way: session creation time, peak RSS, and RSS once the session exists (after the bytes or the
memory file were released). A memory file's pages are not in RSS (they are shared memory); a memory cgroup
counts them, which `tests/cloud/test_lambda_runtime.py` measures.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

PROBE = """
import gc, os, resource, shutil, sys, time
import onnxruntime as ort
way, graph, threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
options = ort.SessionOptions()
options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
options.intra_op_num_threads = threads
start = time.perf_counter()
if way == "file":
    session = ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"])
elif way == "bytes":
    data = open(graph, "rb").read()
    session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
    del data
else:
    fd = os.memfd_create("graph")
    with open(graph, "rb") as source, open("/proc/self/fd/%d" % fd, "wb") as target:
        shutil.copyfileobj(source, target, 1 << 20)
    session = ort.InferenceSession("/proc/self/fd/%d" % fd, options, providers=["CPUExecutionProvider"])
    os.close(fd)
seconds = time.perf_counter() - start
gc.collect()
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
now = int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
print("%-6s session %.2f s, peak RSS %.0f MB, after %.0f MB" % (way, seconds, peak, now))
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("graph")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    for way in ("file", "bytes", "memfd"):
        subprocess.run([sys.executable, "-c", PROBE, way, args.graph, str(args.threads)], check=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
