"""Build the Lambda runtime-dependency layer and the function asset for the arch's Python runtime.

    laya-artifacts package [--arch x86_64|arm64] [--out build/lambda] [--python PATH_TO_PYTHON3.X]

The runtime is python3.12 on x86_64 and python3.13 on arm64 (`PYTHON_VERSIONS`): the arm64 package is run
before deploy by an aarch64 CPython under emulation, and the only one packaged where this project installs
from is Debian 13's 3.13 (`package/aarch64_python.py`; docs/deploy.md, "arm64").

- layer:    `<out>/<arch>/layer/python/` — the runtime dependencies of pyproject.toml as hash-locked in
            `layers/requirements.lock` (`python layers/lock.py` writes it), installed from manylinux wheels
            for the arch's CPython (`pip --require-hashes --no-deps --target --platform ... --only-binary=:all:`,
            every platform tag listed: pip does not widen them itself), trimmed of tests and
            build-time tool folders, with compiled .pyc (the code directory is read-only on Lambda);
- function: `<out>/<arch>/function/` — the runtime package, whole (its `gate` subpackage replays the gate
            torch-free on Lambda's own CPU for the deploy-time gate function); nothing of the build side;
- runtime:  `<out>/<arch>/runtime/` — not deployed: the runtime interface client (`awslambdaric`, pinned
            in pyproject's `lambda-runtime` extra) standing for the managed runtime's `/var/runtime` in
            the tests that run the package as Lambda runs it (tests/cloud/test_lambda_runtime.py).

A package built from the same inputs (`inputs_digest`: the lock, pyproject, this recipe, the runtime package,
the Python) is reused, so `make synth` after a `-c` change does not rebuild it; `--rebuild` forces a build.
Fails when layer + function exceed what Lambda accepts unzipped (250 MB) and prints the sizes.
Then it imports the real handler module from the build, with torch and transformers absent: on x86_64 with
a Python 3.12 at hand; on arm64 with the aarch64 CPython of `package/aarch64_python.py` (once fetched) under
`qemu-aarch64-static -cpu neoverse-n1` (Graviton2).
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from laya_artifacts.package.runtime_lock import LOCK_FILE, ROOT, LockError, check_lock, runtime_pins
from laya_serverless.command import Command

DEFAULT_ASSET_DIR = ROOT / "build" / "lambda"  # <arch>/{layer,function,runtime}
LAMBDA_UNZIPPED_LIMIT = 250 * 1024 * 1024
PLATFORMS = {
    "x86_64": ["manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64"],
    "arm64": ["manylinux_2_28_aarch64", "manylinux_2_17_aarch64", "manylinux2014_aarch64"],
}
# Build-time parts of runtime packages that the runtime never imports.
# huggingface_hub and hf_xet come with tokenizers for `from_pretrained` downloads; the runtime reads
# tokenizer.json from the verified artifact instead.
TRIM = ["onnxruntime/tools", "onnxruntime/transformers", "onnxruntime/quantization", "onnxruntime/datasets",
        "bin", "numpy/_pyinstaller", "numpy/f2py", "numpy/typing/tests", "huggingface_hub", "hf_xet"]
TEST_DIRS = ("tests", "test", "testing")
# The Lambda runtime each architecture's package is built for (infra/laya_infra/constants.py declares the same).
PYTHON_VERSIONS = {"x86_64": "3.12", "arm64": "3.13"}


def runtime_requirements() -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return list(project["dependencies"])


def interface_client_requirements() -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return list(project["optional-dependencies"]["lambda-runtime"])


def pip_install_for_lambda(site: Path, platforms: list[str], requirements: list[str],
                           python_version: str = "3.12") -> None:
    subprocess.run(pip_command(site, platforms, requirements, python_version), check=True)


def pip_command(site: Path, platforms: list[str], requirements: list[str], python_version: str = "3.12") -> list[str]:
    return [sys.executable, "-m", "pip", "install", "--quiet", "--target", str(site), "--python-version",
            python_version, "--implementation", "cp", "--only-binary=:all:", *platforms, *requirements]


def locked_requirements(lock: Path = LOCK_FILE, pins: dict[str, str] | None = None) -> list[str]:
    """pip's arguments for the hash-locked install: refused here, before pip, when the lock has an unhashed or
    unpinned line or is stale against pyproject; pip then refuses any file whose sha256 the lock does not list."""
    check_lock(lock.read_text(), runtime_pins() if pins is None else pins)
    return ["--require-hashes", "--no-deps", "-r", str(lock)]


def find_python(explicit: str | None, version: str = "3.12") -> str | None:
    """A host CPython of `version` (it compiles the .pyc: bytecode is the same on every architecture)."""
    if explicit:
        return explicit
    found = shutil.which("python%s" % version)
    pyenv = sorted(glob.glob(str(Path.home() / (".pyenv/versions/%s*/bin/python%s" % (version, version)))))
    candidates = ([found] if found else []) + pyenv
    for candidate in candidates:
        check = "import sys; assert '%%d.%%d' %% sys.version_info[:2] == %r" % version
        if subprocess.run([candidate, "-c", check], capture_output=True).returncode == 0:
            return candidate
    return None


def import_runner(arch: str, compiler: str | None) -> tuple[list[str], str] | None:
    """The command that runs the built package's Python for the import probe, and what it is; None when absent.
    x86_64: the host's CPython 3.12; arm64: the pinned aarch64 CPython 3.13 under an emulated Graviton2."""
    if arch == "x86_64":
        return ([compiler], "Python 3.12") if compiler else None
    from laya_artifacts.package.aarch64_python import GRAVITON2, QEMU, emulated_python

    command = emulated_python(GRAVITON2)
    return (command, "aarch64 CPython 3.13 under %s -cpu %s" % (QEMU, GRAVITON2)) if command else None


def size_of(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def say(message: str) -> None:
    print("[layer] %s" % message, flush=True)


def build(arch: str, out: Path, python312: str | None) -> int:
    """`python312`: the host CPython that compiles the .pyc, of the arch's version (`PYTHON_VERSIONS`)."""
    version = PYTHON_VERSIONS[arch]
    target = out / arch
    if target.exists():
        shutil.rmtree(target)
    site = target / "layer" / "python"
    platforms = [arg for tag in PLATFORMS[arch] for arg in ("--platform", tag)]
    try:
        locked = locked_requirements()
    except LockError as exc:
        say("error: %s" % exc)
        return 1
    say("installing %s (%s) for CPython %s %s into %s" % (", ".join(runtime_requirements()), LOCK_FILE.name,
                                                         version, arch, site))
    pip_install_for_lambda(site, platforms, locked, version)
    pip_install_for_lambda(target / "runtime", platforms, interface_client_requirements(), version)
    for relative in TRIM:
        shutil.rmtree(site / relative, ignore_errors=True)
    for path in sorted(site.rglob("*"), reverse=True):
        if path.is_dir() and (path.name in TEST_DIRS or path.name == "__pycache__"):
            shutil.rmtree(path, ignore_errors=True)
    function = target / "function"
    shutil.copytree(ROOT / "functions" / "laya_serverless", function / "laya_serverless",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    if python312:
        say("compiling .pyc with %s" % python312)
        for tree in (site, function):
            subprocess.run([python312, "-m", "compileall", "-q", "-j", "0", "--invalidation-mode", "unchecked-hash",
                            str(tree)], check=True)
    else:
        say("warning: no Python %s found (pass --python); the layer ships without .pyc, so imports are slower"
            % version)
    layer_mb, function_mb = size_of(target / "layer") / 2**20, size_of(function) / 2**20
    total = size_of(target / "layer") + size_of(function)
    say("unzipped sizes: layer %.1f MB, function %.2f MB, total %.1f MB of %d MB allowed"
        % (layer_mb, function_mb, total / 2**20, LAMBDA_UNZIPPED_LIMIT // 2**20))
    heavy = [name for name in ("torch", "transformers", "optimum", "laya") if (site / name).exists()]
    if heavy:
        say("error: build-side packages in the layer: %s" % ", ".join(heavy))
        return 1
    if total > LAMBDA_UNZIPPED_LIMIT:
        say("error: over Lambda's unzipped limit by %.1f MB" % ((total - LAMBDA_UNZIPPED_LIMIT) / 2**20))
        return 1
    runner = import_runner(arch, python312)
    if runner is None:
        say("not imported: no %s here (arm64: `laya-artifacts aarch64-python`, qemu-user-static)"
            % ("Python 3.12" if arch == "x86_64" else "aarch64 CPython"))
    else:
        command, which = runner
        probe = ("import sys, json, platform, laya_serverless.lambda_edge.api_handler, "
                 "laya_serverless.lambda_edge.jobs_handler, laya_serverless.gate.regate, onnxruntime, tokenizers; "
                 "t = tokenizers.Tokenizer.from_str(json.dumps({'version': '1.0', 'model': {'type': 'WordLevel', "
                 "'vocab': {'[UNK]': 0, 'hi': 1}, 'unk_token': '[UNK]'}, 'pre_tokenizer': {'type': 'Whitespace'}})); "
                 "assert t.encode('hi there').ids == [1, 0]; "
                 "assert 'CPUExecutionProvider' in onnxruntime.get_available_providers(); "
                 "assert not {'torch', 'transformers', 'huggingface_hub'} & set(sys.modules); "
                 "print('imports ok on CPython %s %s' % (platform.python_version(), platform.machine()))")
        done = subprocess.run([*command, "-I", "-c", "import sys; sys.path[:0] = sys.argv[1:3]; exec(sys.argv[3])",
                               str(site), str(function), probe], capture_output=True, text=True)
        if done.returncode != 0:
            say("error: the handler does not import from the build:\n%s" % done.stderr[-2000:])
            return 1
        say("the handler imports from the build with %s: %s" % (which, done.stdout.strip()))
    return 0


STAMP_FILE = ".inputs-sha256"   # in <out>/<arch>/, written after a build that passed every check


def inputs_digest(arch: str, python: str | None, root: Path = ROOT) -> str:
    """What a package is built from: the arch, the compiling Python, the hash lock, pyproject.toml (the lambda-runtime
    pin), this recipe and every file of the runtime package. A `-c` flag of `make synth` is none of them."""
    digest = hashlib.sha256(("%s\0%s\0" % (arch, python or "")).encode())
    runtime = sorted(p for p in (root / "functions" / "laya_serverless").rglob("*")
                     if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc")
    for path in [LOCK_FILE, root / "pyproject.toml", Path(__file__), *runtime]:
        digest.update(str(path.relative_to(root) if path.is_relative_to(root) else path.name).encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def build_once(arch: str, out: Path, python: str | None, rebuild: bool = False) -> int:
    """`build`, unless `out/arch` holds a package built from the same inputs (`inputs_digest`): then it is reused."""
    stamp, digest = out / arch / STAMP_FILE, inputs_digest(arch, python)
    if not rebuild and stamp.is_file() and stamp.read_text().strip() == digest:
        say("reusing %s: built from the same inputs (sha256 %s of the lock, pyproject, the recipe and the runtime "
            "package); --rebuild builds again" % (out / arch, digest[:12]))
        return 0
    code = build(arch, out, python)
    if code == 0:
        stamp.write_text(digest + "\n")
    return code


def _arguments(package: argparse.ArgumentParser) -> None:
    """`laya-artifacts package`'s options."""
    package.add_argument("--arch", choices=sorted(PLATFORMS), default="x86_64")
    package.add_argument("--out", default=str(DEFAULT_ASSET_DIR))
    package.add_argument("--python", help="a host Python of the arch's runtime version (3.12 for x86_64, 3.13 for "
                         "arm64), to compile .pyc for the Lambda runtime")
    package.add_argument("--rebuild", action="store_true", help="build even when the inputs are unchanged")


def _run(args: argparse.Namespace) -> int:
    """`laya-artifacts package`: the Lambda layer and function asset, built and checked."""
    return build_once(args.arch, Path(args.out), find_python(args.python, PYTHON_VERSIONS[args.arch]), args.rebuild)


COMMAND = Command("package", "build the Lambda layer and function asset for an architecture, size-check them and "
                  "import the handler from them", _arguments, _run, description=__doc__)
