"""The Lambda layer installs exactly its hash lock: an unhashed, unpinned or stale lock is refused before pip runs,
and pip itself refuses a file whose sha256 the lock does not list (a tiny wheel served from a folder stands for the
package index). The lock in the repository agrees with pyproject, and every manifest names its sha256."""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import zipfile
from pathlib import Path

import pytest

from laya_artifacts.build import write_manifest
from laya_artifacts.package import lambda_package
from laya_artifacts.package.runtime_lock import LOCK_FILE, LockError, check_lock, lock_sha256, runtime_pins
from laya_serverless.gate.replay import GateReport

GOOD = "sha256:" + "ab" * 32


def _wheel(folder: Path, name: str = "tinylock", version: str = "1.0") -> Path:
    """A minimal pure-Python wheel, as pip accepts it."""
    files = {"%s/__init__.py" % name: b"VALUE = 1\n",
             "%s-%s.dist-info/METADATA" % (name, version): b"Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (
                 name.encode(), version.encode()),
             "%s-%s.dist-info/WHEEL" % (name, version): b"Wheel-Version: 1.0\nGenerator: test\n"
                                                        b"Root-Is-Purelib: true\nTag: py3-none-any\n"}
    record = "".join("%s,sha256=%s,%d\n" % (path, base64.urlsafe_b64encode(hashlib.sha256(data).digest())
                                            .rstrip(b"=").decode(), len(data)) for path, data in files.items())
    record += "%s-%s.dist-info/RECORD,,\n" % (name, version)
    path = folder / ("%s-%s-py3-none-any.whl" % (name, version))
    with zipfile.ZipFile(path, "w") as archive:
        for member, data in files.items():
            archive.writestr(member, data)
        archive.writestr("%s-%s.dist-info/RECORD" % (name, version), record)
    return path


@pytest.mark.parametrize(("lock", "message"), [
    ("tinylock==1.0\n", r"tinylock==1.0 has no --hash: every file pip may install must be hashed"),
    ("tinylock>=1.0 --hash=%s\n" % GOOD, r"'tinylock>=1.0' is not pinned to one version"),
    ("tinylock==1.0 --hash=md5:abc\n", r"tinylock==1.0 has a malformed hash --hash=md5:abc"),
    ("tinylock==1.0 --hash=%s --index-url=elsewhere\n" % GOOD, r"carries options other than --hash"),
    ("# nothing\n", r"lists no requirement"),
    ("tinylock==0.9 \\\n    --hash=%s\n" % GOOD, r"stale against pyproject.toml: tinylock==1.0 \(lock: 0.9\); run "
                                                  r"`python layers/lock.py`"),
])
def test_a_lock_that_is_not_exact_and_hashed_is_refused_before_pip_runs(lock: str, message: str) -> None:
    with pytest.raises(LockError, match=message):
        check_lock(lock, {"tinylock": "1.0"})


def test_the_layer_is_installed_with_require_hashes_from_the_lock_only(tmp_path: Path) -> None:
    lock = tmp_path / "requirements.lock"
    lock.write_text("tinylock==1.0 \\\n    --hash=%s\n" % GOOD)
    command = lambda_package.pip_command(tmp_path / "site", ["--platform", "manylinux_2_28_x86_64"],
                                lambda_package.locked_requirements(lock, {"tinylock": "1.0"}))
    assert command[-4:] == ["--require-hashes", "--no-deps", "-r", str(lock)]
    assert "--only-binary=:all:" in command and "--target" in command
    lock.write_text("tinylock==1.0\n")
    with pytest.raises(LockError, match="no --hash"):
        lambda_package.locked_requirements(lock, {"tinylock": "1.0"})


def _install(lock: Path, wheels: Path, site: Path) -> subprocess.CompletedProcess[str]:
    command = lambda_package.pip_command(site, ["--platform", "manylinux_2_28_x86_64"],
                                lambda_package.locked_requirements(lock, {"tinylock": "1.0"}))
    command += ["--no-index", "--find-links", str(wheels)]  # the folder is the index; nothing else is asked
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    return subprocess.run(command, capture_output=True, text=True, env={**environ, "PIP_CONFIG_FILE": os.devnull},
                          timeout=300)


def test_pip_installs_the_hashed_wheel_and_refuses_a_tampered_one(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    digest = hashlib.sha256(_wheel(wheels).read_bytes()).hexdigest()
    lock = tmp_path / "requirements.lock"
    lock.write_text("tinylock==1.0 \\\n    --hash=sha256:%s\n" % digest)
    done = _install(lock, wheels, tmp_path / "site")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "site" / "tinylock" / "__init__.py").is_file()
    tampered = digest[:-1] + ("0" if digest[-1] != "0" else "1")
    lock.write_text("tinylock==1.0 \\\n    --hash=sha256:%s\n" % tampered)
    refused = _install(lock, wheels, tmp_path / "site2")
    assert refused.returncode != 0 and "DO NOT MATCH THE HASHES" in refused.stderr, refused.stderr
    assert not (tmp_path / "site2" / "tinylock").exists()


def test_the_repository_s_lock_is_exact_hashed_and_agrees_with_pyproject() -> None:
    pins = runtime_pins()
    assert {"numpy", "boto3", "onnxruntime", "tokenizers"} <= set(pins)
    locked = check_lock(LOCK_FILE.read_text(), pins)
    assert all(hashes for _, _, hashes in locked)
    assert {name for name, _, _ in locked} >= set(pins)  # the transitive packages are pinned too
    assert {name for name, _, _ in locked} >= {"botocore", "pydantic", "starlette", "protobuf"}


def test_a_runtime_range_in_pyproject_is_refused(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\nname = "x"\ndependencies = ["numpy>=2.0,<3", "boto3==1.44.8"]\n')
    with pytest.raises(LockError, match=r"'numpy>=2.0,<3' is not pinned with ==; the layer's lock must be exact"):
        runtime_pins(pyproject)


def test_every_manifest_names_the_lock_s_sha256(tmp_path: Path) -> None:
    (tmp_path / "model.onnx").write_bytes(b"graph")
    path = write_manifest(tmp_path, {"target": "cpu-fp32"}, GateReport(target="cpu-fp32", tolerance=0.01), "0" * 64)
    import json

    runtime = json.loads(path.read_text())["runtime"]
    assert runtime == {"lock": "layers/requirements.lock", "sha256": lock_sha256()}
    assert len(runtime["sha256"]) == 64
