"""Artifact signatures: who vouches for an artifact, checked offline against trusted public keys.

The build signs a short statement naming the artifact id (the sha256 of manifest.json, which pins every
file), with ECDSA P-256 / SHA-256: an AWS KMS key (`ECC_NIST_P256`, `ECDSA_SHA_256`) or a local key file.
A signature is its own immutable object beside the artifact, one per key:

    artifacts/<artifact id>/signatures/<key id>.json     (in a built artifact directory: signatures/<key id>.json)

A key's id is the sha256 of its public key (DER SubjectPublicKeyInfo), so the runtime reads exactly the
signature of each key it trusts and never lists. With keys configured (`LAYA_ARTIFACT_KEYS`), an artifact
without a valid signature by one of them is refused before its manifest is trusted. Rotation: trust the old
and the new key, sign with the new one (re-sign what is published), then drop the old one (docs/artifacts.md).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ArtifactError
from .layout import SIGNATURES_DIR
from .store import ObjectStore, artifact_key

SCHEMA = "laya-serverless/signature/v1"
ALGORITHM = "ECDSA_SHA_256"  # KMS's name for ECDSA over SHA-256; the key is NIST P-256
KEY_SPEC = "ECC_NIST_P256"
_STATEMENT = b"laya-serverless artifact %s\n"  # what is signed: never a bare hash another protocol might sign


def signed_message(artifact_id: str) -> bytes:
    """The bytes a signature covers for `artifact_id` (KMS signs them as a RAW message)."""
    return _STATEMENT % artifact_id.encode("ascii")


def key_id(public_key_der: bytes) -> str:
    """A key's id: the sha256 of its DER SubjectPublicKeyInfo (what KMS GetPublicKey returns)."""
    return hashlib.sha256(public_key_der).hexdigest()


def signature_name(key: str) -> str:
    """The signature's path inside an artifact (directory or store prefix)."""
    return "%s/%s.json" % (SIGNATURES_DIR, key)


def signature_key(artifact_id: str, key: str) -> str:
    return artifact_key(artifact_id, signature_name(key))


def signature_record(artifact_id: str, key: str, signature: bytes, signer: str) -> bytes:
    """The signature object: the artifact it vouches for, the key, and the DER signature (base64)."""
    return json.dumps({"schema": SCHEMA, "artifact": artifact_id, "key": key, "algorithm": ALGORITHM,
                       "signer": signer, "signature": base64.b64encode(signature).decode("ascii")},
                      sort_keys=True, indent=1).encode() + b"\n"


@dataclass(frozen=True)
class TrustedKey:
    key_id: str
    source: str  # the KMS key ARN or the PEM file it came from, for messages
    public_key: Any  # cryptography's EllipticCurvePublicKey


def public_key_from_der(der: bytes, source: str) -> TrustedKey:
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import load_der_public_key

    try:
        public = load_der_public_key(der)
    except ValueError as exc:
        raise ArtifactError("artifact signing key %s is not a public key: %s" % (source, exc)) from exc
    if not isinstance(public, ec.EllipticCurvePublicKey) or not isinstance(public.curve, ec.SECP256R1):
        raise ArtifactError("artifact signing key %s is not an ECC NIST P-256 key (%s)" % (source, KEY_SPEC))
    return TrustedKey(key_id(der), source, public)


def public_key_der(public: Any) -> bytes:
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    der: bytes = public.public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo)
    return der


def public_key_from_pem(path: Path) -> TrustedKey:
    from cryptography.hazmat.primitives.serialization import load_pem_public_key

    try:
        public = load_pem_public_key(Path(path).read_bytes())
    except OSError as exc:
        raise ArtifactError("cannot read the artifact signing key %s: %s" % (path, exc.strerror or exc)) from exc
    except ValueError as exc:
        raise ArtifactError("%s is not a PEM public key: %s" % (path, exc)) from exc
    return public_key_from_der(public_key_der(public), str(path))


def is_kms_key(ref: str) -> bool:
    return ref.startswith("arn:") and ":kms:" in ref


def public_key_from_kms(key_arn: str, kms_client: Any) -> TrustedKey:
    """The public half of a KMS signing key, fetched once (kms:GetPublicKey) and used offline from then on."""
    try:
        response = kms_client.get_public_key(KeyId=key_arn)
    except Exception as exc:
        raise ArtifactError("cannot read the public key of %s: %s" % (key_arn, exc)) from exc
    if response.get("KeyUsage") != "SIGN_VERIFY" or ALGORITHM not in response.get("SigningAlgorithms", []):
        raise ArtifactError("%s is not an %s signing key (%s)" % (key_arn, KEY_SPEC, ALGORITHM))
    return public_key_from_der(response["PublicKey"], key_arn)


def trusted_keys(refs: Iterable[str], kms_client: Any = None) -> dict[str, TrustedKey]:
    """Trusted keys by id, from KMS key ARNs and PEM public-key files (`LAYA_ARTIFACT_KEYS`)."""
    keys: dict[str, TrustedKey] = {}
    for ref in refs:
        if is_kms_key(ref):
            if kms_client is None:
                import boto3

                kms_client = boto3.client("kms", region_name=ref.split(":")[3] or None)
            trusted = public_key_from_kms(ref, kms_client)
        else:
            trusted = public_key_from_pem(Path(ref))
        keys[trusted.key_id] = trusted
    return keys


def check_signature(record: bytes, artifact_id: str, trusted: TrustedKey) -> None:
    """Refuse a signature object that is malformed, names another artifact or key, or does not verify."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec

    where = "the signature of artifact %s by key %s (%s)" % (artifact_id[:12], trusted.key_id[:12], trusted.source)
    try:
        parsed = json.loads(record)
        signature = base64.b64decode(parsed["signature"], validate=True)
        names = (parsed["schema"], parsed["artifact"], parsed["key"], parsed["algorithm"])
    except (ValueError, KeyError, TypeError, binascii.Error) as exc:
        raise ArtifactError("%s is malformed" % where) from exc
    if names != (SCHEMA, artifact_id, trusted.key_id, ALGORITHM):
        raise ArtifactError("%s vouches for something else (%s)" % (where, ", ".join(map(str, names))))
    try:
        trusted.public_key.verify(signature, signed_message(artifact_id), ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        raise ArtifactError("%s does not verify: the artifact or its signature was forged or altered" % where) from None


def verify_signed(store: ObjectStore, artifact_id: str, keys: Mapping[str, TrustedKey]) -> str:
    """The id of a trusted key whose signature of `artifact_id` verifies; refuses an unsigned or foreign artifact.

    A present but invalid signature is refused even when another key's would verify: it means tampering."""
    found = None
    for kid, trusted in keys.items():
        record = store.read(signature_key(artifact_id, kid))
        if record is not None:
            check_signature(record[0], artifact_id, trusted)
            found = found or kid
    if found is None:
        raise ArtifactError("artifact %s carries no signature by a trusted key (%s): it is unsigned or signed by "
                            "another key, and signing is configured (LAYA_ARTIFACT_KEYS)"
                            % (artifact_id, ", ".join(k.source for k in keys.values())))
    return found


__all__ = ["ALGORITHM", "KEY_SPEC", "SCHEMA", "TrustedKey", "check_signature", "is_kms_key", "key_id",
           "public_key_der", "public_key_from_der", "public_key_from_kms", "public_key_from_pem", "signature_key",
           "signature_name", "signature_record", "signed_message", "trusted_keys", "verify_signed"]
