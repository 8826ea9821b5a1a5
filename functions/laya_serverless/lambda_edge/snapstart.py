"""SnapStart runtime hooks for the API function (registered only on Lambda).

- Before the snapshot: every deployed decider answers one small question, so the snapshot holds
  warmed ONNX Runtime sessions (their first run allocates and plans) and a filled tokenizer
  cache, not just loaded files. The artifacts themselves were fetched and verified at INIT.
- After a restore: what must not be shared between instances restored from one snapshot is made
  anew: Python's `random` state is reseeded from the OS, and the API key is read again from
  Secrets Manager (a key rotated since the snapshot is picked up; the old one stops working).
  uuid4 request ids come from os.urandom and need nothing. And the CPU's int8 kernel class is read again:
  restored on another class than INIT chose for, each checkpoint's artifact is chosen again for it
  (`assembly.reclass`), so an int8 artifact never serves where its gate did not run; if a checkpoint
  has nothing this class may serve, or only an artifact too large to fetch within the hooks' 10 s, the
  instance answers 503 saying why rather than serve it.
"""

from __future__ import annotations

import logging
import random
from typing import Any

from .. import observe
from ..artifact.cpu import cpu_profile
from ..artifact.store import ObjectStore, open_store
from ..assembly.loader import CpuReader
from ..assembly.reclass import RESTORE_FETCH_BUDGET, recheck_class
from ..errors import LayaError
from ..http.serving import Serving
from ..settings import DeploymentSettings, Settings
from .api_key import read_api_key

_log = logging.getLogger("laya_serverless")
WARM_STATE = "SnapStart warm-up: a short English sentence."
RESTORED_ELSEWHERE = ("restored on a CPU whose int8 kernels the deployed artifacts were not chosen for, and no "
                      "artifact proven for it could be served instead; try again later")
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


def recheck(serve: Serving, deployment: DeploymentSettings, store: ObjectStore | None = None,
            cpu: CpuReader = cpu_profile, fetch_budget: int = RESTORE_FETCH_BUDGET) -> None:
    """The CPU class read again, each checkpoint's artifact switched where INIT's choice does not hold here (from the
    process's `store`, else one opened from `deployment.store`)."""
    if serve.deployment is None or serve.deployment.served_on is None:  # nothing loaded, or assembled by hand
        return
    try:
        store = store if store is not None else open_store(deployment.store, parts=deployment.download_parts)
        recheck_class(serve.deployment, deployment, cpu(), store, fetch_budget)
    except Exception:  # whatever failed, never keep serving an int8 artifact whose gate missed this class
        _log.exception("after restore: the artifacts could not be chosen again for this CPU")
        observe.metric(observe.REFUSED_ARTIFACTS)
        serve.withdraw(RESTORED_ELSEWHERE)


def refresh(serve: Serving, settings: Settings, secrets_client: Any = None, store: ObjectStore | None = None,
            cpu: CpuReader = cpu_profile) -> None:
    """Reseed randomness, re-check the CPU class, and re-read the API key secret (when the key comes from one)."""
    random.seed()
    if settings.http.api_key_secret is not None:
        try:
            serve.rekey(read_api_key(settings.http.api_key_secret, secrets_client))
        except LayaError:  # keep the snapshot's key rather than fail every request of this instance
            _log.exception("after restore: the API key secret could not be read again; keeping the previous key")
    recheck(serve, settings.deployment, store, cpu)


def register(serve: Serving, settings: Settings, secrets_client: Any = None, store: ObjectStore | None = None) -> None:
    from snapshot_restore_py import register_after_restore, register_before_snapshot

    register_before_snapshot(warm, serve)
    register_after_restore(refresh, serve, settings, secrets_client, store, cpu_profile)
