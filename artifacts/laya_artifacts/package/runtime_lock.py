"""The Lambda layer's hash lock: every runtime package pinned to one version and its files' sha256.

`layers/requirements.lock` is compiled from pyproject's runtime dependencies by `python layers/lock.py`
(`uv pip compile --generate-hashes` for CPython 3.12 on both Lambda architectures, which resolve alike),
installed by `laya-artifacts package` (`package/lambda_package.py`) with `pip --require-hashes`, and named by its sha256
in every manifest the build writes (`runtime_record`), so a gate record says which packages it held under.
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from pathlib import Path
from typing import Any

from laya_artifacts.errors import LockError

ROOT = Path(__file__).resolve().parents[3]
LOCK_FILE = ROOT / "layers" / "requirements.lock"
LOCK_NAME = "layers/requirements.lock"
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9.+!_-]+)$")
_HASH = re.compile(r"^--hash=sha256:[0-9a-f]{64}$")


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements(text: str) -> list[tuple[str, str, list[str]]]:
    """(name, version, hashes) of each requirement; continuation lines joined, comments dropped."""
    joined = re.sub(r"\\[ \t]*\n", " ", text)
    found = []
    for line in joined.splitlines():
        words = line.split("#", 1)[0].split()  # a hash never holds '#'
        if words:
            hashes = [w for w in words[1:] if w.startswith("--hash")]
            found.append((words[0], " ".join(w for w in words[1:] if not w.startswith("--hash")), hashes))
    checked = []
    for requirement, other, hashes in found:
        pin = _PIN.match(requirement)
        if pin is None:
            raise LockError("%s: %r is not pinned to one version (name==version)" % (LOCK_NAME, requirement))
        if other:
            raise LockError("%s: %s carries options other than --hash: %s" % (LOCK_NAME, requirement, other))
        if not hashes:
            raise LockError("%s: %s has no --hash: every file pip may install must be hashed (python layers/lock.py "
                            "writes them)" % (LOCK_NAME, requirement))
        bad = [h for h in hashes if not _HASH.match(h)]
        if bad:
            raise LockError("%s: %s has a malformed hash %s (expected --hash=sha256:<64 hex>)"
                            % (LOCK_NAME, requirement, bad[0]))
        checked.append((normalized(pin.group(1)), pin.group(2), [h.partition(":")[2] for h in hashes]))
    if not checked:
        raise LockError("%s lists no requirement" % LOCK_NAME)
    return checked


def runtime_pins(pyproject: Path = ROOT / "pyproject.toml") -> dict[str, str]:
    """pyproject's runtime dependencies as {name: version}; a range is refused (the lock could not be exact)."""
    pins = {}
    for dependency in tomllib.loads(pyproject.read_text())["project"]["dependencies"]:
        requirement = dependency.split(";")[0].strip()
        name = re.split(r"[\[=<>!~ ]", requirement, maxsplit=1)[0]
        match = re.search(r"==([A-Za-z0-9.+!_-]+)$", requirement)
        if match is None or any(op in requirement for op in ("<", ">", "!=", "~=", ",")):
            raise LockError("pyproject.toml: the runtime dependency %r is not pinned with ==; the layer's lock "
                            "must be exact" % dependency)
        pins[normalized(name)] = match.group(1)
    return pins


def check_lock(text: str, pins: dict[str, str]) -> list[tuple[str, str, list[str]]]:
    """The lock's requirements, refused when one is unhashed or unpinned, or when it disagrees with `pins`
    (pyproject changed since the lock was compiled)."""
    locked = requirements(text)
    versions = {name: version for name, version, _ in locked}
    stale = ["%s==%s (lock: %s)" % (name, version, versions.get(name, "absent"))
             for name, version in sorted(pins.items()) if versions.get(name) != version]
    if stale:
        raise LockError("%s is stale against pyproject.toml: %s; run `python layers/lock.py`"
                        % (LOCK_NAME, ", ".join(stale)))
    return locked


def lock_sha256(path: Path = LOCK_FILE) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def runtime_record(path: Path = LOCK_FILE) -> dict[str, Any]:
    """What a manifest says of the runtime the layer installs: the lock's name and sha256."""
    if not path.is_file():
        return {"lock": LOCK_NAME, "sha256": None,
                "note": "not found: laya_artifacts was installed without the repository's layers/"}
    return {"lock": LOCK_NAME, "sha256": lock_sha256(path)}


__all__ = ["LOCK_FILE", "LOCK_NAME", "LockError", "check_lock", "lock_sha256", "requirements", "runtime_pins",
           "runtime_record"]
