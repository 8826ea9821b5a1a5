"""Sign artifacts: with an AWS KMS key (`ECC_NIST_P256`) or a local key file (the local store's default).

    laya-artifacts keygen --out .laya-keys                      a local P-256 key pair (private key mode 0600)
    laya-artifacts sign ARTIFACT_DIR --key KEY                  signatures/<key id>.json inside the artifact
    laya-artifacts sign --store S --checkpoint C --target T --key KEY   sign what is published (rotation)
    laya-artifacts publish ARTIFACT_DIR --sign-key KEY          sign, then publish with its signatures

KEY is a KMS key ARN (kms:Sign, and kms:GetPublicKey for its id) or a PEM private-key file. What is signed,
and how the runtime checks it, is `laya_serverless.artifact.signature`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Protocol

from laya_serverless.artifact.layout import MANIFEST_FILE, SIGNATURES_DIR
from laya_serverless.artifact.manifest import sha256_file
from laya_serverless.artifact.releases import Release, parse_release, release_key, serials
from laya_serverless.artifact.signature import (
    ALGORITHM,
    SCHEMA,
    is_kms_key,
    key_id,
    public_key_der,
    public_key_from_der,
    signature_key,
    signature_name,
    signature_record,
    signed_message,
)
from laya_serverless.artifact.store import ObjectStore
from laya_serverless.errors import ArtifactError

# The key `laya-artifacts deploy` signs with, as the stack names its own (laya_infra.constants; a test ties them).
SIGNING_KEY_ALIAS = "alias/laya-serverless-artifact-signing"
PRIVATE_KEY_FILE = "artifact-signing.pem"
PUBLIC_KEY_FILE = "artifact-signing.pub.pem"


class Signer(Protocol):
    key_id: str
    source: str

    def sign(self, message: bytes) -> bytes: ...


class LocalSigner:
    """A PEM private key on disk (NIST P-256)."""

    def __init__(self, path: Path) -> None:
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.hazmat.primitives.serialization import load_pem_private_key

        try:
            private = load_pem_private_key(Path(path).read_bytes(), password=None)
        except (OSError, ValueError, TypeError) as exc:
            raise ArtifactError("cannot use %s as an artifact signing key: %s" % (path, exc)) from exc
        if not isinstance(private, ec.EllipticCurvePrivateKey) or not isinstance(private.curve, ec.SECP256R1):
            raise ArtifactError("%s is not an ECC NIST P-256 private key" % path)
        self._private, self.source = private, str(path)
        self.key_id = key_id(public_key_der(private.public_key()))

    def sign(self, message: bytes) -> bytes:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec

        signature: bytes = self._private.sign(message, ec.ECDSA(hashes.SHA256()))
        return signature


class KmsSigner:
    """An AWS KMS asymmetric key: the private half never leaves KMS (kms:Sign on each artifact)."""

    def __init__(self, key_arn: str, client: Any) -> None:
        self.client, self.source = client, key_arn
        try:
            der = client.get_public_key(KeyId=key_arn)["PublicKey"]
        except Exception as exc:
            raise ArtifactError("cannot read the public key of %s: %s" % (key_arn, exc)) from exc
        self.key_id = public_key_from_der(der, key_arn).key_id

    def sign(self, message: bytes) -> bytes:
        try:
            response = self.client.sign(KeyId=self.source, Message=message, MessageType="RAW",
                                        SigningAlgorithm=ALGORITHM)
        except Exception as exc:
            raise ArtifactError("KMS refused to sign with %s: %s" % (self.source, exc)) from exc
        signature: bytes = response["Signature"]
        return signature


def open_signer(ref: str, kms_client: Any = None) -> Signer:
    """A KMS key ARN (boto3's default client in the key's region unless one is given) or a PEM private-key file."""
    if is_kms_key(ref):
        if kms_client is None:
            import boto3

            kms_client = boto3.client("kms", region_name=ref.split(":")[3] or None)
        return KmsSigner(ref, kms_client)
    return LocalSigner(Path(ref))


def generate_key(out_dir: Path) -> tuple[Path, Path]:
    """A new P-256 key pair under `out_dir`: (private key, mode 0600; public key, what the runtime trusts)."""
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import (
        Encoding,
        NoEncryption,
        PrivateFormat,
        PublicFormat,
    )

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    private_path, public_path = out_dir / PRIVATE_KEY_FILE, out_dir / PUBLIC_KEY_FILE
    if private_path.exists():
        raise ArtifactError("%s exists already: a key is never overwritten (rotate to a new folder)" % private_path)
    private = ec.generate_private_key(ec.SECP256R1())
    fd = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(private.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()))
    public_path.write_bytes(private.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo))
    return private_path, public_path


def ensure_signing_key(kms_client: Any, alias: str = SIGNING_KEY_ALIAS) -> str:
    """The ARN of the KMS signing key named `alias`, created (ECC_NIST_P256, SIGN_VERIFY) when there is none."""
    try:
        return str(kms_client.describe_key(KeyId=alias)["KeyMetadata"]["Arn"])
    except kms_client.exceptions.NotFoundException:
        pass
    created = kms_client.create_key(KeySpec="ECC_NIST_P256", KeyUsage="SIGN_VERIFY",
                                    Description="Signs laya-serverless artifacts (laya-artifacts deploy)")
    arn = str(created["KeyMetadata"]["Arn"])
    kms_client.create_alias(AliasName=alias, TargetKeyId=arn)
    return arn


def signature_of(artifact_id: str, signer: Signer) -> tuple[str, bytes]:
    """(the signature's name inside the artifact, its record) for `artifact_id`."""
    record = signature_record(artifact_id, signer.key_id, signer.sign(signed_message(artifact_id)), signer.source)
    return signature_name(signer.key_id), record


def sign_artifact(artifact_dir: Path, signer: Signer) -> Path:
    """Write the signature of a built artifact (by its manifest's hash) into it; returns the file."""
    manifest = Path(artifact_dir) / MANIFEST_FILE
    if not manifest.is_file():
        raise ArtifactError("%s has no %s: only a gated artifact is signed" % (artifact_dir, MANIFEST_FILE))
    name, record = signature_of(sha256_file(manifest), signer)
    path = Path(artifact_dir) / name
    path.parent.mkdir(exist_ok=True)  # signatures/: beside the manifest, never listed by it
    path.write_bytes(record)
    return path


def sign_published(store: ObjectStore, artifact_id: str, signer: Signer) -> bool:
    """Add `signer`'s signature to an artifact already in `store` (create-only), and to the latest release record
    of its (checkpoint, target) when that names it (rotation); False when the artifact had one by this key."""
    from laya_serverless.artifact.fetch import read_manifest

    _, manifest = read_manifest(store, artifact_id)  # only an artifact that is there, whole, is vouched for
    _, record = signature_of(artifact_id, signer)
    added = store.create(signature_key(artifact_id, signer.key_id), record)
    checkpoint, target = str(manifest.checkpoint.get("name")), manifest.target
    found = serials(store, checkpoint, target)
    if found:
        serial = max(found)
        latest = store.read(release_key(checkpoint, target, serial, found[serial][0]))
        if latest is not None and signer.key_id not in found[serial]:
            release, _ = parse_release(latest[0], checkpoint, target, serial, found[serial][0])
            if release.artifact == artifact_id:
                _write_release(store, Release(checkpoint, target, serial, artifact_id, release.action,
                                              release.created, signer.key_id), signer)
    return added


def _write_release(store: ObjectStore, release: Release, signer: Signer) -> None:
    if not store.create(release_key(release.checkpoint, release.target, release.serial, signer.key_id),
                        release.record(signer.sign(release.message()), signer.source)):
        raise ArtifactError("release %d of %s/%s was written by another publisher meanwhile; nothing was "
                            "overwritten, run it again" % (release.serial, release.checkpoint, release.target))


def sign_release(store: ObjectStore, checkpoint: str, target: str, artifact_id: str, action: str,
                 signer: Signer) -> Release:
    """Write the next signed release record: (checkpoint, target) is `artifact_id` from now, by `action`
    (`laya_serverless.artifact.releases`); written before the pointer moves, so a reader that follows it finds it."""
    import datetime as dt

    serial = max(serials(store, checkpoint, target), default=0) + 1
    created = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    release = Release(checkpoint, target, serial, artifact_id, action, created, signer.key_id)
    _write_release(store, release, signer)
    return release


def upload_signatures(artifact_dir: Path, artifact_id: str, store: ObjectStore) -> list[str]:
    """Store the signatures a built artifact carries (create-only: one per key); the key ids stored."""
    stored = []
    for path in sorted((Path(artifact_dir) / SIGNATURES_DIR).glob("*.json")):
        record = path.read_bytes()
        try:
            parsed = json.loads(record)
        except ValueError:
            parsed = {}
        if (parsed.get("schema"), parsed.get("artifact"), parsed.get("key")) != (SCHEMA, artifact_id, path.stem):
            raise ArtifactError("%s is not a signature of artifact %s" % (path, artifact_id))
        if store.create(signature_key(artifact_id, path.stem), record):
            stored.append(path.stem)
    return stored


__all__ = ["PRIVATE_KEY_FILE", "PUBLIC_KEY_FILE", "SIGNING_KEY_ALIAS", "KmsSigner", "LocalSigner", "Signer",
           "ensure_signing_key", "generate_key",
           "open_signer", "sign_artifact", "sign_published", "sign_release", "signature_of", "upload_signatures"]
