"""`laya-artifacts probe` and the pinned aarch64 CPython: what they refuse and how they name what is missing."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from laya_artifacts.cli import main
from laya_artifacts.package import aarch64_python, probe
from laya_artifacts.search.arm64_classes import CLASS_CPUS


@pytest.mark.parametrize(("arch", "message"), [
    ("arm64", r"no arm64 Lambda package under .*: build it with `make layer ARCH=arm64`"),
    ("x86_64", r"no x86_64 Lambda package .*make layer ARCH=x86_64"),
])
def test_probe_without_a_built_package_says_how_to_build_it(tmp_path: Path, arch: str, message: str) -> None:
    with pytest.raises(probe.ProbeError, match=message):
        probe.probe(tmp_path, tmp_path / "cases.jsonl", arch, asset_dir=tmp_path)


def test_probe_refuses_an_unknown_arch() -> None:
    with pytest.raises(probe.ProbeError, match=r"--arch must be one of x86_64, arm64, got 'sparc'"):
        probe.emulator_for("sparc")


def test_the_command_fails_naming_the_missing_build(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["probe", str(tmp_path), "--cases", str(tmp_path / "c.jsonl"), "--out", str(tmp_path / "o.json"),
                 "--asset-dir", str(tmp_path)])
    said = capsys.readouterr().err
    assert code == 2 and "never timing" in said and "make layer ARCH=arm64" in said   # arm64 is the default
    assert not (tmp_path / "o.json").exists()


def test_x86_cpu_models_are_accepted_in_any_case() -> None:
    assert probe._X86_MODELS["haswell"] == "Haswell" and probe.DEFAULT_CPUS == {"arm64": "neoverse-n1",
                                                                                 "x86_64": "haswell"}


def test_every_arm_class_cpu_has_the_cpuinfo_a_graviton_would_show() -> None:
    for cpu in CLASS_CPUS.values():
        text = aarch64_python.cpuinfo_text(cpu)
        assert text.count("processor\t:") == aarch64_python.CPUINFO_PROCESSORS and "CPU implementer\t: 0x41" in text
    assert "asimddp" in aarch64_python.cpuinfo_text(CLASS_CPUS["arm64-dotprod"])
    assert " i8mm" in aarch64_python.cpuinfo_text(CLASS_CPUS["arm64-i8mm"])


def test_a_deb_is_fetched_once_and_refused_when_its_sha256_is_not_the_pin(tmp_path: Path) -> None:
    mirror, cache = tmp_path / "mirror", tmp_path / "cache"
    (mirror / "pool").mkdir(parents=True)
    cache.mkdir()
    (mirror / "pool" / "a.deb").write_bytes(b"the pinned bytes")
    pin = hashlib.sha256(b"the pinned bytes").hexdigest()
    got = aarch64_python.fetch_deb("pool/a.deb", pin, cache, mirror.as_uri())
    assert got.read_bytes() == b"the pinned bytes"
    (mirror / "pool" / "a.deb").write_bytes(b"changed upstream")   # the cache answers; the mirror is not asked
    assert aarch64_python.fetch_deb("pool/a.deb", pin, cache, mirror.as_uri()) == got
    got.unlink()
    with pytest.raises(RuntimeError, match=r"pool/a.deb has sha256 [0-9a-f]{64}, not the pinned %s: refused" % pin):
        aarch64_python.fetch_deb("pool/a.deb", pin, cache, mirror.as_uri())
    assert not list(cache.iterdir())   # nothing unpinned is left behind


def test_every_pin_is_a_debian_pool_path_with_a_sha256() -> None:
    for pool_path, sha256 in aarch64_python.DEBS:
        assert pool_path.startswith("pool/main/") and pool_path.endswith("_arm64.deb")
        assert len(sha256) == 64 and int(sha256, 16) >= 0
    assert any("python3.13-minimal_3.13.5" in pool_path for pool_path, _ in aarch64_python.DEBS)


def test_the_driver_and_the_emulated_module_it_loads_are_where_the_probe_looks() -> None:
    assert probe.DRIVER.is_file() and probe.EMULATED_PY.is_file()


def _answer(choice: str, p: float, noul: float = 0.5) -> dict:
    return {"answers": {"team": {"type": "choice", "choice": choice, "probabilities": {"a": p, "b": 1 - p}},
                        "churn": {"type": "noul", "noul": noul}}}


def test_emulated_answers_are_compared_with_this_machine_s_and_say_pass_or_fail(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    said: list[str] = []
    here = {"1": _answer("a", 0.9), "2": {"error": "QuestionError: too many options"}}

    def emulated(answers: dict) -> int:
        monkeypatch.setattr(probe, "probe", lambda *_a: {"answers": answers, "python": "CPython 3.13 aarch64",
                                                         "emulator": "qemu", "int8_kernels": "arm64-dotprod"})
        return probe.run(str(tmp_path), "c.jsonl", str(tmp_path / "o.json"), "arm64", None, str(tmp_path),
                         said.append, lambda _a, _c: here)

    assert emulated({"1": _answer("a", 0.90005), "2": {"error": "QuestionError: too many options"}}) == 0
    assert said[-1] == "probe: pass: every answer matches this machine's (same choices, |dp| <= 0.0001)"
    assert emulated({"1": _answer("b", 0.4), "2": {"error": "QuestionError: too many options"}}) == 1
    assert said[-1].startswith("probe: FAIL: 1 answers differ from this machine's beyond |dp| 0.0001: 1/team: "
                               "choice b vs a, |dp| 0.5 over 0.0001")


def test_the_files_the_package_loads_alone_import_no_build_side_at_their_top() -> None:
    """The Lambda package's probe runs `probe_driver.py` and loads `search/emulated.py` by path, where only the
    runtime is installed: a module-level `laya_artifacts` import there fails every emulated Arm class check."""
    import ast

    for path in (probe.DRIVER, probe.EMULATED_PY):
        top = [node for node in ast.parse(path.read_text(encoding="utf-8")).body
               if isinstance(node, ast.Import | ast.ImportFrom)]
        names = [n.module or "" for n in top if isinstance(n, ast.ImportFrom)] + [
            a.name for n in top if isinstance(n, ast.Import) for a in n.names]
        assert not [name for name in names if name.split(".")[0] == "laya_artifacts"], path
