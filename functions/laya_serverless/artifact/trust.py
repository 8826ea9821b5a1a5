"""Which artifact a process serves for (checkpoint, target), and whether it may trust its manifest.

The artifact is the one the deployment pins (`LAYA_ARTIFACT_PINS`: a function version serves exactly the
artifacts it was deployed with, so a new artifact is a new version that a canary can shift traffic to), else
the one the store's pointer names. With signing keys configured (`LAYA_ARTIFACT_KEYS`) it must carry a valid
signature by one of them before its manifest is read; keys are loaded once per process (a KMS key's public
half with one kms:GetPublicKey at INIT), and every check after that is offline.

A signature vouches for an id; what binds it to the name served is the manifest that id hashes: its checkpoint
and target must be the ones asked for, and its gate verdict a pass, on every path (pointer, pin, library). With
keys, a pointer's artifact must also be the one the latest signed release record names (`releases`).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from ..errors import ArtifactError
from .fetch import published_id, read_manifest
from .manifest import Manifest
from .releases import check_latest
from .signature import TrustedKey, trusted_keys, verify_signed
from .store import ObjectStore

_kms_client: Any = None  # a seam for tests and tools; None: boto3's default client in the key's region


def use_kms_client(client: Any) -> None:
    """Fetch KMS public keys through `client` from now on (forgetting keys fetched before)."""
    global _kms_client
    _kms_client = client
    _keys.cache_clear()


@lru_cache(maxsize=8)
def _keys(refs: tuple[str, ...]) -> dict[str, TrustedKey]:
    return trusted_keys(refs, _kms_client)


def load_keys(refs: tuple[str, ...]) -> dict[str, TrustedKey]:
    """The trusted keys of `refs`, loaded once per process (the edge calls this at start, so a bad key refuses
    the start instead of every load)."""
    return _keys(tuple(refs))


def pin_key(checkpoint: str, target: str) -> str:
    return "%s/%s" % (checkpoint, target)


def check_binding(manifest: Manifest, artifact_id: str, checkpoint: str, target: str) -> None:
    """Refuse an artifact that is not (checkpoint, target), or whose gate did not pass, whatever vouches for it."""
    checkpoint_block = manifest.raw["configuration"].get("checkpoint")
    named = (checkpoint_block.get("name") if isinstance(checkpoint_block, dict) else None, manifest.target)
    if named != (checkpoint, target):
        raise ArtifactError("artifact %s is %s/%s, not the %s/%s it is served as" % (
            artifact_id[:12], named[0], named[1], checkpoint, target))
    parity = manifest.raw.get("parity")
    if not isinstance(parity, dict) or parity.get("passed") is not True:
        raise ArtifactError("artifact %s of %s/%s records no passing parity gate; only a gated artifact is served"
                            % (artifact_id[:12], checkpoint, target))


def trusted_artifact(store: ObjectStore, checkpoint: str, target: str, keys: tuple[str, ...] = (),
                     pins: dict[str, str] | None = None) -> tuple[str, tuple[bytes, Manifest]]:
    """(artifact id, (manifest bytes, manifest)) for (checkpoint, target): pinned or published, signed when
    `keys` are configured (and, following the pointer, the latest signed release), its manifest checked against
    its id and bound to (checkpoint, target) with a passing gate."""
    pinned = (pins or {}).get(pin_key(checkpoint, target))
    artifact_id = pinned or published_id(store, checkpoint, target)
    if keys:
        trusted = _keys(keys)
        verify_signed(store, artifact_id, trusted)
        if not pinned:  # a pin is the deployment's own word; a pointer is only the store's
            check_latest(store, checkpoint, target, artifact_id, trusted)
    manifest = read_manifest(store, artifact_id)
    check_binding(manifest[1], artifact_id, checkpoint, target)
    return artifact_id, manifest


__all__ = ["check_binding", "load_keys", "pin_key", "trusted_artifact", "use_kms_client"]
