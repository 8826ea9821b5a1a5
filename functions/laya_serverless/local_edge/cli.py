"""`laya-serverless`: what `sam local` users expect, without Docker or an AWS account.

    laya-serverless serve                 the app on uvicorn (LAYA_HOST/LAYA_PORT, default 127.0.0.1:8000)
    laya-serverless invoke --event FILE   the real Lambda handler on an API Gateway event; prints its response
    laya-serverless job ...               batch jobs: submit | status | results (a server), run (this machine)
    laya-serverless start-api             an HTTP front that turns each request into an API Gateway event for
                                          the real handler, like `sam local start-api`: REST API (payload 1.0,
                                          what the stack deploys) by default, `--payload v2` for HTTP API events
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..command import Command, register
from ..errors import SettingsError
from ..settings import DEPLOYED, PORT, STORE, TARGET, LocalServerSettings, Settings
from . import job_commands
from .start_api import LOCAL_HOST, PAYLOAD_VERSIONS, ApiGatewayFront, lambda_context


def _say(message: str) -> None:
    print("[laya-serverless] %s" % message, file=sys.stderr, flush=True)


def _address(args: argparse.Namespace, local_server: LocalServerSettings) -> tuple[str, int]:
    return args.host or local_server.host or LOCAL_HOST, args.port or local_server.port


def served(app: Any) -> str:
    """What a loaded app serves, one entry per name: `english=demo/cpu-fp32 (no cpu-int8 artifact is published...)`."""
    deployment = app.state.serving.deployment
    chosen = deployment.served_on.artifacts if deployment and deployment.served_on else {}
    return ", ".join("%s=%s/%s%s" % (name, stored, target, "".join(
        " (%s)" % why["reason"] for why in [deployment.target_fallbacks.get(name)] if why))
        for name, (stored, _artifact, target) in chosen.items())


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from ..artifact.store import open_store
    from ..http.service import LOAD_REFUSAL_STATE, build_service
    from .jobs_engine import local_jobs
    from .server import uvicorn_config

    settings = Settings.from_environ(getattr(args, "environ", None))
    host, port = _address(args, settings.local_server)
    # The process's one store: the app and the jobs engine share it.
    store = open_store(settings.deployment.store, parts=settings.deployment.download_parts)
    app = build_service(settings, store, jobs=local_jobs(settings, store), log_refusal=False)
    unavailable = app.state.serving.unavailable
    refused = unavailable and (getattr(app.state, LOAD_REFUSAL_STATE) or unavailable)  # the detail, paths included
    if refused and not args.allow_unavailable:
        # Locally a deployment that cannot load is a typo or a missing publish: say so rather than serve 503s.
        _say("error: the deployment cannot be served: %s (check %s, %s and %s; --allow-unavailable serves 503s)"
             % (refused, STORE, DEPLOYED, TARGET))
        return 2
    sock = _listening(host, port)
    if sock is None:
        return 2
    _say("ready: http://%s:%d  (store %s, %s)" % (
        host, port, settings.deployment.store, served(app) if not refused else "serving 503s: %s" % refused))
    uvicorn.Server(uvicorn_config(app, settings.local_server, host, port)).run(sockets=[sock])
    return 0


def _invoke(args: argparse.Namespace) -> int:
    from ..lambda_edge.api_handler import make_handler

    try:
        event = json.loads(Path(args.event).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        _say("error: cannot read the event %s: %s" % (args.event, exc))
        return 2
    response = make_handler()(event, lambda_context())
    print(json.dumps(response, ensure_ascii=False, indent=2))
    status = response.get("statusCode") if isinstance(response, dict) else None
    if isinstance(status, int) and status >= 500:  # a scripted `invoke` must not pass on a 503
        _say("error: the handler answered %d: %s" % (status, _detail(response)))
        return 1
    return 0


def _detail(response: dict[str, Any]) -> str:
    """A response body's `detail`, or its first 200 characters."""
    body = response.get("body") or ""
    try:
        detail = json.loads(body).get("detail") if not response.get("isBase64Encoded") else None
    except (ValueError, AttributeError):
        detail = None
    return str(detail) if detail is not None else str(body)[:200]


def _start_api(args: argparse.Namespace) -> int:
    import uvicorn

    from ..lambda_edge.api_handler import make_handler
    from .server import uvicorn_config

    settings = Settings.from_environ(getattr(args, "environ", None))
    host, port = _address(args, settings.local_server)
    sock = _listening(host, port)
    if sock is None:
        return 2
    front = ApiGatewayFront(make_handler(), payload=args.payload, api_key=settings.http.api_key,
                            body_timeout=settings.limits.body_read_timeout)
    _say("ready: http://%s:%d  (each request runs the Lambda handler on an API Gateway %s event)"
         % (host, port, "REST API (payload 1.0)" if args.payload == "v1" else "HTTP API (payload 2.0)"))
    try:
        uvicorn.Server(uvicorn_config(front, settings.local_server, host, port)).run(sockets=[sock])
    finally:
        front.close()
    return 0


def _listening(host: str, port: int) -> socket.socket | None:
    """The bound socket `ready:` may be said after, or None once a taken port is said in one line."""
    from .server import listening_socket

    try:
        return listening_socket(host, port)
    except OSError as exc:
        why = os.strerror(exc.errno) if exc.errno else str(exc)
        _say("error: cannot listen on %s:%d: %s (set %s or --port)" % (host, port, why, PORT))
        return None


def _address_arguments(command: argparse.ArgumentParser) -> None:
    command.add_argument("--host", help="bind address (default LAYA_HOST or 127.0.0.1)")
    command.add_argument("--port", type=int, help="port (default LAYA_PORT or 8000)")


def _serve_arguments(serve: argparse.ArgumentParser) -> None:
    _address_arguments(serve)
    serve.add_argument("--allow-unavailable", action="store_true",
                       help="serve 503s (ready: false) when the deployment cannot be loaded, as Lambda does")


def _start_api_arguments(start_api: argparse.ArgumentParser) -> None:
    _address_arguments(start_api)
    start_api.add_argument("--payload", choices=PAYLOAD_VERSIONS, default="v1",
                           help="API Gateway event format: v1 REST API (default, as deployed) or v2 HTTP API")


def _invoke_arguments(invoke: argparse.ArgumentParser) -> None:
    invoke.add_argument("--event", required=True, help="an API Gateway event (v1 REST or v2 HTTP API) as JSON")


COMMANDS = (
    Command("serve", "serve the app with uvicorn", _serve_arguments, _serve),
    Command("start-api", "an HTTP front over the Lambda handler", _start_api_arguments, _start_api),
    Command("invoke", "run the Lambda handler on one API Gateway event", _invoke_arguments, _invoke),
    job_commands.COMMAND,
)


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="laya-serverless", description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    register(root.add_subparsers(dest="command", required=True), COMMANDS)
    return root


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    """`environ`: the configuration to serve with instead of this process's environment (a caller that
    configures the server passes it here rather than writing `os.environ`)."""
    args = parser().parse_args(argv)
    args.environ = environ
    try:
        return int(args.run(args))
    except (SettingsError, job_commands.JobInputError) as exc:  # a refused setting or file: one line, no traceback
        _say("error: %s" % exc)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
