"""Signed artifacts, pinned versions and rollback, on both store backends (a local folder, S3 through moto),
with a local key file and a KMS key (moto). Fake artifacts: the refusals under test happen before any graph
is parsed, so no model is built here."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from laya_artifacts.cli import main as cli
from laya_artifacts.deploy.publish import publish
from laya_artifacts.deploy.rollback import HISTORY, rollback
from laya_artifacts.deploy.sign import KmsSigner, LocalSigner, generate_key, sign_artifact, sign_published
from laya_serverless import observe
from laya_serverless.artifact.layout import MANIFEST_FILE
from laya_serverless.artifact.manifest import SCHEMA, sha256_file, verify_artifact
from laya_serverless.artifact.signature import signature_key
from laya_serverless.artifact.store import LocalStore, ObjectStore, S3Store, artifact_key, pointer_key
from laya_serverless.artifact.trust import trusted_artifact, use_kms_client
from laya_serverless.assembly.loader import assemble_deployment
from laya_serverless.errors import ArtifactError, SettingsError
from laya_serverless.settings import ARTIFACT_KEYS, ARTIFACT_PINS, Settings
from tests.conftest import MOTO_REGION

CHECKPOINT, TARGET = "demo", "cpu-fp32"


def fake_artifact(root: Path, marker: str, checkpoint: str = CHECKPOINT, target: str = TARGET) -> Path:
    """A manifested artifact whose graph is not a graph: enough for publishing, signing and refusing."""
    root.mkdir(parents=True)
    files = {}
    for name, data in (("model.onnx", ("graph %s" % marker).encode()), ("tokenizer.json", b"{}")):
        (root / name).write_bytes(data)
        files[name] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    manifest = {"schema": SCHEMA, "files": files, "parity": {"passed": True},
                "configuration": {"checkpoint": {"name": checkpoint, "revision": marker}, "target": target}}
    (root / MANIFEST_FILE).write_text(json.dumps(manifest, sort_keys=True))
    return root


@pytest.fixture
def aws(moto_aws: Any) -> Iterator[None]:
    """The suite's moto fixture, with the KMS client the trust module caches dropped afterwards."""
    yield
    use_kms_client(None)


@pytest.fixture(params=["local", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ObjectStore:
    if request.param == "local":
        return LocalStore(tmp_path / "store")
    import boto3

    request.getfixturevalue("aws")
    client = boto3.client("s3", region_name=MOTO_REGION)
    client.create_bucket(Bucket="laya-artifacts")
    return S3Store("laya-artifacts", "prod/laya", client)


@pytest.fixture
def local_key(tmp_path: Path) -> tuple[Path, Path]:
    return generate_key(tmp_path / "keys")


def kms_key(description: str = "signing") -> tuple[str, Any]:
    import boto3

    client = boto3.client("kms", region_name=MOTO_REGION)
    arn = client.create_key(KeySpec="ECC_NIST_P256", KeyUsage="SIGN_VERIFY", Description=description)["KeyMetadata"]
    use_kms_client(client)
    return arn["Arn"], client


def _overwrite(store: ObjectStore, key: str, data: bytes) -> None:
    """Write behind the store's back, as someone with write access to it would."""
    if isinstance(store, LocalStore):
        (store.root / key).parent.mkdir(parents=True, exist_ok=True)
        (store.root / key).write_bytes(data)
    else:
        assert isinstance(store, S3Store)
        store.client.put_object(Bucket=store.bucket, Key="%s/%s" % (store.prefix, key), Body=data)


# ---------------------------------------------------------------------------------- local key

def test_a_locally_signed_artifact_is_trusted_and_its_signature_sits_beside_the_manifest(
        store: ObjectStore, local_key: tuple[Path, Path], tmp_path: Path) -> None:
    private, public = local_key
    assert private.stat().st_mode & 0o777 == 0o600
    artifact = fake_artifact(tmp_path / "a", "one")
    artifact_id = publish(artifact, store, signer=LocalSigner(private))
    verify_artifact(artifact)  # the signature in the directory is not an unlisted file
    assert trusted_artifact(store, CHECKPOINT, TARGET, (str(public),))[0] == artifact_id
    assert trusted_artifact(store, CHECKPOINT, TARGET)[0] == artifact_id  # no keys configured: not checked


def test_an_unsigned_artifact_is_refused_where_signing_is_configured(
        store: ObjectStore, local_key: tuple[Path, Path], tmp_path: Path) -> None:
    publish(fake_artifact(tmp_path / "a", "one"), store)
    with pytest.raises(ArtifactError, match="carries no signature by a trusted key"):
        trusted_artifact(store, CHECKPOINT, TARGET, (str(local_key[1]),))


def test_an_artifact_signed_by_a_foreign_key_is_refused(store: ObjectStore, local_key: tuple[Path, Path],
                                                         tmp_path: Path) -> None:
    foreign, _ = generate_key(tmp_path / "foreign")
    publish(fake_artifact(tmp_path / "a", "one"), store, signer=LocalSigner(foreign))
    with pytest.raises(ArtifactError, match="no signature by a trusted key"):
        trusted_artifact(store, CHECKPOINT, TARGET, (str(local_key[1]),))


def test_a_consistently_rehashed_forgery_is_refused(store: ObjectStore, local_key: tuple[Path, Path],
                                                    tmp_path: Path) -> None:
    """Store write access is no longer control of the answers: every hash right, no valid signature."""
    private, public = local_key
    genuine = publish(fake_artifact(tmp_path / "a", "one"), store, signer=LocalSigner(private))
    forgery = fake_artifact(tmp_path / "forged", "temperatures x3")
    forged = sha256_file(forgery / MANIFEST_FILE)
    for name in ("model.onnx", "tokenizer.json", MANIFEST_FILE):
        _overwrite(store, artifact_key(forged, name), (forgery / name).read_bytes())
    genuine_signature = store.read(signature_key(genuine, LocalSigner(private).key_id))
    assert genuine_signature is not None
    _overwrite(store, signature_key(forged, LocalSigner(private).key_id), genuine_signature[0])  # copied over
    _overwrite(store, pointer_key(CHECKPOINT, TARGET), json.dumps({"artifact": forged}).encode())
    with pytest.raises(ArtifactError, match="vouches for something else"):
        trusted_artifact(store, CHECKPOINT, TARGET, (str(public),))
    edited = json.loads(genuine_signature[0])
    edited["artifact"] = forged  # the record names the forgery, the signature is still the genuine one's
    _overwrite(store, signature_key(forged, LocalSigner(private).key_id), json.dumps(edited).encode())
    with pytest.raises(ArtifactError, match="does not verify: the artifact or its signature was forged"):
        trusted_artifact(store, CHECKPOINT, TARGET, (str(public),))


@pytest.mark.parametrize(("content", "message"), [
    (b"not a key", "is not a PEM public key"),
    (None, "cannot read the artifact signing key"),
])
def test_an_unusable_trusted_key_is_refused_naming_it(tmp_path: Path, content: bytes | None, message: str) -> None:
    store = LocalStore(tmp_path / "store")
    publish(fake_artifact(tmp_path / "a", "one"), store)
    path = tmp_path / "trusted.pem"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(ArtifactError, match=message):
        trusted_artifact(store, CHECKPOINT, TARGET, (str(path),))


# ---------------------------------------------------------------------------------- KMS (moto)

def test_kms_signature_verifies_offline_and_rotation_keeps_serving(aws: None, tmp_path: Path) -> None:
    import boto3

    client = boto3.client("s3", region_name=MOTO_REGION)
    client.create_bucket(Bucket="laya-artifacts")
    store = S3Store("laya-artifacts", "prod/laya", client)
    old_arn, kms = kms_key("old")
    new_arn, _ = kms_key("new")
    artifact_id = publish(fake_artifact(tmp_path / "a", "one"), store, signer=KmsSigner(old_arn, kms))
    assert trusted_artifact(store, CHECKPOINT, TARGET, (old_arn,))[0] == artifact_id
    with pytest.raises(ArtifactError, match="no signature by a trusted key"):
        trusted_artifact(store, CHECKPOINT, TARGET, (new_arn,))
    # Rotation: trust both, sign what is published with the new key, then trust the new key alone.
    assert trusted_artifact(store, CHECKPOINT, TARGET, (old_arn, new_arn))[0] == artifact_id
    assert sign_published(store, artifact_id, KmsSigner(new_arn, kms))
    assert not sign_published(store, artifact_id, KmsSigner(new_arn, kms))  # once per key
    assert trusted_artifact(store, CHECKPOINT, TARGET, (new_arn,))[0] == artifact_id


def test_a_kms_key_that_cannot_sign_is_refused(aws: None, tmp_path: Path) -> None:
    import boto3

    kms = boto3.client("kms", region_name=MOTO_REGION)
    arn = kms.create_key(KeySpec="SYMMETRIC_DEFAULT", KeyUsage="ENCRYPT_DECRYPT")["KeyMetadata"]["Arn"]
    use_kms_client(kms)
    store = LocalStore(tmp_path / "store")  # never read: the key is refused first
    with pytest.raises(ArtifactError, match="is not an ECC_NIST_P256 signing key"):
        trusted_artifact(store, CHECKPOINT, TARGET, (arn,), {"%s/%s" % (CHECKPOINT, TARGET): "0" * 64})


# ---------------------------------------------------------------------------------- the loader

def test_the_deployment_refuses_an_unsigned_artifact_and_counts_it(local_key: tuple[Path, Path],
                                                                   tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    publish(fake_artifact(tmp_path / "a", "one"), store)
    settings = Settings.from_environ({"LAYA_STORE": str(store.root), "LAYA_DEPLOYED": "english=demo",
                                      "LAYA_TARGET": TARGET, "LAYA_CACHE_DIR": str(tmp_path / "cache"),
                                      ARTIFACT_KEYS: str(local_key[1])})
    counted = Recorder()
    observe.install(counted)
    try:
        assembled = assemble_deployment(settings.deployment)
    finally:
        observe.install(None)
    assert assembled.deployment is None and assembled.unavailable
    assert counted.metrics == [(observe.REFUSED_ARTIFACTS, 1.0)]
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").rglob("model.onnx"))  # nothing moved


class Recorder:
    def __init__(self) -> None:
        self.metrics: list[tuple[str, float]] = []

    def span(self, name: str, started: float, ended: float, failed: bool) -> None:
        return None

    def metric(self, name: str, value: float, unit: str) -> None:
        self.metrics.append((name, value))


# ---------------------------------------------------------------------------------- pins

def test_a_pinned_artifact_is_served_whatever_the_pointer_says(store: ObjectStore, tmp_path: Path) -> None:
    first = publish(fake_artifact(tmp_path / "a", "one"), store)
    second = publish(fake_artifact(tmp_path / "b", "two"), store)
    assert trusted_artifact(store, CHECKPOINT, TARGET)[0] == second
    pins = Settings.from_environ({ARTIFACT_PINS: "%s/%s=%s" % (CHECKPOINT, TARGET, first)}).deployment.artifact_pins
    assert trusted_artifact(store, CHECKPOINT, TARGET, (), pins)[0] == first


@pytest.mark.parametrize("text", ["demo=" + "a" * 64, "demo/cpu-fp32=abc", "demo/cpu-fp32", "/cpu-fp32=" + "a" * 64])
def test_a_malformed_pin_is_refused_naming_the_variable(text: str) -> None:
    with pytest.raises(SettingsError, match=ARTIFACT_PINS):
        Settings.from_environ({ARTIFACT_PINS: text})


def test_hub_checkpoint_pins_keep_their_owner() -> None:
    pins = Settings.from_environ({ARTIFACT_PINS: "owner/name/cpu-int8=%s, demo/cpu-fp32=%s" % ("a" * 64, "b" * 64),
                                  "LAYA_DEPLOYED": "english=demo,hub=owner/name"})
    assert pins.deployment.artifact_pins == {"owner/name/cpu-int8": "a" * 64, "demo/cpu-fp32": "b" * 64}


# ---------------------------------------------------------------------------------- rollback

def _pointer(store: ObjectStore) -> dict[str, Any]:
    found = store.read(pointer_key(CHECKPOINT, TARGET))
    assert found is not None
    record: dict[str, Any] = json.loads(found[0])
    return record


def test_rollback_points_back_at_the_previous_artifact_in_one_command(store: ObjectStore, tmp_path: Path) -> None:
    first = publish(fake_artifact(tmp_path / "a", "one"), store)
    second = publish(fake_artifact(tmp_path / "b", "two"), store)
    third = publish(fake_artifact(tmp_path / "c", "three"), store)
    assert _pointer(store)["history"] == [second, first]
    assert rollback(store, CHECKPOINT, TARGET) == (third, second)
    assert _pointer(store) == {"artifact": second, "checkpoint": CHECKPOINT, "target": TARGET, "revision": "two",
                               "history": [first], "rolled_back_from": third, "forward": [third]}
    assert rollback(store, CHECKPOINT, TARGET) == (second, first)
    with pytest.raises(ArtifactError, match="remembers no earlier artifact"):
        rollback(store, CHECKPOINT, TARGET)
    assert trusted_artifact(store, CHECKPOINT, TARGET)[0] == first


def test_republishing_the_served_artifact_keeps_the_history(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    first = publish(fake_artifact(tmp_path / "a", "one"), store)
    second = publish(fake_artifact(tmp_path / "b", "two"), store)
    publish(tmp_path / "b", store)
    assert _pointer(store)["history"] == [first]
    assert publish(tmp_path / "a", store) == first  # an older one published again moves to the front
    assert _pointer(store)["history"] == [second]


def test_the_history_is_bounded(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    for n in range(HISTORY + 3):
        publish(fake_artifact(tmp_path / str(n), str(n)), store)
    assert len(_pointer(store)["history"]) == HISTORY


def test_rollback_loses_to_a_concurrent_move_and_overwrites_nothing(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    publish(fake_artifact(tmp_path / "a", "one"), store)
    newest = publish(fake_artifact(tmp_path / "b", "two"), store)

    class Racing(LocalStore):
        def swap(self, key: str, data: bytes, expected_version: str | None) -> bool:
            publish(fake_artifact(tmp_path / "c", "three"), LocalStore(self.root))  # another publisher wins
            return super().swap(key, data, expected_version)

    with pytest.raises(ArtifactError, match="moved during the rollback; nothing was overwritten"):
        rollback(Racing(store.root), CHECKPOINT, TARGET)
    assert _pointer(store)["history"][0] == newest


def test_rollback_refuses_a_history_entry_of_another_checkpoint(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    other = publish(fake_artifact(tmp_path / "x", "x", checkpoint="legal"), store)
    current = publish(fake_artifact(tmp_path / "a", "one"), store)
    _overwrite(store, pointer_key(CHECKPOINT, TARGET), json.dumps({"artifact": current, "history": [other]}).encode())
    with pytest.raises(ArtifactError, match="the pointer was edited by hand"):
        rollback(store, CHECKPOINT, TARGET)


def test_the_rollback_and_sign_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "store"
    assert cli(["keygen", "--out", str(tmp_path / "keys")]) == 0
    private = tmp_path / "keys" / "artifact-signing.pem"
    first = fake_artifact(tmp_path / "a", "one")
    assert cli(["sign", str(first), "--key", str(private)]) == 0 and cli(["verify", str(first)]) == 0
    assert cli(["publish", str(first), "--store", str(store), "--sign-key", str(private)]) == 0
    assert cli(["publish", str(fake_artifact(tmp_path / "b", "two")), "--store", str(store)]) == 0
    capsys.readouterr()
    assert cli(["rollback", CHECKPOINT, TARGET, "--store", str(store)]) == 0
    assert capsys.readouterr().out.strip() == sha256_file(first / MANIFEST_FILE)
    assert cli(["rollback", CHECKPOINT, TARGET, "--store", str(store)]) == 2  # one message, no traceback
    assert "remembers no earlier artifact" in capsys.readouterr().err
    public = tmp_path / "keys" / "artifact-signing.pub.pem"
    assert trusted_artifact(LocalStore(store), CHECKPOINT, TARGET, (str(public),))[0] == sha256_file(
        first / MANIFEST_FILE)
    verify = ["verify", str(store), "--checkpoint", CHECKPOINT, "--target", TARGET, "--cache-dir", str(tmp_path / "c")]
    assert cli([*verify, "--key", str(public)]) == 0
    assert "signature by key" in capsys.readouterr().out
    assert cli(["publish", str(fake_artifact(tmp_path / "third", "three")), "--store", str(store)]) == 0  # unsigned
    assert cli([*verify, "--key", str(public)]) == 2
    assert "carries no signature by a trusted key" in capsys.readouterr().err
    signed = ["sign", "--store", str(store), "--checkpoint", CHECKPOINT, "--target", TARGET, "--key", str(private)]
    assert cli(signed) == 0 and cli([*verify, "--key", str(public)]) == 0  # what is published, signed in place


def test_sign_writes_into_the_artifact_and_keygen_never_overwrites(local_key: tuple[Path, Path],
                                                                    tmp_path: Path) -> None:
    artifact = fake_artifact(tmp_path / "a", "one")
    path = sign_artifact(artifact, LocalSigner(local_key[0]))
    assert path.parent == artifact / "signatures" and json.loads(path.read_text())["artifact"] == sha256_file(
        artifact / MANIFEST_FILE)
    with pytest.raises(ArtifactError, match="exists already"):
        generate_key(local_key[0].parent)


# ---------------------------------------------------------------------------------- the deploy command

def test_the_deploy_command_signs_with_one_account_key_and_tells_the_stack(aws: None, tmp_path: Path) -> None:
    import boto3

    from laya_artifacts.deploy.command import signing_step
    from laya_artifacts.deploy.sign import SIGNING_KEY_ALIAS
    from laya_infra.constants import SIGNING_KEY_ALIAS as STACK_ALIAS

    assert SIGNING_KEY_ALIAS == STACK_ALIAS  # the key the command makes is the one the stack would name
    kms = boto3.client("kms", region_name=MOTO_REGION)
    use_kms_client(kms)
    context: dict[str, str] = {}
    signer = signing_step(kms, context, lambda _m: None)
    assert context["signing_key"] == signer.source and kms.describe_key(KeyId=SIGNING_KEY_ALIAS)["KeyMetadata"][
        "Arn"] == signer.source
    again: dict[str, str] = {}
    assert signing_step(kms, again, lambda _m: None).source == signer.source  # found by its alias, not made twice
    store = LocalStore(tmp_path / "store")
    publish(fake_artifact(tmp_path / "a", "one"), store, signer=signer)
    assert trusted_artifact(store, CHECKPOINT, TARGET, (context["signing_key"],))[0]
    off = {"signing": "false"}
    assert signing_step(kms, off, lambda _m: None) is None and "signing_key" not in off
    assert signing_step(None, {}, lambda _m: None) is None


# ---------------------------------------------------------------------------------- the embedded default

def test_make_serve_never_signs_what_the_pointer_names(tmp_path: Path) -> None:
    """A consistent, re-hashed, unsigned forgery behind the demo's pointer stays unsigned and is refused."""
    from laya_artifacts.quickstart import ensure_signed

    forged = publish(fake_artifact(tmp_path / "a", "forged"), LocalStore(tmp_path / "store"))
    public = ensure_signed(tmp_path / "store", tmp_path / "keys", TARGET)
    assert ensure_signed(tmp_path / "store", tmp_path / "keys", TARGET) == public  # the key is made once
    assert (tmp_path / "keys" / "artifact-signing.pem").stat().st_mode & 0o777 == 0o600
    assert LocalStore(tmp_path / "store").list("artifacts/%s/signatures/" % forged) == []
    with pytest.raises(ArtifactError, match="no signature by a trusted key"):
        trusted_artifact(LocalStore(tmp_path / "store"), CHECKPOINT, TARGET, (str(public),))


def test_make_serve_signs_what_it_publishes_and_remembers_it(tmp_path: Path) -> None:
    from laya_artifacts.deploy.command import Built, publish_step
    from laya_artifacts.quickstart import ensure_signed, local_signer, remember_published

    store = LocalStore(tmp_path / "store")
    built = Built(CHECKPOINT, {TARGET: fake_artifact(tmp_path / "a", "one")})
    published = publish_step([built], store, lambda _m: None, local_signer(tmp_path / "keys"))
    remember_published(tmp_path / "mark.json", TARGET, published["%s/%s" % (CHECKPOINT, TARGET)])
    public = ensure_signed(tmp_path / "store", tmp_path / "keys", TARGET)
    assert trusted_artifact(store, CHECKPOINT, TARGET, (str(public),))[0] == json.loads(
        (tmp_path / "mark.json").read_text())["artifact"]


@pytest.mark.slow
def test_a_signed_pinned_artifact_loads_and_answers(tiny_fp32: Path, local_key: tuple[Path, Path],
                                                    tmp_path: Path) -> None:
    """The positive path through the loader: signature verified, pin honoured, the graph served."""
    import shutil

    artifact = shutil.copytree(tiny_fp32, tmp_path / "artifact")
    store = LocalStore(tmp_path / "store")
    artifact_id = publish(artifact, store, signer=LocalSigner(local_key[0]))
    publish(fake_artifact(tmp_path / "newer", "newer", checkpoint="tiny-modernbert"), store)  # the pointer moves on
    settings = Settings.from_environ({
        "LAYA_STORE": str(store.root), "LAYA_DEPLOYED": "english=tiny-modernbert", "LAYA_TARGET": TARGET,
        "LAYA_CACHE_DIR": str(tmp_path / "cache"), ARTIFACT_KEYS: str(local_key[1]),
        ARTIFACT_PINS: "tiny-modernbert/%s=%s" % (TARGET, artifact_id)})
    assembled = assemble_deployment(settings.deployment)
    assert assembled.unavailable is None and assembled.deployment is not None
    assert artifact_id[:12] in assembled.loaded.catalog["english"]["description"]
