"""`laya-artifacts probe`: the project's own Lambda package, run on an artifact under an emulated CPU.

    laya-artifacts probe --arch arm64 ARTIFACT --cases CASES.jsonl --out OUT.json [--cpu neoverse-n1]
    laya-artifacts probe --arch x86_64 --cpu haswell ARTIFACT --cases CASES.jsonl --out OUT.json

A pre-deploy check: the layer and function code exactly as `laya-artifacts package` built them for the
architecture (build/lambda/<arch>/), run by that runtime's CPython (arm64: the pinned aarch64 CPython 3.13 of
`laya-artifacts aarch64-python`; x86_64: the host's CPython 3.12) under qemu user-mode emulation of a CPU model
(`neoverse-n1` = Graviton2 by default on arm64, `haswell` = AVX2 without VNNI on x86_64). The CPU model
decides the int8 kernels ONNX Runtime picks, so the answers are those of that CPU class. Emulation is for
fidelity, never timing: it runs tens to hundreds of times slower than the real CPU.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from laya_artifacts.errors import ProbeError
from laya_artifacts.package.lambda_package import DEFAULT_ASSET_DIR, find_python
from laya_serverless.command import Command

DRIVER = Path(__file__).resolve().parent / "probe_driver.py"
EMULATED_PY = Path(__file__).resolve().parents[1] / "search" / "emulated.py"   # read as a file, not imported
ARCHES = ("x86_64", "arm64")
DEFAULT_CPUS = {"arm64": "neoverse-n1", "x86_64": "haswell"}
X86_QEMU = "qemu-x86_64-static"
# qemu's x86 model names are capitalized; users type them in any case.
_X86_MODELS = {"haswell": "Haswell", "skylake-client": "Skylake-Client", "skylake-server": "Skylake-Server",
               "icelake-server": "Icelake-Server", "cascadelake-server": "Cascadelake-Server",
               "sapphirerapids": "SapphireRapids", "epyc": "EPYC"}
FIDELITY_NOTE = "emulated for fidelity, never timing: these answers are the CPU class's, the speed is not"
_MARK = "laya-probe:"


@dataclass(frozen=True)
class Emulator:
    """How to run the `arch` package's CPython as the CPU model `cpu`."""

    arch: str
    cpu: str
    command: tuple[str, ...]

    def describe(self) -> str:
        return "%s -cpu %s" % (Path(self.command[0]).name, self.cpu)


def emulator_for(arch: str, cpu: str | None = None) -> Emulator:
    """The emulator of `arch`'s Lambda CPython as `cpu` (default: `DEFAULT_CPUS`); ProbeError when absent here."""
    if arch not in ARCHES:
        raise ProbeError("--arch must be one of %s, got %r" % (", ".join(ARCHES), arch))
    cpu = cpu or DEFAULT_CPUS[arch]
    if arch == "arm64":
        from laya_artifacts.package.aarch64_python import emulated_python

        command = emulated_python(cpu, fetch=shutil.which("qemu-aarch64-static") is not None)
        if command is None:
            raise ProbeError("arm64 needs qemu-aarch64-static (apt-get install qemu-user-static) and the pinned "
                             "aarch64 CPython (laya-artifacts aarch64-python)")
        return Emulator(arch, cpu, tuple(command))
    python = find_python(None, "3.12")
    if shutil.which(X86_QEMU) is None or python is None:
        raise ProbeError("x86_64 needs %s (apt-get install qemu-user-static) and a CPython 3.12 (the runtime "
                         "the x86_64 package is built for)" % X86_QEMU)
    model = _X86_MODELS.get(cpu.lower(), cpu)
    return Emulator(arch, model, (X86_QEMU, "-cpu", model, python))


def package_dirs(arch: str, asset_dir: Path = DEFAULT_ASSET_DIR) -> tuple[Path, Path]:
    """(layer site, function code) of the built `arch` package; ProbeError when it was not built."""
    layer, function = Path(asset_dir) / arch / "layer" / "python", Path(asset_dir) / arch / "function"
    if not (layer.is_dir() and (function / "laya_serverless").is_dir()):
        raise ProbeError("no %s Lambda package under %s: build it with `make layer ARCH=%s` "
                         "(laya-artifacts package --arch %s)" % (arch, asset_dir, arch, arch))
    return layer, function


def run_package(emulator: Emulator, package: tuple[Path, Path], mode: str, artifact: Path, *arguments: str,
                timeout_s: float = 1800) -> dict[str, Any]:
    """Run `package/probe_driver.py` MODE in the package under the emulator; its JSON result (ProbeError on failure)."""
    layer, function = package
    command = [*emulator.command, "-I", str(DRIVER), str(layer), str(function), mode, str(artifact), *arguments]
    try:
        run = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        raise ProbeError("the package under %s did not finish in %d s" % (emulator.describe(), timeout_s)) from exc
    found = [line[len(_MARK):] for line in run.stdout.splitlines() if line.startswith(_MARK)]
    if run.returncode != 0 or not found:
        tail = "\n".join(line for line in run.stderr.splitlines() if "TCG doesn't support" not in line)[-4000:]
        raise ProbeError("the %s package under %s failed (exit %d):\n%s"
                         % (emulator.arch, emulator.describe(), run.returncode, tail))
    result: dict[str, Any] = json.loads(found[-1])
    result["emulator"] = emulator.describe()
    return result


def probe(artifact: Path, cases: Path, arch: str = "arm64", cpu: str | None = None,
          asset_dir: Path = DEFAULT_ASSET_DIR, timeout_s: float = 1800) -> dict[str, Any]:
    """Each case of CASES.jsonl answered by the `arch` package under the emulated `cpu`, with what ran it:
    {"answers": {id: answer | {"error": message}}, "python", "emulator", "int8_kernels", "cpu"}."""
    package = package_dirs(arch, asset_dir)
    emulator = emulator_for(arch, cpu)
    return run_package(emulator, package, "answer", Path(artifact).resolve(), str(Path(cases).resolve()),
                       timeout_s=timeout_s)


def _say(message: str) -> None:
    print("[laya-artifacts] %s" % message, file=sys.stderr, flush=True)


def host_answers(artifact: Path, cases: Path) -> dict[str, Any]:
    """The same cases answered here, natively, by this checkout's runtime: what the emulated answers must match."""
    from laya_artifacts.package.probe_driver import _answer_cases
    from laya_serverless import Decider
    from laya_serverless.artifact.layout import MANIFEST_FILE

    decider = Decider.from_artifact(artifact, verify=(artifact / MANIFEST_FILE).exists(), threads=1)
    answers = _answer_cases(decider, cases.read_text(encoding="utf-8").splitlines())
    # as the emulated side's answers arrive: through JSON, so numeric and boolean labels are the same keys
    loaded: dict[str, Any] = json.loads(json.dumps(answers))
    return loaded


def tolerance_of(artifact: Path) -> float:
    """The gate tolerance of the artifact's target (its manifest's; cpu-fp32's without one)."""
    from laya_serverless.artifact.layout import MANIFEST_FILE
    from laya_serverless.artifact.targets import CPU_FP32, GATE_TOLERANCES

    manifest = artifact / MANIFEST_FILE
    raw = json.loads(manifest.read_text()) if manifest.is_file() else {}
    target = raw.get("target") or raw.get("configuration", {}).get("target") or CPU_FP32
    return GATE_TOLERANCES.get(target, GATE_TOLERANCES[CPU_FP32])


def differences(answers: dict[str, Any], reference: dict[str, Any], tolerance: float) -> list[str]:
    """Where the emulated answers leave the reference: another choice, a refusal on one side only, or an option or
    noul probability more than `tolerance` away."""
    found = []
    for key, want in reference.items():
        got = answers.get(key, {"error": "not answered"})
        if ("error" in want) or ("error" in got):
            if ("error" in want) != ("error" in got):
                found.append("%s: %s" % (key, got.get("error") or "answered, refused here: %s" % want["error"]))
            continue
        for qid, mine in want["answers"].items():
            theirs = got["answers"].get(qid, {})
            far = [abs(p - theirs.get("probabilities", {}).get(option, -1.0))
                   for option, p in mine.get("probabilities", {}).items()]
            far += [abs(mine["noul"] - theirs.get("noul", -1.0))] if "noul" in mine else []
            if mine.get("choice") != theirs.get("choice") or max(far, default=0.0) > tolerance:
                found.append("%s/%s: choice %s vs %s, |dp| %.3g over %g" % (
                    key, qid, theirs.get("choice"), mine.get("choice"), max(far, default=0.0), tolerance))
    return found


def run(artifact: str, cases: str, out: str, arch: str, cpu: str | None, asset_dir: str,
        say: Any = _say, reference: Any = host_answers) -> int:
    """The command: write OUT.json (id -> answer or {"error": ...}), say which CPython and CPU answered, and whether
    the answers match this machine's (the x86 build's) within the target's gate tolerance: 0 pass, 1 fail."""
    say("probe: %s" % FIDELITY_NOTE)
    result = probe(Path(artifact), Path(cases), arch, cpu, Path(asset_dir))
    Path(out).write_text(json.dumps(result["answers"], indent=1, sort_keys=True) + "\n", encoding="utf-8")
    errors = sum(1 for answer in result["answers"].values() if "error" in answer)
    say("probe: %d cases answered by the %s package on %s under %s (int8 kernel class %s); %d errors; wrote %s"
        % (len(result["answers"]), arch, result["python"], result["emulator"], result["int8_kernels"], errors, out))
    tolerance = tolerance_of(Path(artifact))
    found = differences(result["answers"], reference(Path(artifact), Path(cases)), tolerance)
    if found:
        say("probe: FAIL: %d answers differ from this machine's beyond |dp| %g: %s"
            % (len(found), tolerance, "; ".join(found[:5])))
        return 1
    say("probe: pass: every answer matches this machine's (same choices, |dp| <= %g)" % tolerance)
    return 0


def _command(args: argparse.Namespace) -> int:
    return run(args.artifact, args.cases, args.out, args.arch, args.cpu, args.asset_dir)  # ProbeError: cli.main


def _arguments(probe: argparse.ArgumentParser) -> None:
    probe.add_argument("artifact", help="an artifact directory (built, or published and fetched)")
    probe.add_argument("--arch", choices=ARCHES, default="arm64")
    probe.add_argument("--cpu", help="the qemu CPU model (default: %s)"
                       % ", ".join("%s for %s" % (cpu, arch) for arch, cpu in DEFAULT_CPUS.items()))
    probe.add_argument("--cases", required=True, help='JSON lines {"id", "state", "questions", "controls"}')
    probe.add_argument("--out", required=True, help='OUT.json: each case id -> the answer, or {"error": message}')
    probe.add_argument("--asset-dir", default=str(DEFAULT_ASSET_DIR),
                       help="where `laya-artifacts package` wrote <arch>/{layer,function}")


COMMAND = Command("probe", "answer cases with the built Lambda package of --arch under an emulated CPU (qemu user "
                  "mode): fidelity, never timing", _arguments, _command)
