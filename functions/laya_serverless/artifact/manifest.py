"""An artifact's manifest: what it is (its configuration), how it was proven, and a hash for every file.

The manifest is written last, only after the parity gate passed, and an artifact is addressed by
the sha256 of its manifest bytes, so one hash pins every file. The runtime checks all of it
before any byte of the graph or the tokenizer is parsed.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ArtifactError
from .layout import MANIFEST_FILE, SIGNATURES_DIR

SCHEMA = "laya-serverless/artifact/v1"
_CHUNK = 1 << 20


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Manifest:
    raw: dict[str, Any]

    @property
    def files(self) -> dict[str, dict[str, Any]]:
        files: dict[str, dict[str, Any]] = self.raw["files"]
        return files

    @property
    def checkpoint(self) -> dict[str, Any]:
        checkpoint: dict[str, Any] = self.raw["configuration"]["checkpoint"]
        return checkpoint

    @property
    def target(self) -> str:
        return str(self.raw["configuration"]["target"])

    @property
    def revision(self) -> str | None:
        return self.checkpoint.get("revision")

    @classmethod
    def parse(cls, data: bytes, where: str) -> Manifest:
        try:
            raw = json.loads(data)
        except ValueError as exc:
            raise ArtifactError("%s is not valid JSON: %s" % (where, exc)) from exc
        if not isinstance(raw, dict) or raw.get("schema") != SCHEMA:
            raise ArtifactError("%s is not a %s manifest" % (where, SCHEMA))
        files = raw.get("files")
        if not isinstance(files, dict) or not files or not all(
                isinstance(v, dict) and isinstance(v.get("sha256"), str) and isinstance(v.get("bytes"), int)
                for v in files.values()):
            raise ArtifactError("%s lists no files, or a file without its sha256 and size" % where)
        for name in files:
            if name == MANIFEST_FILE or Path(name).is_absolute() or ".." in Path(name).parts \
                    or Path(name).parts[:1] == (SIGNATURES_DIR,):
                raise ArtifactError("%s names a file outside the artifact: %r" % (where, name))
        if not isinstance(raw.get("configuration"), dict) or "target" not in raw["configuration"]:
            raise ArtifactError("%s has no configuration" % where)
        return cls(raw)

    @classmethod
    def load(cls, artifact_dir: Path) -> Manifest:
        path = Path(artifact_dir) / MANIFEST_FILE
        if not path.is_file():
            raise ArtifactError("%s is missing from the artifact %s" % (MANIFEST_FILE, artifact_dir))
        return cls.parse(path.read_bytes(), str(path))


def verify_file(path: Path, name: str, expected: dict[str, Any], sha256: str | None = None) -> None:
    """Refuse a missing, truncated or altered file, naming it. `sha256`, when the caller hashed the
    bytes as it wrote them (a download), saves reading the file a second time."""
    if not path.is_file():
        raise ArtifactError("artifact file %r is missing" % name)
    size = path.stat().st_size
    if size != expected["bytes"]:
        raise ArtifactError("artifact file %r has %d bytes, the manifest says %d" % (name, size, expected["bytes"]))
    actual = sha256 or sha256_file(path)
    if actual != expected["sha256"]:
        raise ArtifactError("artifact file %r has sha256 %s, the manifest says %s" % (name, actual, expected["sha256"]))


def verify_artifact(artifact_dir: Path, expected_id: str | None = None) -> Manifest:
    """Check the manifest (against `expected_id`, the sha256 of its bytes, when given) and every file it lists.

    Files in the directory that the manifest does not list are refused too: nothing unproven
    may sit next to a proven graph. Signatures (`signatures/`) vouch for the manifest and are not listed by it.
    """
    artifact_dir = Path(artifact_dir)
    path = artifact_dir / MANIFEST_FILE
    if not path.is_file():
        raise ArtifactError("%s is missing from the artifact %s" % (MANIFEST_FILE, artifact_dir))
    data = path.read_bytes()
    if expected_id is not None and sha256_bytes(data) != expected_id:
        raise ArtifactError("%s does not hash to the artifact id %s: it was edited or swapped"
                            % (MANIFEST_FILE, expected_id))
    manifest = Manifest.parse(data, str(path))
    for name, expected in manifest.files.items():
        verify_file(artifact_dir / name, name, expected)
    present = {p.relative_to(artifact_dir).as_posix() for p in artifact_dir.rglob("*")
               if p.is_file() and p.relative_to(artifact_dir).parts[:1] != (SIGNATURES_DIR,)}
    unlisted = sorted(present - set(manifest.files) - {MANIFEST_FILE})
    if unlisted:
        raise ArtifactError("artifact %s holds files its manifest does not list: %s"
                            % (artifact_dir, ", ".join(unlisted)))
    return manifest
