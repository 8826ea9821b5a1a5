"""What the transport asks of a batch-job service (`jobs.job_service.JobService` is the one built here).

`http/` and `jobs/` never import each other: the app's `/v1/jobs` routes are typed against this port,
and the entry points (`cli`, `handler`) hand the app a `JobService`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Protocol

from .routing import Registry

JobDoc = dict[str, Any]


class JobsPort(Protocol):
    def submit(self, body: Any, registry: Registry, deployed: Sequence[str],
               job_id: str | None = None, idempotency_key: str | None = None,
               deciders: Mapping[str, Any] | None = None) -> JobDoc:
        """Validate and store a job, start it, and answer its public document (202); the same
        `idempotency_key` and body within 24 h answer the same job."""

    def status(self, job_id: str) -> JobDoc: ...

    def results(self, job_id: str) -> Iterator[bytes]: ...

    def open(self) -> None: ...

    def close(self) -> None: ...
