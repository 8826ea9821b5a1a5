"""Powertools for AWS Lambda behind the Lambda entry point: JSON logs, EMF metrics, X-Ray subsegments.

- Logs: every `laya_serverless` record goes out as one Powertools JSON line with `service`,
  `cold_start`, the function's request id, the gateway's `correlation_id` and the client's
  `request_id` (x-typesafe-request-id). Events and bodies are never logged, nor is any header.
- Metrics (EMF, namespace `LayaServerless`): what `observe.metric` records, flushed after every
  invocation, with ColdStarts (1 on an instance's first invocation, restored snapshots included).
- Tracing: `observe.span`s become X-Ray subsegments. Spans of INIT (fetch, verify, session,
  warm) happen before any trace exists, so they are kept and written, with their own start and
  end times, into the first invocation's trace. Outside Lambda the tracer is disabled.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from contextlib import redirect_stdout
from typing import IO, Any, cast

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit

from .. import observe
from ..http.request_id import RequestIdFilter
from .api_events import classify

SERVICE = "laya-serverless"
NAMESPACE = "LayaServerless"
CORRELATION_PATH = "requestContext.requestId"  # REST and HTTP API events alike
Handler = Callable[[Any, Any], Any]
_MARK = "_laya_powertools"


def in_lambda(environ: Any = None) -> bool:
    return bool((os.environ if environ is None else environ).get("AWS_LAMBDA_FUNCTION_NAME"))


class PowertoolsBackend:
    """`observe.Backend` over Powertools' Metrics and Tracer."""

    def __init__(self, metrics: Metrics, tracer: Tracer, tracing: bool) -> None:
        self.metrics, self.tracer, self.tracing = metrics, tracer, tracing
        self.invoking = False
        self.pending: list[tuple[str, float, float, bool]] = []  # INIT spans, for the first trace

    def metric(self, name: str, value: float, unit: str) -> None:
        self.metrics.add_metric(name=name, unit=MetricUnit(unit), value=value)

    def span(self, name: str, started: float, ended: float, failed: bool) -> None:
        if not self.tracing:
            return
        if not self.invoking:
            self.pending.append((name, started, ended, failed))
            return
        self._write(name, started, ended, failed)

    def flush_pending(self) -> None:
        pending, self.pending = self.pending, []
        for name, started, ended, failed in pending:
            self._write("init." + name, started, ended, failed)

    def _write(self, name: str, started: float, ended: float, failed: bool) -> None:
        from aws_xray_sdk.core import xray_recorder

        subsegment = xray_recorder.begin_subsegment(name)
        if subsegment is None:
            return
        subsegment.start_time = started
        if failed:
            subsegment.add_fault_flag()
        xray_recorder.end_subsegment(end_time=ended)


class _Stderr:
    """Whatever `sys.stderr` is at the time of writing (a CLI or a test may swap it)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def structured_logs(lambda_runtime: bool) -> Logger:
    """The Powertools logger, its JSON handler also on the `laya_serverless` logger, with the request id filter.

    On Lambda the JSON line replaces the runtime's own (no propagation to its root handler); locally
    the lines go to stderr and still propagate, so `invoke`'s stdout stays the response."""
    logger = Logger(service=SERVICE, level=logging.INFO, stream=None if lambda_runtime else cast(IO[str], _Stderr()))
    ours = logging.getLogger("laya_serverless")
    for handler in [h for h in ours.handlers if getattr(h, _MARK, False)]:
        ours.removeHandler(handler)  # a second make_handler in one process replaces, never doubles
    for handler in logger.handlers:
        handler.addFilter(RequestIdFilter())
        setattr(handler, _MARK, True)
        ours.addHandler(handler)
    ours.setLevel(logging.INFO)
    if lambda_runtime:
        ours.propagate = False
    return logger


class Instrumentation:
    """Set up first (so INIT is observed), then `wrap` the handler: context in the logs, metrics flushed
    after every invocation, the invocation traced (on Lambda)."""

    def __init__(self, environ: Any = None) -> None:
        self.lambda_runtime = in_lambda(environ)
        self.logger = structured_logs(self.lambda_runtime)
        self.metrics = Metrics(namespace=NAMESPACE, service=SERVICE)
        self.tracer = Tracer(service=SERVICE, disabled=not self.lambda_runtime)
        self.backend = PowertoolsBackend(self.metrics, self.tracer, self.lambda_runtime)
        self.cold = True
        observe.install(self.backend)

    def wrap(self, handler: Handler) -> Handler:
        @self.logger.inject_lambda_context(correlation_id_path=CORRELATION_PATH, log_event=False, clear_state=True)
        @self.tracer.capture_lambda_handler(capture_response=False)
        def observed(event: Any, context: Any) -> Any:
            self.backend.invoking = True
            try:
                self.backend.flush_pending()
                if self.cold:
                    self.cold = False
                    observe.metric(observe.COLD_STARTS)
                observe.metric(observe.HTTP_EVENTS if classify(event).http else observe.UNSUPPORTED_EVENTS)
                return handler(event, context)
            finally:
                self.backend.invoking = False
                with redirect_stdout(sys.stdout if self.lambda_runtime else sys.stderr):
                    self.metrics.flush_metrics()  # EMF on stdout is what CloudWatch reads; locally stderr

        wrapped: Handler = observed
        return wrapped
