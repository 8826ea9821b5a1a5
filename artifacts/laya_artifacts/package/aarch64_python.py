"""An aarch64 CPython 3.13 for running the arm64 Lambda package under `qemu-aarch64-static` on any x86 machine.

    laya-artifacts aarch64-python [--root build/aarch64-python] [--mirror URL]

Lambda's arm64 runtimes are CPython builds this project cannot install from a package index; the nearest
packaged aarch64 CPython is Debian 13's (trixie) 3.13.5, the same minor version as the stack's arm64 runtime
(`python3.13`, docs/deploy.md says why). This fetches its .deb files and the C libraries it and the layer's
wheels load, each pinned by name, version and sha256, into a cache, and unpacks them (`dpkg-deb -x`) into
ROOT. A second run with the same pins does nothing; a file whose sha256 differs is refused, never unpacked.

qemu-user shows an emulated process the x86 host's /proc/cpuinfo, and onnxruntime 1.32's CPU probe (pytorch
cpuinfo, reading the Arm `CPU part` of each processor) crashes on it at import (SIGSEGV, seen 2026-12-04; a real
Graviton, or a Lambda without /sys/devices/system/cpu/possible, imports with a warning). `cpu_root` gives each
emulated CPU model a root of links to ROOT plus the /proc/cpuinfo that CPU would show; qemu's `-L` prefix serves
files present under it first. Run the interpreter as
`qemu-aarch64-static -cpu neoverse-n1 -L CPU_ROOT CPU_ROOT/usr/bin/python3.13` (`emulated_python`).
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import urllib.request
from pathlib import Path

from laya_artifacts.errors import PackageError
from laya_artifacts.package.runtime_lock import ROOT
from laya_serverless.command import Command

DEFAULT_ROOT = ROOT / "build" / "aarch64-python"
MIRROR = "http://deb.debian.org/debian"
INTERPRETER = "usr/bin/python3.13"
# Debian 13 (trixie) arm64, seen 2026-12-04: (pool path, sha256). The interpreter and its standard library,
# glibc, and the libraries the standard modules the runtime imports (ssl/hashlib, lzma, bz2, ctypes, decimal,
# zlib, pyexpat) and the layer's wheels (libstdc++ for onnxruntime and tokenizers) link against.
DEBS = (
    ("pool/main/p/python3.13/python3.13-minimal_3.13.5-2+deb13u5_arm64.deb",
     "95237a3ad99bf9366308e16f7c79449c9371c4cff9c883772fb7c254652467eb"),
    ("pool/main/p/python3.13/libpython3.13-minimal_3.13.5-2+deb13u5_arm64.deb",
     "3655ef258b19142cf6fe38ef89731d5c630b2cf3309632494a720b28c1cfcd85"),
    ("pool/main/p/python3.13/libpython3.13-stdlib_3.13.5-2+deb13u5_arm64.deb",
     "d1178d24e4d143cc6c577d9dc0f26dd982efccc2e600d25ce86361f168a22be0"),
    ("pool/main/g/glibc/libc6_2.41-12+deb13u5_arm64.deb",
     "0966fc3da1a26cc57647c68b5736f791b6e7eb498173a7993f63b6c89b4ed4f5"),
    ("pool/main/g/gcc-14/libgcc-s1_14.2.0-19_arm64.deb",
     "1108bc87879833d6d9a145f22a4a15cddb34e065b4b5f4b97bee586adbac2851"),
    ("pool/main/g/gcc-14/libstdc++6_14.2.0-19_arm64.deb",
     "6669b0c52a2e7c6af9adfdabce3ff6e286065cdfbc7b85280862b5f799daebee"),
    ("pool/main/z/zlib/zlib1g_1.3.dfsg+really1.3.1-1+deb13u1_arm64.deb",
     "0e41b3d7ad8ad7fcd36dd4d61ca91a70018478fc4af652e044f4be770784ddff"),
    ("pool/main/e/expat/libexpat1_2.9.0-1~deb13u1_arm64.deb",
     "d9e1c50fcdad079fe16d77f1578adcc763be1bf7f2da7fa8adca7010b0c84c83"),
    ("pool/main/libf/libffi/libffi8_3.4.8-2_arm64.deb",
     "d84a783b818f2386627604e64b793eb4ac5bb9ea1ba321a194a1c9c82fe09a01"),
    ("pool/main/o/openssl/libssl3t64_3.5.9-1~deb13u1_arm64.deb",
     "18edc2b123e8e81efcc14ea5502454b4505285aa9d3325c22315e9304acb25ca"),
    ("pool/main/libz/libzstd/libzstd1_1.5.7+dfsg-1_arm64.deb",
     "924540bd59fdbfa77a0604360efdaca54411a43daf11c7e002a3c64791b67448"),
    ("pool/main/x/xz-utils/liblzma5_5.8.1-1+deb13u2_arm64.deb",
     "88f3aa499dc30edf01b9209ab40f11e37edfbecef971f84f4721de1874ed4827"),
    ("pool/main/b/bzip2/libbz2-1.0_1.0.8-6_arm64.deb",
     "3537fe4fc577a60c8a9568873cd577db7ebc135eb8bb1825f18caf8972d9d2f2"),
    ("pool/main/m/mpdecimal/libmpdec4_4.0.1-5_arm64.deb",
     "8bc2b7607973c432f6f9c9ed21aee21eed0b7041bc0cffb5636dcb2fef3a7334"),
)


QEMU = "qemu-aarch64-static"
# qemu -cpu models standing for each Arm int8 class: (MIDR part, /proc/cpuinfo Features). The features only
# decorate: onnxruntime and numpy read the executing CPU's hwcaps, which qemu sets from the model.
GRAVITON2 = "neoverse-n1"                                  # dotprod (Graviton2)
I8MM_CPU = "max,sve-default-vector-length=32"             # i8mm, 256-bit SVE: the nearest to Graviton3 qemu 7.2 has
NO_DOT_CPU = "cortex-a72"                                  # neither (plain NEON)
CPUINFO = {
    GRAVITON2: ("0xd0c", "fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc "
                         "dcpop asimddp ssbs"),
    I8MM_CPU: ("0xd40", "fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm jscvt fcma "
                        "lrcpc dcpop sha3 sm3 sm4 asimddp sha512 sve asimdfhm dit uscat ilrcpc flagm ssbs paca pacg "
                        "dcpodp svei8mm svebf16 i8mm bf16 dgh rng"),
    NO_DOT_CPU: ("0xd08", "fp asimd evtstrm aes pmull sha1 sha2 crc32 cpuid"),
}
CPUINFO_PROCESSORS = 2


def cpuinfo_text(cpu: str) -> str:
    """/proc/cpuinfo as an Arm Linux kernel writes it for `cpu` (a qemu -cpu model of `CPUINFO`)."""
    part, features = CPUINFO[cpu]
    one = ("BogoMIPS\t: 243.75\nFeatures\t: %s\nCPU implementer\t: 0x41\nCPU architecture: 8\n"
           "CPU variant\t: 0x1\nCPU part\t: %s\nCPU revision\t: 1\n\n" % (features, part))
    return "".join("processor\t: %d\n%s" % (n, one) for n in range(CPUINFO_PROCESSORS))


def cpu_root(tree: Path, cpu: str) -> Path:
    """A `-L` prefix for `cpu`: links to `tree`'s top-level entries, and that CPU's /proc/cpuinfo."""
    root = tree.parent / ("cpu-%s" % cpu.replace(",", "_").replace("=", "-"))
    (root / "proc").mkdir(parents=True, exist_ok=True)
    for entry in tree.iterdir():
        link = root / entry.name
        if not link.is_symlink():
            link.symlink_to(entry.resolve())
    (root / "proc" / "cpuinfo").write_text(cpuinfo_text(cpu))
    return root


def emulated_python(cpu: str = GRAVITON2, root: Path = DEFAULT_ROOT, fetch: bool = False) -> list[str] | None:
    """The command that runs the aarch64 CPython as `cpu`; None when qemu or the interpreter is absent (and
    `fetch` is false: else the pinned files are fetched)."""
    tree = root / "root"
    if fetch:
        ensure(root)
    if shutil.which(QEMU) is None or not (tree / INTERPRETER).exists():
        return None
    prefix = cpu_root(tree, cpu)
    return [QEMU, "-cpu", cpu, "-L", str(prefix), str(prefix / INTERPRETER)]


def pins_digest() -> str:
    """One hash of every pin: the unpacked root is current when its stamp holds this."""
    return hashlib.sha256("\n".join("%s %s" % pin for pin in DEBS).encode()).hexdigest()


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch_deb(pool_path: str, sha256: str, cache: Path, mirror: str) -> Path:
    """The .deb at `pool_path`, from the cache when its sha256 matches, else downloaded and checked."""
    target = cache / Path(pool_path).name
    if target.exists() and sha256_of(target) == sha256:
        return target
    partial = target.with_suffix(".partial")
    with urllib.request.urlopen("%s/%s" % (mirror.rstrip("/"), pool_path), timeout=120) as response:
        with partial.open("wb") as handle:
            shutil.copyfileobj(response, handle)
    found = sha256_of(partial)
    if found != sha256:
        partial.unlink()
        raise PackageError("%s has sha256 %s, not the pinned %s: refused" % (pool_path, found, sha256))
    partial.replace(target)
    return target


def ensure(root: Path = DEFAULT_ROOT, mirror: str = MIRROR) -> Path:
    """The interpreter's path under `root`, fetching and unpacking the pinned .debs when `root` is not current."""
    stamp, tree = root / "pins.sha256", root / "root"
    if stamp.exists() and stamp.read_text().strip() == pins_digest() and (tree / INTERPRETER).exists():
        return tree / INTERPRETER
    cache = root / "debs"
    cache.mkdir(parents=True, exist_ok=True)
    if tree.exists():
        shutil.rmtree(tree)
    tree.mkdir()
    for pool_path, sha256 in DEBS:
        deb = fetch_deb(pool_path, sha256, cache, mirror)
        subprocess.run(["dpkg-deb", "-x", str(deb), str(tree)], check=True)
    for merged in ("lib", "bin", "sbin"):  # trixie's merged /usr: base-files would make these links
        (tree / merged).symlink_to("usr/%s" % merged)
    stamp.write_text(pins_digest() + "\n")
    return tree / INTERPRETER


def _arguments(fetch: argparse.ArgumentParser) -> None:
    """`laya-artifacts aarch64-python`'s options."""
    fetch.add_argument("--root", default=str(DEFAULT_ROOT), help="cache and unpack here (default: %(default)s)")
    fetch.add_argument("--mirror", default=MIRROR, help="a Debian mirror holding the pinned files")


def _fetch(args: argparse.Namespace) -> int:
    print(ensure(Path(args.root), args.mirror))
    return 0


COMMAND = Command("aarch64-python", "fetch and unpack the pinned aarch64 CPython that runs the arm64 package under "
                  "qemu (once; pinned by sha256)", _arguments, _fetch, description=__doc__)
