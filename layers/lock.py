"""Compile the Lambda layer's hash lock, `layers/requirements.lock`, from pyproject's runtime dependencies.

    pip install -e '.[lock]'     # uv, pinned
    python layers/lock.py        # needs the package index; rewrites layers/requirements.lock

For CPython 3.12 (the stack's runtime) on each Lambda architecture, `uv pip compile --generate-hashes`
pins every runtime package, transitive ones included, with the sha256 of each of its files. The two
architectures must resolve to the same versions (they do today: one lock covers both); the script refuses
to write a lock when they do not. `layers/build_layer.py` installs the lock with `pip --require-hashes`.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "artifacts"))  # this checkout's laya_artifacts, whatever is installed

from laya_artifacts.package.runtime_lock import LOCK_FILE, check_lock, runtime_pins  # noqa: E402

PYTHON_VERSION = "3.12"
UV_PLATFORMS = {"x86_64": "x86_64-manylinux_2_28", "arm64": "aarch64-manylinux_2_28"}
HEADER = ("# The Lambda layer's runtime packages, each pinned with the sha256 of its files.\n"
          "# Written by `python layers/lock.py` (uv pip compile --generate-hashes, CPython %s, %s); do not edit.\n"
          % (PYTHON_VERSION, " and ".join(sorted(UV_PLATFORMS))))


def compile_for(platform: str, out: Path) -> str:
    subprocess.run([sys.executable, "-m", "uv", "pip", "compile", str(ROOT / "pyproject.toml"), "--quiet",
                    "--python-version", PYTHON_VERSION, "--python-platform", platform, "--generate-hashes",
                    "--no-header", "--no-annotate", "-o", str(out)], check=True)
    return out.read_text()


def main() -> int:
    with tempfile.TemporaryDirectory() as scratch:
        locks = {arch: compile_for(platform, Path(scratch) / arch) for arch, platform in UV_PLATFORMS.items()}
    if len(set(locks.values())) != 1:
        print("[lock] the architectures resolve differently; one lock cannot cover both", file=sys.stderr)
        return 1
    text = HEADER + next(iter(locks.values()))
    locked = check_lock(text, runtime_pins())
    LOCK_FILE.write_text(text)
    print("[lock] %s: %d packages, %d hashes" % (LOCK_FILE.relative_to(ROOT), len(locked),
                                                 sum(len(h) for _, _, h in locked)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
