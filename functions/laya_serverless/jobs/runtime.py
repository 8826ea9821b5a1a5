"""A worker assembled from settings exactly as a serving process assembles its app (`assemble_deployment`)."""

from __future__ import annotations

from ..artifact.store import ObjectStore
from ..assembly.loader import assemble_deployment
from ..protocol.detect import analyse
from ..settings import Settings
from .worker import Worker


def load_worker(settings: Settings, store: ObjectStore | None = None) -> Worker:
    """The worker over the deployment's store; when the artifacts cannot be loaded it still ends jobs (each shard it
    is asked to answer fails, and is given up as error lines once its retries are spent)."""
    assembled = assemble_deployment(settings.deployment, store, processes=settings.jobs.local_processes)
    return Worker(assembled.store, assembled.deployment, settings.protocol, settings.limits, assembled.registry,
                  analyse, unavailable=assembled.unavailable)
