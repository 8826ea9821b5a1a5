"""What a signature binds (issue 56): the name it is served as, its gate verdict, and its place as the latest;
and the rollback that keeps those true. Fake artifacts: every refusal here happens before a graph is parsed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from laya_artifacts.cli import main as cli
from laya_artifacts.deploy.publish import publish
from laya_artifacts.deploy.rollback import roll_forward, rollback
from laya_artifacts.deploy.sign import LocalSigner, generate_key
from laya_serverless.artifact.layout import MANIFEST_FILE
from laya_serverless.artifact.store import LocalStore, pointer_key
from laya_serverless.artifact.trust import trusted_artifact
from laya_serverless.errors import ArtifactError
from tests.functional.laya_serverless.artifact.test_signed_artifacts import CHECKPOINT, TARGET, fake_artifact

PIN = "%s/%s" % (CHECKPOINT, TARGET)


def gate_failed_artifact(root: Path) -> Path:
    artifact = fake_artifact(root, "failed")
    manifest = json.loads((artifact / MANIFEST_FILE).read_text())
    manifest["parity"] = {"passed": False}
    (artifact / MANIFEST_FILE).write_text(json.dumps(manifest, sort_keys=True))
    return artifact


@pytest.fixture
def keys(tmp_path: Path) -> tuple[LocalSigner, tuple[str, ...]]:
    private, public = generate_key(tmp_path / "keys")
    return LocalSigner(private), (str(public),)


def _point(store: LocalStore, artifact_id: str) -> None:
    """Move the pointer behind the tools' back, as someone with write access to the store would."""
    path = store.root / pointer_key(CHECKPOINT, TARGET)
    path.write_text(json.dumps({"artifact": artifact_id, "checkpoint": CHECKPOINT, "target": TARGET}))


@pytest.mark.parametrize("how", ["pointer", "pin"])
@pytest.mark.parametrize(("other", "message"), [
    ({"checkpoint": "legal"}, "is legal/cpu-fp32, not the demo/cpu-fp32 it is served as"),
    ({"target": "cpu-int8"}, "is demo/cpu-int8, not the demo/cpu-fp32 it is served as"),
    ({}, "records no passing parity gate"),
])
def test_a_validly_signed_artifact_is_refused_under_another_name_or_with_a_failed_gate(
        tmp_path: Path, keys: tuple[LocalSigner, tuple[str, ...]], how: str, other: dict[str, str],
        message: str) -> None:
    signer, trusted = keys
    store = LocalStore(tmp_path / "store")
    publish(fake_artifact(tmp_path / "genuine", "genuine"), store, signer=signer)
    swapped = (fake_artifact(tmp_path / "other", "other", **other) if other
               else gate_failed_artifact(tmp_path / "other"))
    swapped_id = publish(swapped, LocalStore(tmp_path / "elsewhere"), signer=signer)  # signed with the same key
    for path in (tmp_path / "elsewhere" / "artifacts").rglob("*"):
        if path.is_file():
            target = store.root / path.relative_to(tmp_path / "elsewhere")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
    pins = {PIN: swapped_id} if how == "pin" else None
    if how == "pointer":
        _point(store, swapped_id)
    for configured in (trusted, ()):
        with pytest.raises(ArtifactError, match="served as|no passing parity gate|latest signed release"):
            trusted_artifact(store, CHECKPOINT, TARGET, configured, pins)
    with pytest.raises(ArtifactError, match=message):
        trusted_artifact(store, CHECKPOINT, TARGET, (), pins)


def test_an_older_signed_artifact_served_as_the_latest_is_refused_unless_a_signed_rollback_says_so(
        tmp_path: Path, keys: tuple[LocalSigner, tuple[str, ...]]) -> None:
    signer, trusted = keys
    store = LocalStore(tmp_path / "store")
    first = publish(fake_artifact(tmp_path / "a", "one"), store, signer=signer)
    second = publish(fake_artifact(tmp_path / "b", "two"), store, signer=signer)
    assert trusted_artifact(store, CHECKPOINT, TARGET, trusted)[0] == second
    genuine = (store.root / pointer_key(CHECKPOINT, TARGET)).read_bytes()
    _point(store, first)  # validly signed, but not the latest
    with pytest.raises(ArtifactError, match="an older or other artifact served as the latest is refused"):
        trusted_artifact(store, CHECKPOINT, TARGET, trusted)
    assert trusted_artifact(store, CHECKPOINT, TARGET, trusted, {PIN: first})[0] == first  # a pin is the deployment's
    (store.root / pointer_key(CHECKPOINT, TARGET)).write_bytes(genuine)
    assert rollback(store, CHECKPOINT, TARGET, keys=trusted, signer=signer) == (second, first)
    assert trusted_artifact(store, CHECKPOINT, TARGET, trusted)[0] == first  # the signed rollback says so
    assert roll_forward(store, CHECKPOINT, TARGET, keys=trusted, signer=signer) == (first, second)
    assert trusted_artifact(store, CHECKPOINT, TARGET, trusted)[0] == second


def test_a_forged_release_record_is_refused(tmp_path: Path, keys: tuple[LocalSigner, tuple[str, ...]]) -> None:
    signer, trusted = keys
    store = LocalStore(tmp_path / "store")
    first = publish(fake_artifact(tmp_path / "a", "one"), store, signer=signer)
    publish(fake_artifact(tmp_path / "b", "two"), store, signer=signer)
    record = next((store.root / "releases").rglob("0000000002/*.json"))
    forged = json.loads(record.read_text())
    forged.update(serial=3, artifact=first)
    (record.parent.parent / "0000000003").mkdir()
    (record.parent.parent / "0000000003" / record.name).write_text(json.dumps(forged))
    _point(store, first)
    with pytest.raises(ArtifactError, match="does not verify: it was forged or altered"):
        trusted_artifact(store, CHECKPOINT, TARGET, trusted)


def test_no_release_record_means_unproven_where_signing_is_configured(
        tmp_path: Path, keys: tuple[LocalSigner, tuple[str, ...]]) -> None:
    signer, trusted = keys
    store = LocalStore(tmp_path / "store")
    artifact = fake_artifact(tmp_path / "a", "one")
    from laya_artifacts.deploy.sign import sign_artifact

    sign_artifact(artifact, signer)  # signed, but published without a release
    publish(artifact, store)
    with pytest.raises(ArtifactError, match="no release record of demo/cpu-fp32 is signed by a trusted key"):
        trusted_artifact(store, CHECKPOINT, TARGET, trusted)


# ---------------------------------------------------------------------------------- rollback

def test_rollback_refuses_an_unsigned_destination_before_the_pointer_moves(
        tmp_path: Path, keys: tuple[LocalSigner, tuple[str, ...]]) -> None:
    signer, trusted = keys
    store = LocalStore(tmp_path / "store")
    publish(fake_artifact(tmp_path / "a", "one"), store)  # unsigned
    second = publish(fake_artifact(tmp_path / "b", "two"), store, signer=signer)
    with pytest.raises(ArtifactError, match="carries no signature by a trusted key"):
        rollback(store, CHECKPOINT, TARGET, keys=trusted, signer=signer)
    assert trusted_artifact(store, CHECKPOINT, TARGET, trusted)[0] == second  # still served


def test_rollback_refuses_a_destination_whose_gate_failed(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    publish(gate_failed_artifact(tmp_path / "a"), store)
    second = publish(fake_artifact(tmp_path / "b", "two"), store)
    with pytest.raises(ArtifactError, match="records no passing parity gate"):
        rollback(store, CHECKPOINT, TARGET)
    assert trusted_artifact(store, CHECKPOINT, TARGET)[0] == second


def test_rollback_with_keys_but_no_signer_is_refused(tmp_path: Path,
                                                     keys: tuple[LocalSigner, tuple[str, ...]]) -> None:
    signer, trusted = keys
    store = LocalStore(tmp_path / "store")
    publish(fake_artifact(tmp_path / "a", "one"), store, signer=signer)
    second = publish(fake_artifact(tmp_path / "b", "two"), store, signer=signer)
    with pytest.raises(ArtifactError, match="needs --sign-key"):
        rollback(store, CHECKPOINT, TARGET, keys=trusted)
    foreign = LocalSigner(generate_key(tmp_path / "foreign")[0])  # its record would not verify at the runtime
    with pytest.raises(ArtifactError, match="needs --sign-key with one of those keys"):
        rollback(store, CHECKPOINT, TARGET, keys=trusted, signer=foreign)
    assert trusted_artifact(store, CHECKPOINT, TARGET, trusted)[0] == second


def test_rollback_guards_to_and_from_and_rolls_forward(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    first = publish(fake_artifact(tmp_path / "a", "one"), store)
    second = publish(fake_artifact(tmp_path / "b", "two"), store)
    third = publish(fake_artifact(tmp_path / "c", "three"), store)
    assert rollback(store, CHECKPOINT, TARGET, expect_from=third) == (third, second)
    with pytest.raises(ArtifactError, match="not the --from"):  # a retry never goes a second step back
        rollback(store, CHECKPOINT, TARGET, expect_from=third)
    with pytest.raises(ArtifactError, match="is not in the history"):
        rollback(store, CHECKPOINT, TARGET, to="f" * 64)
    assert roll_forward(store, CHECKPOINT, TARGET) == (second, third)
    assert rollback(store, CHECKPOINT, TARGET, to=first) == (third, first)
    assert roll_forward(store, CHECKPOINT, TARGET) == (first, second)  # one step at a time
    assert roll_forward(store, CHECKPOINT, TARGET) == (second, third)
    with pytest.raises(ArtifactError, match="nothing to roll forward to"):
        roll_forward(store, CHECKPOINT, TARGET)


def test_the_commands_roll_back_and_forward_and_list_history(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                             keys: tuple[LocalSigner, tuple[str, ...]]) -> None:
    signer, trusted = keys
    store = LocalStore(tmp_path / "store")
    first = publish(fake_artifact(tmp_path / "a", "one"), store, signer=signer)
    second = publish(fake_artifact(tmp_path / "b", "two"), store)  # unsigned
    base = ["rollback", CHECKPOINT, TARGET, "--store", str(store.root), "--trust", trusted[0]]
    capsys.readouterr()
    assert cli([*base, "--from", second]) == 2 and "needs --sign-key" in capsys.readouterr().err
    key = str(tmp_path / "keys" / "artifact-signing.pem")
    assert cli([*base, "--from", second, "--sign-key", key]) == 0
    assert capsys.readouterr().out.strip() == first
    assert cli([*base, "--forward", "--sign-key", key]) == 2  # the unsigned one is refused going forward too
    assert "carries no signature by a trusted key" in capsys.readouterr().err
    assert cli(["list", "--store", str(store.root), "--history", "--trust", trusted[0]]) == 0
    listing = capsys.readouterr().out
    assert "served   %s" % first in listing and "rollback" in listing and "gate passed" in listing
    assert "forward  %s" % second in listing and "NOT signed by a trusted key" in listing
    publish(fake_artifact(tmp_path / "c", "three"), store, signer=signer)
    assert cli([*base, "--to", first, "--sign-key", key]) == 0
    assert capsys.readouterr().out.strip() == first




# ---------------------------------------------------------------------------------- the Python API

def test_decider_from_store_checks_signatures_like_the_server(tmp_path: Path,
                                                              keys: tuple[LocalSigner, tuple[str, ...]]) -> None:
    from laya_serverless.core.decider import Decider

    store = LocalStore(tmp_path / "store")
    publish(fake_artifact(tmp_path / "a", "one"), store)  # unsigned
    with pytest.raises(ArtifactError, match="carries no signature by a trusted key"):
        Decider.from_store(store.root, CHECKPOINT, TARGET, cache_dir=tmp_path / "cache", keys=keys[1])
    _point(store, publish(fake_artifact(tmp_path / "b", "x", checkpoint="legal"), LocalStore(tmp_path / "o")))
    with pytest.raises(ArtifactError):
        Decider.from_store(store.root, CHECKPOINT, TARGET, cache_dir=tmp_path / "cache")


def test_decider_from_store_refuses_int8_unproven_on_this_cpu(tmp_path: Path) -> None:
    from laya_serverless.core.decider import Decider

    store = LocalStore(tmp_path / "store")
    artifact = fake_artifact(tmp_path / "a", "one", target="cpu-int8")
    manifest = json.loads((artifact / MANIFEST_FILE).read_text())
    manifest["configuration"]["build_cpu"] = {"machine": "x86_64", "isa": ["avx512_vnni"], "model": "build box"}
    (artifact / MANIFEST_FILE).write_text(json.dumps(manifest, sort_keys=True))
    publish(artifact, store)
    here = {"machine": "x86_64", "isa": ["avx2"], "model": "this box"}
    with pytest.raises(ArtifactError, match="was gated on avx512-vnni int8 kernels .* never on this CPU's avx2"):
        Decider.from_store(store.root, CHECKPOINT, "cpu-int8", cache_dir=tmp_path / "cache", here=lambda: here)


def test_a_bad_artifact_key_refuses_the_start_naming_the_variable(tmp_path: Path) -> None:
    """It used to start, answer 503, and tell operators to check LAYA_STORE, LAYA_DEPLOYED and LAYA_TARGET."""
    from laya_serverless.assembly.loader import assemble_deployment
    from laya_serverless.errors import SettingsError
    from laya_serverless.settings import ARTIFACT_KEYS, Settings

    store = LocalStore(tmp_path / "store")
    publish(fake_artifact(tmp_path / "a", "one"), store)
    settings = Settings.from_environ({"LAYA_STORE": str(store.root), "LAYA_TARGET": TARGET,
                                      ARTIFACT_KEYS: str(tmp_path / "missing.pem")})
    with pytest.raises(SettingsError, match="^invalid LAYA_ARTIFACT_KEYS: cannot read the artifact signing key"):
        assemble_deployment(settings.deployment)


# ---------------------------------------------------------------------------------- the runtime it was gated on

def _gated_under(root: Path, version: str) -> Path:
    artifact = fake_artifact(root, "ort")
    manifest = json.loads((artifact / MANIFEST_FILE).read_text())
    manifest["tools"] = {"onnxruntime": version}
    manifest["runtime"] = {"lock": "layers/requirements.lock", "sha256": "ab" * 32}
    (artifact / MANIFEST_FILE).write_text(json.dumps(manifest, sort_keys=True))
    return artifact


def test_an_artifact_gated_under_another_onnxruntime_is_refused_at_load(tmp_path: Path) -> None:
    """The manifest records the runtime it was gated under; nothing compared it at load."""
    from laya_serverless.artifact.platform import gated_elsewhere, onnxruntime_version
    from laya_serverless.assembly.loader import choose_artifact
    from laya_serverless.core.decider import Decider
    from laya_serverless.settings import Settings

    store = LocalStore(tmp_path / "store")
    publish(_gated_under(tmp_path / "a", "1.0.0"), store)
    settings = Settings.of(store=str(store.root), target=TARGET).deployment
    with pytest.raises(ArtifactError, match=r"gated under onnxruntime 1\.0\.0 \(lock sha256 abababababab\) and this "
                                            r"process runs onnxruntime %s" % re.escape(onnxruntime_version())):
        choose_artifact(store, CHECKPOINT, settings, {"machine": "x86_64", "isa": ["avx2"]})
    with pytest.raises(ArtifactError, match="gated under onnxruntime 1.0.0"):
        Decider.from_store(store.root, CHECKPOINT, TARGET, cache_dir=tmp_path / "cache")
    _, manifest = trusted_artifact(store, CHECKPOINT, TARGET)[1]
    assert gated_elsewhere(manifest, "a" * 64, have="1.0.0") is None
