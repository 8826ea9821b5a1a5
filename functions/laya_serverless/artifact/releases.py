"""Release records: which artifact is the latest of (checkpoint, target), signed, so that an older artifact is
never served as the latest unless a signed rollback says so.

Every publish, rollback and roll-forward made with a signing key writes one create-only record per key:

    releases/<checkpoint>/<target>/<serial>/<key id>.json

The record signs "(checkpoint, target) is artifact A as of serial N, by action X"; a new record's serial is one
above the highest before it. With keys configured (`LAYA_ARTIFACT_KEYS`), a process that follows the pointer
serves its artifact only when the highest serial that holds a record by a trusted key names that same artifact.
Store write access without a key cannot write a higher record; a present record that does not verify refuses
(tampering); a pointer moved back by hand is refused (docs/operations.md#what-a-signature-binds).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import ArtifactError
from .signature import ALGORITHM, TrustedKey
from .store import ObjectStore, pointer_key

SCHEMA = "laya-serverless/release/v1"
ACTIONS = ("publish", "rollback", "roll-forward")
_STATEMENT = "laya-serverless release %s/%s serial %d artifact %s action %s\n"
_SERIAL = re.compile(r"^(\d{10})/([0-9a-f]{64})\.json$")


def release_prefix(checkpoint: str, target: str) -> str:
    """The folder of (checkpoint, target)'s records: the pointer's own path, so hub ids stay one segment."""
    return "releases/%s/" % pointer_key(checkpoint, target).removeprefix("pointers/").removesuffix(".json")


def release_key(checkpoint: str, target: str, serial: int, key: str) -> str:
    return "%s%010d/%s.json" % (release_prefix(checkpoint, target), serial, key)


def release_message(checkpoint: str, target: str, serial: int, artifact_id: str, action: str) -> bytes:
    """The bytes a release signature covers."""
    return (_STATEMENT % (checkpoint, target, serial, artifact_id, action)).encode("utf-8")


@dataclass(frozen=True)
class Release:
    checkpoint: str
    target: str
    serial: int
    artifact: str
    action: str
    created: str
    key: str

    def message(self) -> bytes:
        return release_message(self.checkpoint, self.target, self.serial, self.artifact, self.action)

    def record(self, signature: bytes, signer: str) -> bytes:
        return json.dumps({"schema": SCHEMA, "checkpoint": self.checkpoint, "target": self.target,
                           "serial": self.serial, "artifact": self.artifact, "action": self.action,
                           "created": self.created, "key": self.key, "algorithm": ALGORITHM, "signer": signer,
                           "signature": base64.b64encode(signature).decode("ascii")},
                          sort_keys=True, indent=1).encode() + b"\n"


def serials(store: ObjectStore, checkpoint: str, target: str) -> dict[int, list[str]]:
    """serial -> the key ids that hold a record at it (one LIST of the folder)."""
    prefix = release_prefix(checkpoint, target)
    found: dict[int, list[str]] = {}
    for key in store.list(prefix):
        match = _SERIAL.match(key[len(prefix):])
        if match:
            found.setdefault(int(match.group(1)), []).append(match.group(2))
    return found


def parse_release(data: bytes, checkpoint: str, target: str, serial: int, key: str) -> tuple[Release, bytes]:
    """(the release, its signature) from a record read at `release_key(checkpoint, target, serial, key)`."""
    where = "release record %d of %s/%s by key %s" % (serial, checkpoint, target, key[:12])
    try:
        raw = json.loads(data)
        release = Release(raw["checkpoint"], raw["target"], raw["serial"], raw["artifact"], raw["action"],
                          str(raw.get("created", "")), raw["key"])
        signature = base64.b64decode(raw["signature"], validate=True)
        schema = raw["schema"]
    except (ValueError, KeyError, TypeError, binascii.Error) as exc:
        raise ArtifactError("%s is malformed" % where) from exc
    if (schema, release.checkpoint, release.target, release.serial, release.key) != (
            SCHEMA, checkpoint, target, serial, key) or release.action not in ACTIONS:
        raise ArtifactError("%s names something else than where it is stored" % where)
    return release, signature


def verify_release(data: bytes, checkpoint: str, target: str, serial: int, trusted: TrustedKey) -> Release:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec

    release, signature = parse_release(data, checkpoint, target, serial, trusted.key_id)
    try:
        trusted.public_key.verify(signature, release.message(), ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        raise ArtifactError("release record %d of %s/%s by key %s does not verify: it was forged or altered"
                            % (serial, checkpoint, target, trusted.key_id[:12])) from None
    return release


def latest_release(store: ObjectStore, checkpoint: str, target: str,
                   keys: Mapping[str, TrustedKey]) -> Release | None:
    """The highest-serial release by a trusted key (None: no record by one); a present record that fails to verify
    refuses, as a bad artifact signature does."""
    for serial, holders in sorted(serials(store, checkpoint, target).items(), reverse=True):
        for kid in holders:
            if kid in keys:
                found = store.read(release_key(checkpoint, target, serial, kid))
                if found is not None:
                    return verify_release(found[0], checkpoint, target, serial, keys[kid])
    return None


def check_latest(store: ObjectStore, checkpoint: str, target: str, artifact_id: str,
                 keys: Mapping[str, TrustedKey]) -> Release:
    """Refuse a pointer whose artifact is not the one the latest signed release names."""
    latest = latest_release(store, checkpoint, target, keys)
    if latest is None:
        raise ArtifactError("no release record of %s/%s is signed by a trusted key, so artifact %s cannot be proven "
                            "the latest; publish it with a signing key (or `laya-artifacts rollback --to`)"
                            % (checkpoint, target, artifact_id[:12]))
    if latest.artifact != artifact_id:
        raise ArtifactError("the pointer of %s/%s names artifact %s, but the latest signed release (serial %d, %s) "
                            "is %s: an older or other artifact served as the latest is refused unless a signed "
                            "rollback says so (`laya-artifacts rollback`)"
                            % (checkpoint, target, artifact_id[:12], latest.serial, latest.action,
                               latest.artifact[:12]))
    return latest


__all__ = ["ACTIONS", "SCHEMA", "Release", "check_latest", "latest_release", "parse_release", "release_key",
           "release_message", "release_prefix", "serials", "verify_release"]
