"""Which artifact a process serves for (checkpoint, target), and whether it may trust its manifest.

The artifact is the one the deployment pins (`LAYA_ARTIFACT_PINS`: a function version serves exactly the
artifacts it was deployed with, so a new artifact is a new version that a canary can shift traffic to), else
the one the store's pointer names. With signing keys configured (`LAYA_ARTIFACT_KEYS`) it must carry a valid
signature by one of them before its manifest is read; keys are loaded once per process (a KMS key's public
half with one kms:GetPublicKey at INIT), and every check after that is offline.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from .fetch import published_id, read_manifest
from .manifest import Manifest
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


def pin_key(checkpoint: str, target: str) -> str:
    return "%s/%s" % (checkpoint, target)


def trusted_artifact(store: ObjectStore, checkpoint: str, target: str, keys: tuple[str, ...] = (),
                     pins: dict[str, str] | None = None) -> tuple[str, tuple[bytes, Manifest]]:
    """(artifact id, (manifest bytes, manifest)) for (checkpoint, target): pinned or published, signed when
    `keys` are configured, its manifest checked against its id."""
    artifact_id = (pins or {}).get(pin_key(checkpoint, target)) or published_id(store, checkpoint, target)
    if keys:
        verify_signed(store, artifact_id, _keys(keys))
    return artifact_id, read_manifest(store, artifact_id)


__all__ = ["pin_key", "trusted_artifact", "use_kms_client"]
