"""The built package run as Lambda runs it: the declared Python (3.12) with the real runtime interface client
(`awslambdaric`) against a Runtime API served here, in a private mount namespace where `/opt` (the layer),
`/var/task` (the function) and `/var/runtime` (the interface client) are read-only, `/tmp` is a 512 MB
tmpfs, and the rest of the filesystem is read-only too; in a memory cgroup (v1, or a delegated v2 group)
limited to the function's memory. `can_sandbox` says why a machine cannot do that (the tier then skips,
or fails on CI: `tests/prerequisites.py`).

The Runtime API is Lambda's, as the interface client speaks it: `invocation/next` (with the request id,
deadline and function ARN headers), `invocation/{id}/response|error`, `init/error`, and, for SnapStart
(`AWS_LAMBDA_INITIALIZATION_TYPE=snap-start`), `restore/next` (answered when the test "restores" the
snapshot) and `restore/error`.
"""

from __future__ import annotations

import glob
import json
import queue
import shutil
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from ..prerequisites import (
    MemoryCgroup,
    memory_cgroup,
    namespaces_needed,
    oom_kills,
    root_needed,
    x86_64_needed,
)

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "build" / "lambda"
TMP_SIZE_MB = 512  # Lambda's default ephemeral storage, and SnapStart's cap whatever is configured
_PREFIX = "/2018-06-01/runtime"


def find_python312() -> str | None:
    """The declared runtime's Python, as its real executable (a pyenv shim needs pyenv's environment)."""
    candidates = [shutil.which("python3.12"), *sorted(glob.glob(str(Path.home() / ".pyenv/versions/3.12*/bin/"
                                                                             "python3.12")))]
    for candidate in filter(None, candidates):
        done = subprocess.run([candidate, "-c", "import sys; print(sys.executable)"], capture_output=True, text=True)
        if done.returncode == 0 and done.stdout.strip():
            return done.stdout.strip()
    return None


def python312() -> str:
    found = find_python312()
    if found is None:
        raise AssertionError("no Python 3.12 (the stack's runtime) on this machine: install one, e.g. pyenv install "
                             "3.12")
    return found


def built(arch: str = "x86_64") -> Path:
    target = BUILD / arch
    missing = [p for p in ("layer/python", "function/laya_serverless", "runtime/awslambdaric")
               if not (target / p).is_dir()]
    assert not missing, "build/lambda/%s lacks %s: run `make layer ARCH=%s` first" % (arch, missing, arch)
    source = ROOT / "functions" / "laya_serverless"
    stale = [str(p.relative_to(source)) for p in source.rglob("*.py")
             if p.read_bytes() != (target / "function" / "laya_serverless" / p.relative_to(source)).read_bytes()]
    assert not stale, "build/lambda/%s is older than the source (%s): run `make layer`" % (arch, stale[:3])
    return target


@dataclass
class RuntimeRecord:
    """What the function did, in the order the Runtime API saw it."""

    calls: list[tuple[float, str]] = field(default_factory=list)
    responses: dict[str, Any] = field(default_factory=dict)
    errors: dict[str, Any] = field(default_factory=dict)
    init_error: Any = None
    restore_error: Any = None


class RuntimeAPI:
    """Lambda's Runtime API for one execution environment, on 127.0.0.1."""

    def __init__(self, function_arn: str) -> None:
        self.record = RuntimeRecord()
        self._events: queue.Queue[tuple[str, Any, float]] = queue.Queue()
        self._done: dict[str, threading.Event] = {}
        self._restore = threading.Event()
        self._arn = function_arn
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    @property
    def address(self) -> str:
        return "127.0.0.1:%d" % self._server.server_address[1]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def first_call(self, path: str) -> float | None:
        return next((t for t, p in self.record.calls if p.startswith(path)), None)

    def wait_for(self, path: str, timeout: float, process: subprocess.Popen[bytes] | None = None) -> float:
        """When `path` was first called; an AssertionError at `timeout`, or at once when `process` has exited."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.first_call(path)
            if found is not None or self.record.init_error is not None:
                return found if found is not None else -1.0
            if process is not None and process.poll() is not None:
                raise AssertionError("the function's process exited (%d) before calling %s" % (process.returncode,
                                                                                                path))
            time.sleep(0.02)
        raise AssertionError("the function never called %s within %gs; calls: %s" % (path, timeout, self.record.calls))

    def restore(self) -> None:
        """Let a SnapStart function's `restore/next` return: the snapshot was restored."""
        self._restore.set()

    def invoke(self, event: Any, timeout: float = 120.0, remaining_s: float = 300.0) -> tuple[str, Any]:
        """Deliver `event` with `remaining_s` of the invocation's time left (its deadline header); return
        ("response" | "error", payload) as the function reported it."""
        request_id = str(uuid.uuid4())
        self._done[request_id] = threading.Event()
        self._events.put((request_id, event, remaining_s))
        if not self._done[request_id].wait(timeout):
            raise AssertionError("no answer to invocation %s within %gs" % (request_id, timeout))
        if request_id in self.record.errors:
            return "error", self.record.errors[request_id]
        return "response", self.record.responses[request_id]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base class's name)
                pass

            def _reply(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
                self.send_response(status)
                for name, value in {"Content-Length": str(len(body)), **(headers or {})}.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

            def _body(self) -> Any:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    return json.loads(raw) if raw else None
                except ValueError:
                    return raw.decode("utf-8", "replace")

            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                path = self.path[len(_PREFIX):]
                api.record.calls.append((time.monotonic(), path))
                if path == "/invocation/next":
                    request_id, event, remaining_s = api._events.get()
                    deadline = int((time.time() + remaining_s) * 1000)
                    self._reply(200, json.dumps(event).encode(), {
                        "Lambda-Runtime-Aws-Request-Id": request_id, "Lambda-Runtime-Deadline-Ms": str(deadline),
                        "Lambda-Runtime-Invoked-Function-Arn": api._arn,
                        "Lambda-Runtime-Trace-Id": "Root=1-00000000-000000000000000000000000;Sampled=0",
                        "Content-Type": "application/json"})
                elif path == "/restore/next":
                    api._restore.wait()
                    self._reply(200)
                else:
                    self._reply(404)

            def do_POST(self) -> None:  # noqa: N802
                path = self.path[len(_PREFIX):]
                api.record.calls.append((time.monotonic(), path))
                body = self._body()
                parts = path.strip("/").split("/")
                if parts[0] == "invocation" and len(parts) == 3 and parts[2] in ("response", "error"):
                    target = api.record.responses if parts[2] == "response" else api.record.errors
                    target[parts[1]] = body
                    self._reply(202)
                    api._done[parts[1]].set()
                elif path == "/init/error":
                    api.record.init_error = body
                    self._reply(202)
                elif path == "/restore/error":
                    api.record.restore_error = body
                    self._reply(202)
                else:
                    self._reply(404)

        return Handler


class MemoryLimit:
    """A memory cgroup of `megabytes` for the function's process, on a v1 memory hierarchy or a delegated cgroup v2
    group (`prerequisites.memory_cgroup`): the limit is hard (no swap), its peak and its out-of-memory events are
    the cgroup's own, so the memory check can fail on either version."""

    def __init__(self, megabytes: int, where: MemoryCgroup | None = None) -> None:
        self.megabytes = megabytes
        found = memory_cgroup() if where is None else where
        if isinstance(found, str):
            raise AssertionError(found)
        self.version = found.version
        self.path = found.parent / ("laya-lambda-%s" % uuid.uuid4().hex[:8])
        self.path.mkdir()
        limit = str(megabytes * 2**20)
        if self.version == 1:
            (self.path / "memory.limit_in_bytes").write_text(limit)
            swap = self.path / "memory.memsw.limit_in_bytes"
            if swap.exists():
                swap.write_text(limit)
        else:
            (self.path / "memory.max").write_text(limit)
            if (self.path / "memory.swap.max").exists():
                (self.path / "memory.swap.max").write_text("0")

    def enter_command(self) -> str:
        return "echo $$ > %s/cgroup.procs && " % self.path

    def peak_mb(self) -> float:
        """The cgroup's peak (tmpfs /tmp included); on a v2 kernel without memory.peak (before 5.19), the current
        use, with `oom_killed` still saying whether the limit was hit."""
        names = ("memory.max_usage_in_bytes",) if self.version == 1 else ("memory.peak", "memory.current")
        source = next(self.path / n for n in names if (self.path / n).exists())
        return int(source.read_text()) / 2**20

    def oom_killed(self) -> bool:
        events = self.path / ("memory.oom_control" if self.version == 1 else "memory.events")
        return oom_kills(self.version, events.read_text()) > 0

    def close(self) -> None:
        for _ in range(50):
            try:
                self.path.rmdir()
                return
            except OSError:
                time.sleep(0.1)


def sandbox_script(package: Path, handler: str, memory: MemoryLimit) -> str:
    """The shell that builds the execution environment in its own mount namespace, then execs the runtime."""
    mounts = [("layer", "/opt"), ("function", "/var/task"), ("runtime", "/var/runtime")]
    lines = [memory.enter_command() + "set -e"]
    for part, where in mounts:
        lines += ["mkdir -p %s" % where, "mount --bind %s %s" % (package / part, where),
                  "mount -o remount,bind,ro %s" % where]
    lines += ["mount -t tmpfs -o size=%dm,mode=1777 tmpfs /tmp" % TMP_SIZE_MB,
              "mount -o remount,bind,ro /",
              # the environment as promised, or no run: the code and the rest of the filesystem read-only
              "for d in /var/task /opt /var/runtime / /root; do if touch $d/.laya-write-probe 2>/dev/null; then "
              "echo \"$d is writable\" >&2; exit 97; fi; done",
              "cd /var/task",
              "exec %s -m awslambdaric %s" % (python312(), handler)]
    return "\n".join(lines)


@dataclass
class ExecutionEnvironment:
    api: RuntimeAPI
    process: subprocess.Popen[bytes]
    memory: MemoryLimit
    started: float
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def init_seconds(self, snapstart: bool) -> float:
        first = self.api.wait_for("/restore/next" if snapstart else "/invocation/next", 600, self.process)
        assert self.api.record.init_error is None, "INIT failed: %s\n%s" % (self.api.record.init_error,
                                                                             self.log()[-4000:])
        return first - self.started

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(30)
        self.api.close()


def start(package: Path, handler: str, environ: dict[str, str], memory: MemoryLimit, log_path: Path,
          snapstart: bool = False) -> ExecutionEnvironment:
    """Start one execution environment of the function built in `package` (build/lambda/<arch>)."""
    arn = "arn:aws:lambda:us-east-1:123456789012:function:%s" % environ.get("AWS_LAMBDA_FUNCTION_NAME", "f")
    api = RuntimeAPI(arn)
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "TZ": ":UTC",
           "LAMBDA_TASK_ROOT": "/var/task", "LAMBDA_RUNTIME_DIR": "/var/runtime",
           "PYTHONPATH": "/var/runtime:/var/task:/opt/python", "_HANDLER": handler,
           "AWS_EXECUTION_ENV": "AWS_Lambda_python3.12", "AWS_LAMBDA_RUNTIME_API": api.address,
           "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(memory.megabytes), "AWS_LAMBDA_FUNCTION_VERSION": "1",
           "AWS_REGION": "us-east-1", "AWS_DEFAULT_REGION": "us-east-1", "HOME": "/tmp", **environ}
    if snapstart:
        env["AWS_LAMBDA_INITIALIZATION_TYPE"] = "snap-start"
    log = open(log_path, "wb")  # noqa: SIM115 (the process writes it for its whole life)
    started = time.monotonic()
    process = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                                sandbox_script(package, handler, memory)],
                               env=env, stdout=log, stderr=subprocess.STDOUT, cwd="/")
    log.close()
    return ExecutionEnvironment(api, process, memory, started, log_path)


def can_sandbox() -> str | None:
    """Why this machine cannot build the execution environment (None when it can): one line, the first reason."""
    for check in (x86_64_needed, root_needed, namespaces_needed):
        reason = check()
        if reason:
            return reason
    if find_python312() is None:
        return "no Python 3.12 (the stack's runtime) on this machine: install one, e.g. pyenv install 3.12"
    found = memory_cgroup()
    return found if isinstance(found, str) else None
