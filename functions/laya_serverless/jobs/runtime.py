"""A worker assembled from settings exactly as a serving process assembles its app (`assemble_deployment`)."""

from __future__ import annotations

from typing import Any

from ..artifact.store import open_store
from ..protocol.detect import analyse
from ..protocol.loader import assemble_deployment
from ..settings import Settings
from .worker import Worker


def load_worker(settings: Settings, s3_client: Any = None) -> Worker:
    """The worker over `settings.store`; when the artifacts cannot be loaded it still ends jobs (each shard it
    is asked to answer fails, and is given up as error lines once its retries are spent)."""
    assembled = assemble_deployment(settings, s3_client)
    return Worker(open_store(settings.store, s3_client=s3_client), assembled.deployment, settings,
                  assembled.registry, analyse, unavailable=assembled.unavailable)
