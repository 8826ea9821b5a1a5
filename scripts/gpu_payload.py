"""Here (CPU, PyPI reachable): pack what the GPU check needs into parts a device call can carry (docs/gpu.md).

    python scripts/gpu_payload.py --build build/gpu --checkpoints DIR --base DIR [--make]   # the parts, once
    python scripts/gpu_payload.py --build build/gpu --base DIR --code-only         # code.tar.xz, after each edit

A device call carries the repository's working tree plus at most 64 MiB, so the payload is one zstd stream
(`--long`: its 128 MiB window stores the demo's encoder, MiniLM's, once) cut into `--part-mib` parts,
`build/gpu/pN/part.N` (git-ignored), one per call, and the code a small stream of its own
(`build/gpu/code/code.tar.zst`, carried with the last part, beside the backports-zstd wheel that unpacks
both there: Python 3.12 has no zstd). They hold:

- `site/`: onnxruntime-gpu 1.31.1 (CUDA 13) without its TensorRT provider and C-API library, its CUDA provider
  pruned to sm_90 cubins (`gpu_prune_fatbin.py`: 284 MB, half of it other GPUs' code), and
  upstream laya 0.4.15 (pure Python); the device image has torch, transformers, onnx, numpy, tokenizers;
- `ckpt/`: the tiny ModernBERT, MiniLM and demo checkpoints as built here (FP16 weights, bit for bit: their
  goldens name these hashes), and for the
  ModernBERT-base shape (313 MB) only what its seeded draw cannot be trusted to repeat elsewhere: configs,
  tokenizer and the float64-derived scorer (`gpu_check.py` redraws the rest there and checks the hash);
- `code/`: this worktree's functions/, artifacts/, scripts/ and goldens/, and the base shape's goldens slice,
  recorded here on PyTorch CPU FP32 (goldens are never recorded on the device).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ORT_GPU, LAYA, ZSTD = "onnxruntime-gpu==1.31.1", "laya==0.4.15", "backports-zstd==1.8.0"
ZSTD_ARGS = ("zstd", "-q", "-12", "--long=27", "-T2")   # a window of 2^27: libzstd's default decoding limit
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64")
ORT_LEFT_OUT = ("libonnxruntime_providers_tensorrt.so", "libonnxruntime.so.1.31.1")
CODE = ("functions", "artifacts", "scripts", "goldens")
NOT_CODE = ("__pycache__", "*.pyc", "head.safetensors")   # the demo's head travels inside its checkpoint
CHECKPOINTS = ("tiny-modernbert", "minilm", "demo")
SCORER = "scorer."   # derived in float64 from a forward pass (`checkpoints._discriminative_scorer`)


def download(dl: Path) -> None:
    if all(any(dl.glob(p)) for p in ("onnxruntime_gpu-1.31.1-*.whl", "laya-0.4.15-*.whl", "backports_zstd-*.whl")):
        return
    platforms = [arg for p in PLATFORMS for arg in ("--platform", p)]
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--python-version",
                    "3.12", "--implementation", "cp", *platforms, "-d", str(dl), ORT_GPU, LAYA, ZSTD], check=True)


def stage_site(dl: Path, site: Path) -> dict[str, str]:
    """onnxruntime-gpu (pruned) and laya unpacked as site-packages, as pip would install them."""
    for wheel in (*dl.glob("onnxruntime_gpu-1.31.1-*.whl"), *dl.glob("laya-0.4.15-*.whl")):
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(site)
    capi = site / "onnxruntime" / "capi"
    for name in ORT_LEFT_OUT:
        (capi / name).unlink()
    cuda = capi / "libonnxruntime_providers_cuda.so"
    pruned = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu_prune_fatbin.py"), str(cuda), str(cuda),
                             "--keep-sm", "90"], check=True, capture_output=True, text=True).stdout
    return {"cuda_provider_pruned": pruned.strip()}


BASE_SLICE = 3   # every third case of the gate corpus: 50 cases, 211 rows (47 min at 1 thread on a shared core)


def make_checkpoints(out: Path) -> None:
    """tiny-modernbert, minilm and demo as the goldens name them (the committed and shipped goldens' hashes)."""
    from laya_artifacts.checkpoints.demo import assemble_demo
    from laya_artifacts.checkpoints.make import make_checkpoint

    for kind in CHECKPOINTS:
        if not (out / kind / "model.safetensors").is_file():
            assemble_demo(out / kind) if kind == "demo" else make_checkpoint(kind, out / kind)


def make_base(base: Path) -> None:
    """The ModernBERT-base shape (seed 0) and its goldens for a slice of the corpus, recorded here on PyTorch CPU
    FP32 at one thread (the whole corpus is too slow on a shared CPU, and goldens are never recorded there)."""
    from laya_artifacts.checkpoints.make import make_checkpoint
    from laya_artifacts.goldens.corpus import gate_corpus
    from laya_artifacts.goldens.record import record_goldens, write_goldens

    if not (base / "checkpoint" / "model.safetensors").is_file():
        make_checkpoint("modernbert-base", base / "checkpoint")
    if not (base / "goldens" / "goldens.json").is_file():
        cases = gate_corpus()[::BASE_SLICE]
        write_goldens(record_goldens(base / "checkpoint", "modernbert-base", cases=cases, threads=1,
                                     progress=print), base / "goldens")


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def base_fixed(checkpoint: Path, out: Path) -> None:
    """The base checkpoint without its 313 MB of weights: configs, tokenizer, the scorer, the weights' hash."""
    from safetensors.numpy import load_file, save_file

    shutil.copytree(checkpoint, out, ignore=shutil.ignore_patterns("model.safetensors"))
    weights = load_file(str(checkpoint / "model.safetensors"))
    save_file({k: v for k, v in weights.items() if k.startswith(SCORER)}, str(out / "scorer.safetensors"))
    (out / "weights_sha256").write_text(sha256(checkpoint / "model.safetensors") + "\n")


def stage_checkpoints(built: Path, base: Path, out: Path) -> dict[str, str]:
    for kind in CHECKPOINTS:
        shutil.copytree(built / kind, out / kind)
    base_fixed(base / "checkpoint", out / "modernbert-base-fixed")
    return {kind: sha256(out / kind / "model.safetensors") for kind in CHECKPOINTS}


def zstd_tar(out: Path, add: Callable[[tarfile.TarFile], None]) -> None:
    """`out`: a tar stream written by `add`, packed by the zstd command."""
    with out.open("wb") as packed:
        zstd = subprocess.Popen([*ZSTD_ARGS, "-c"], stdin=subprocess.PIPE, stdout=packed)
        assert zstd.stdin is not None
        with tarfile.open(fileobj=zstd.stdin, mode="w|") as tar:
            add(tar)
        zstd.stdin.close()
        if zstd.wait() != 0:
            raise RuntimeError("zstd failed on %s" % out)


def pack_code(base: Path, build: Path, record: dict[str, object]) -> Path:
    """`build/code/`: code.tar.zst (this worktree's code and goldens, and the base shape's goldens slice) and the
    backports-zstd wheel that unpacks everything on the device."""
    out = build / "code"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    for wheel in (build / "dl").glob("backports_zstd-*.whl"):
        shutil.copy(wheel, out / wheel.name)

    def add(tar: tarfile.TarFile) -> None:
        for name in CODE:
            tar.add(ROOT / name, arcname="code/" + name,
                    filter=lambda info: None if any(Path(info.name).match(p) for p in NOT_CODE) else info)
        if (base / "goldens").is_dir():   # else the device stages the base shape ungated, for latency alone
            tar.add(base / "goldens", arcname="code/goldens/modernbert-base")
        data = json.dumps(record, indent=1).encode() + b"\n"
        info = tarfile.TarInfo("code/payload.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))

    zstd_tar(out / "code.tar.zst", add)
    return out / "code.tar.zst"


def pack(stage: Path, build: Path, part_bytes: int) -> list[Path]:
    """One zstd stream of the staged tree cut into parts `build/pN/part.N`; returns them."""
    for old in build.glob("p[0-9]*"):
        shutil.rmtree(old)
    stream = build / "payload.tar.zst"
    zstd_tar(stream, lambda tar: [tar.add(stage / entry, arcname=entry) for entry in ("site", "ckpt")])
    parts = []
    with stream.open("rb") as data:
        while chunk := data.read(part_bytes):
            folder = build / ("p%d" % (len(parts) + 1))
            folder.mkdir()
            parts.append(folder / ("part.%d" % (len(parts) + 1)))
            parts[-1].write_bytes(chunk)
    stream.unlink()
    return parts


def parser() -> argparse.ArgumentParser:
    """This script's arguments (tests/unit/test_docs_commands.py parses the docs' command lines with it)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", type=Path, required=True, help="a git-ignored folder of the checkout that travels")
    parser.add_argument("--checkpoints", type=Path, help="tiny-modernbert/, minilm/, demo/ built here")
    parser.add_argument("--base", type=Path, required=True,
                        help="the base shape's checkpoint/ and goldens/ (a slice), made here")
    parser.add_argument("--part-mib", type=int, default=44)
    parser.add_argument("--code-only", action="store_true", help="repack the code alone")
    parser.add_argument("--make", action="store_true", help="first make what is missing of the checkpoints and base")
    return parser


def main() -> int:
    args = parser().parse_args()
    if args.make:
        make_checkpoints(args.checkpoints)
        make_base(args.base)
    record_file = args.build / "payload.json"
    if not args.code_only:
        stage = args.build / "stage"
        shutil.rmtree(stage, ignore_errors=True)
        download(args.build / "dl")
        record: dict[str, object] = dict(stage_site(args.build / "dl", stage / "site"))
        record["checkpoints_sha256"] = stage_checkpoints(args.checkpoints, args.base, stage / "ckpt")
        parts = pack(stage, args.build, args.part_mib * 1024 * 1024)
        shutil.rmtree(stage)
        record["parts"] = {p.name: sha256(p) for p in parts}
        record_file.write_text(json.dumps(record, indent=1) + "\n")
    code = pack_code(args.base, args.build, json.loads(record_file.read_text()))
    for path in sorted(args.build.glob("p[0-9]*/part.*")) + [code]:
        print("%s %.1f MiB" % (path, path.stat().st_size / 2**20))
    return 0


if __name__ == "__main__":
    sys.exit(main())
