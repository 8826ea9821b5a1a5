"""Build the Lambda runtime-dependency layer and the function asset for the Python 3.12 runtime.

    python layers/build_layer.py [--arch x86_64|arm64] [--out build/lambda] [--python PATH_TO_PYTHON3.12]

- layer:    `<out>/<arch>/layer/python/` — the runtime dependencies of pyproject.toml as hash-locked in
            `layers/requirements.lock` (`python layers/lock.py` writes it), installed from manylinux wheels
            for CPython 3.12 (`pip --require-hashes --no-deps --target --platform ... --only-binary=:all:`,
            every platform tag listed: pip does not widen them itself), trimmed of tests and
            build-time tool folders, with compiled .pyc (the code directory is read-only on Lambda);
- function: `<out>/<arch>/function/` — the runtime package, whole (its `gate` subpackage replays the gate
            torch-free on Lambda's own CPU for the deploy-time gate function); nothing of the build side;
- runtime:  `<out>/<arch>/runtime/` — not deployed: the runtime interface client (`awslambdaric`, pinned
            in pyproject's `lambda-runtime` extra) standing for the managed runtime's `/var/runtime` in
            the tests that run the package as Lambda runs it (tests/cloud/test_lambda_runtime.py).

Fails when layer + function exceed what Lambda accepts unzipped (250 MB) and prints the sizes.
On x86_64 with a Python 3.12 at hand it then imports the real handler module from the build,
with torch and transformers absent.
"""

from __future__ import annotations

import argparse
import glob
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "artifacts"))  # this checkout's laya_artifacts, whatever is installed

from laya_artifacts.runtime_lock import LOCK_FILE, LockError, check_lock, runtime_pins  # noqa: E402

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


def runtime_requirements() -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return list(project["dependencies"])


def interface_client_requirements() -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return list(project["optional-dependencies"]["lambda-runtime"])


def pip_install_for_lambda(site: Path, platforms: list[str], requirements: list[str]) -> None:
    subprocess.run(pip_command(site, platforms, requirements), check=True)


def pip_command(site: Path, platforms: list[str], requirements: list[str]) -> list[str]:
    return [sys.executable, "-m", "pip", "install", "--quiet", "--target", str(site), "--python-version", "3.12",
            "--implementation", "cp", "--only-binary=:all:", *platforms, *requirements]


def locked_requirements(lock: Path = LOCK_FILE, pins: dict[str, str] | None = None) -> list[str]:
    """pip's arguments for the hash-locked install: refused here, before pip, when the lock has an unhashed or
    unpinned line or is stale against pyproject; pip then refuses any file whose sha256 the lock does not list."""
    check_lock(lock.read_text(), runtime_pins() if pins is None else pins)
    return ["--require-hashes", "--no-deps", "-r", str(lock)]


def find_python312(explicit: str | None) -> str | None:
    if explicit:
        return explicit
    found = shutil.which("python3.12")
    pyenv = sorted(glob.glob(str(Path.home() / ".pyenv/versions/3.12*/bin/python3.12")))
    candidates = ([found] if found else []) + pyenv
    for candidate in candidates:
        if subprocess.run([candidate, "-c", "import sys; assert sys.version_info[:2] == (3, 12)"],
                          capture_output=True).returncode == 0:
            return candidate
    return None


def size_of(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def say(message: str) -> None:
    print("[layer] %s" % message, flush=True)


def build(arch: str, out: Path, python312: str | None) -> int:
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
    say("installing %s (%s) for CPython 3.12 %s into %s" % (", ".join(runtime_requirements()), LOCK_FILE.name,
                                                           arch, site))
    pip_install_for_lambda(site, platforms, locked)
    pip_install_for_lambda(target / "runtime", platforms, interface_client_requirements())
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
        say("warning: no Python 3.12 found (pass --python); the layer ships without .pyc, so imports are slower")
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
    if arch == "x86_64" and python312:
        probe = ("import sys, json, laya_serverless.lambda_edge.api_handler, laya_serverless.lambda_edge.jobs_handler, "
                 "laya_serverless.gate.regate, "
                 "onnxruntime, tokenizers; "
                 "t = tokenizers.Tokenizer.from_str(json.dumps({'version': '1.0', 'model': {'type': 'WordLevel', "
                 "'vocab': {'[UNK]': 0, 'hi': 1}, 'unk_token': '[UNK]'}, 'pre_tokenizer': {'type': 'Whitespace'}})); "
                 "assert t.encode('hi there').ids == [1, 0]; "
                 "assert 'CPUExecutionProvider' in onnxruntime.get_available_providers(); "
                 "assert not {'torch', 'transformers', 'huggingface_hub'} & set(sys.modules); print('imports ok')")
        done = subprocess.run([python312, "-I", "-c", "import sys; sys.path[:0] = sys.argv[1:3]; exec(sys.argv[3])",
                               str(site), str(function), probe], capture_output=True, text=True)
        if done.returncode != 0:
            say("error: the handler does not import from the build:\n%s" % done.stderr[-2000:])
            return 1
        say("the handler imports from the build with Python 3.12: %s" % done.stdout.strip())
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arch", choices=sorted(PLATFORMS), default="x86_64")
    parser.add_argument("--out", default=str(ROOT / "build" / "lambda"))
    parser.add_argument("--python", help="a Python 3.12 interpreter, to compile .pyc for the Lambda runtime")
    args = parser.parse_args()
    return build(args.arch, Path(args.out), find_python312(args.python))


if __name__ == "__main__":
    raise SystemExit(main())
