"""A worker assembled from settings, as a serving process assembles its app: the deployed checkpoints
fetched and verified from the store, the same registry and detector the HTTP app routes with."""

from __future__ import annotations

import logging
from typing import Any

from ..artifact.store import open_store
from ..errors import ArtifactError
from ..http.deployment import Deployment
from ..http.detect import analyse
from ..http.routing import Registry
from ..http.service import UNAVAILABLE, load_deciders
from ..settings import Settings
from .worker import Worker

_log = logging.getLogger("laya_serverless")


def load_worker(settings: Settings, s3_client: Any = None) -> Worker:
    """The worker over `settings.store`; when the artifacts cannot be loaded it still ends jobs (each shard it
    is asked to answer fails, and is given up as error lines once its retries are spent)."""
    store = open_store(settings.store, s3_client=s3_client)
    try:
        loaded = load_deciders(settings, s3_client)
    except ArtifactError:
        _log.exception("cannot load the deployed artifacts from %s", settings.store)
        return Worker(store, None, settings, Registry(), analyse, unavailable=UNAVAILABLE)
    registry = Registry({name: name for name in loaded.deciders if name not in Registry().sources})
    deployment = Deployment(loaded.deciders, registry, settings.default_model, loaded.revisions,
                            target_fallbacks=loaded.fallbacks)
    return Worker(store, deployment, settings, registry, analyse)
