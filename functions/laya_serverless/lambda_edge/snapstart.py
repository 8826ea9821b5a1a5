"""SnapStart runtime hooks for the API function (registered only on Lambda).

- Before the snapshot: every deployed decider answers one small question, so the snapshot holds
  warmed ONNX Runtime sessions (their first run allocates and plans) and a filled tokenizer
  cache, not just loaded files. The artifacts themselves were fetched and verified at INIT.
- After a restore: what must not be shared between instances restored from one snapshot is made
  anew: Python's `random` state is reseeded from the OS, and the API key is read again from
  Secrets Manager (a key rotated since the snapshot is picked up; the old one stops working).
  uuid4 request ids come from os.urandom and need nothing.
"""

from __future__ import annotations

import logging
import random
from typing import Any

from .. import observe
from ..errors import LayaError
from ..http.serving import Serving
from ..settings import Settings
from .api_key import read_api_key

_log = logging.getLogger("laya_serverless")
WARM_STATE = "SnapStart warm-up: a short English sentence."
WARM_QUESTIONS = {"warm": {"type": "noul", "instructions": "Is this a warm-up?"}}


def warm(serve: Serving) -> int:
    """Run one question through every deployed decider; the number warmed."""
    if serve.deployment is None:
        _log.warning("snapshot taken with no deployment to warm: %s", serve.unavailable)
        return 0
    for name, decider in serve.deployment.deciders.items():
        with observe.span(observe.WARM):
            decider.predict(WARM_STATE, WARM_QUESTIONS)
        _log.info("warmed %s before the snapshot", name)
    return len(serve.deployment.deciders)


def refresh(serve: Serving, settings: Settings, secrets_client: Any = None) -> None:
    """Reseed randomness and re-read the API key secret (when the key comes from one)."""
    random.seed()
    if settings.api_key_secret is None:
        return
    try:
        serve.rekey(read_api_key(settings.api_key_secret, secrets_client))
    except LayaError:  # keep the snapshot's key rather than fail every request of this instance
        _log.exception("after restore: the API key secret could not be read again; keeping the previous key")


def register(serve: Serving, settings: Settings, secrets_client: Any = None) -> None:
    from snapshot_restore_py import register_after_restore, register_before_snapshot

    register_before_snapshot(warm, serve)
    register_after_restore(refresh, serve, settings, secrets_client)
