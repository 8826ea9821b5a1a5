"""`laya-serverless serve` refuses what it cannot honour in one line naming what to fix: a bad variable, or a
deployment that cannot be loaded (locally that is a typo or a missing publish, not something to serve 503s for)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def _serve(environ: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    code = "from laya_serverless.local_edge.cli import main; raise SystemExit(main(['serve', *%r]))" % (list(args),)
    here = {name: os.environ[name] for name in ("PYTHONPATH",) if name in os.environ}  # this checkout's code
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "HOME": "/tmp", **here, **environ})


@pytest.mark.parametrize("environ, words", [
    ({"LAYA_JEV_STRICT": "ture"}, "invalid LAYA_JEV_STRICT 'ture': must be true or false"),
    ({"LAYA_THREADS": "100000"}, "invalid LAYA_THREADS '100000'"),
    ({"LAYA_API_KEY": "k3y\n"}, "invalid LAYA_API_KEY (value hidden)"),
    ({"LAYA_DEFAULT_MODEL": "french"}, "invalid LAYA_DEFAULT_MODEL 'french'"),
])
def test_a_refused_setting_is_one_line_naming_the_variable(environ: dict[str, str], words: str) -> None:
    done = _serve(environ)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert [line for line in done.stderr.splitlines() if line.strip()] == ["[laya-serverless] error: " +
                                                                           done.stderr.split("error: ", 1)[1].strip()]
    assert words in done.stderr


def test_serve_refuses_a_deployment_it_cannot_load_unless_told_to_serve_503s(tmp_path: Path) -> None:
    environ = {"LAYA_STORE": str(tmp_path / "empty-store"), "LAYA_CACHE_DIR": str(tmp_path / "cache"),
               "LAYA_JOBS_WORKERS": "0"}
    done = _serve(environ)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "the deployment cannot be served" in done.stderr and "LAYA_STORE" in done.stderr


def test_a_store_folder_that_does_not_exist_is_named(tmp_path: Path) -> None:
    done = _serve({"LAYA_STORE": str(tmp_path / "laya-stroe"), "LAYA_JOBS_WORKERS": "0"})
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1
    assert "error: the deployment cannot be served: the store folder %s does not exist" % (tmp_path / "laya-stroe") \
        in lines[0]


def test_a_taken_port_is_one_line_and_never_ready(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        done = _serve({"LAYA_STORE": str(tmp_path), "LAYA_JOBS_WORKERS": "0"}, "--allow-unavailable",
                      "--port", str(port))
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and "ready:" not in done.stderr
    assert lines == ["[laya-serverless] error: cannot listen on 127.0.0.1:%d: Address already in use (set LAYA_PORT "
                     "or --port)" % port]
