"""The emulated side of `laya-artifacts probe`: run by the Lambda package's own Python, on its own modules.

    PYTHON -I package/probe_driver.py LAYER FUNCTION MODE ARTIFACT [ARGS...]

LAYER and FUNCTION (build/lambda/<arch>/layer/python and .../function) go first on the path, as Lambda puts
them; nothing of the development tree is imported (`-I` keeps the environment and this file's folder out).
MODE:
- answer CASES.jsonl: each case answered by the runtime's `Decider` (`{"id": answer}` or `{"error": message}`);
- probabilities GOLDENS EMULATED_PY: each golden row's option and act probabilities (the int8 class check;
  EMULATED_PY is `laya_artifacts/search/emulated.py`, loaded on its own for its torch-free `class_probabilities`);
- gate GOLDENS TARGET: the package's torch-free gate (`laya_serverless.gate.replay.run_gate`) on GOLDENS, and,
  when it passes, the key the deploy-time gate would record it under (`gate.regate.record_gate`, into a scratch
  store).
It prints one line, MARK + JSON, with the CPython and CPU that ran it and the int8 class `/health` names.
"""

from __future__ import annotations

import sys
from typing import Any

MARK = "laya-probe:"
CONTROLS = ("max_len", "head_max_len", "min_confidence")


def _answer_cases(decider: Any, lines: list[str]) -> dict[str, Any]:
    import json

    from laya_serverless.errors import LayaError

    answers: dict[str, Any] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        case = json.loads(line)
        key = str(case.get("id", "line %d" % number))
        controls = case.get("controls") or {}
        unknown = sorted(set(controls) - set(CONTROLS))
        try:
            if unknown:
                raise ValueError("unknown controls %s (known: %s)" % (", ".join(unknown), ", ".join(CONTROLS)))
            answers[key] = decider.predict(case["state"], case["questions"],
                                           **{k: controls[k] for k in CONTROLS if k in controls})
        except (LayaError, ValueError, KeyError, TypeError) as exc:
            answers[key] = {"error": "%s: %s" % (type(exc).__name__, exc)}
    return answers


def _goldens(path: str) -> Any:
    """A goldens.json (as `laya_artifacts.goldens.record.write_goldens` wrote it; the build side is not packaged)."""
    import json

    return json.loads(open(path, encoding="utf-8").read())


def main(argv: list[str]) -> int:
    layer, function, mode, artifact, *rest = argv
    sys.path[:0] = [layer, function]
    import importlib.util
    import json
    import platform
    from pathlib import Path

    import laya_serverless.lambda_edge.api_handler  # noqa: F401  (the deployed entry point must import)
    from laya_serverless import Decider
    from laya_serverless.artifact.layout import MANIFEST_FILE
    from laya_serverless.artifact.platform import cpu_profile, int8_kernels
    from laya_serverless.http.devices import this_cpu_int8_kernels

    profile = cpu_profile()
    out: dict[str, Any] = {"python": "CPython %s %s" % (platform.python_version(), platform.machine()), "cpu": profile,
           "int8_kernels": int8_kernels(profile), "health_int8_kernels": this_cpu_int8_kernels()}
    path = Path(artifact)
    if mode == "gate":
        from laya_serverless.gate.replay import run_gate

        goldens, target = rest
        # repeat=False: bit-identical replay is not a property of the CPU class; the native gate checks it
        report = run_gate(path, _goldens(goldens), target, threads=1, repeat=False)
        out["report"] = report.as_dict()
        if report.passed:
            import tempfile

            from laya_serverless.artifact.store import LocalStore
            from laya_serverless.gate.regate import record_gate

            with tempfile.TemporaryDirectory() as scratch:
                out["gate_record_key"] = record_gate(LocalStore(Path(scratch)), "0" * 64, report)
    else:
        decider = Decider.from_artifact(path, verify=(path / MANIFEST_FILE).exists(), threads=1)
        if mode == "answer":
            out["answers"] = _answer_cases(decider, Path(rest[0]).read_text(encoding="utf-8").splitlines())
        elif mode == "probabilities":
            goldens, emulated_py = rest
            spec = importlib.util.spec_from_file_location("laya_probe_emulated", emulated_py)
            assert spec is not None and spec.loader is not None
            emulated = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(emulated)
            out["probabilities"] = emulated.class_probabilities(decider, _goldens(goldens)["rows"])
        else:
            raise SystemExit("unknown mode %r" % mode)
    print(MARK + json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
