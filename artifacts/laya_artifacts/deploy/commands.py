"""`laya-artifacts deploy | publish | sign | keygen | rollback | verify | list | import`: putting artifacts into a
store, keeping it trustworthy, and deploying the API over it."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from laya_artifacts.paths import BUILD_CACHE
from laya_serverless.artifact.fetch import DEFAULT_CACHE_DIR
from laya_serverless.artifact.store import DEFAULT_LOCAL_STORE
from laya_serverless.artifact.targets import CPU_INT8, TARGETS
from laya_serverless.command import Command
from laya_serverless.settings import ARTIFACT_KEYS


def _progress(message: str) -> None:
    print("[laya-artifacts] %s" % message, file=sys.stderr, flush=True)


def _fail(message: str) -> int:
    _progress("error: %s" % message)
    return 2


def _publish(args: argparse.Namespace) -> int:
    from laya_artifacts.deploy.publish import publish
    from laya_artifacts.deploy.sign import open_signer
    from laya_serverless.artifact.store import open_store

    signer = open_signer(args.sign_key) if args.sign_key else None
    print(publish(Path(args.artifact), open_store(args.store), _progress, signer))
    return 0


def _sign(args: argparse.Namespace) -> int:
    from laya_artifacts.deploy.sign import open_signer, sign_artifact, sign_published
    from laya_serverless.artifact.fetch import published_id
    from laya_serverless.artifact.store import open_store

    signer = open_signer(args.key)
    if args.checkpoint:  # what is published (rotation: the new key's signature beside the old one's)
        store = open_store(args.store)
        artifact_id = published_id(store, args.checkpoint, args.target)
        added = sign_published(store, artifact_id, signer)
        print("%s %s with key %s" % ("signed" if added else "already signed:", artifact_id, signer.key_id))
    elif args.artifact:
        print(sign_artifact(Path(args.artifact), signer))
    else:
        return _fail("sign needs an artifact directory, or --checkpoint with --store")
    return 0


def _keygen(args: argparse.Namespace) -> int:
    from laya_artifacts.deploy.sign import generate_key

    private, public = generate_key(Path(args.out))
    _progress("private key %s (keep it off the serving machines); trust %s with LAYA_ARTIFACT_KEYS" % (private, public))
    print(public)
    return 0


def _keys(text: str | None) -> tuple[str, ...]:
    return tuple(filter(None, (k.strip() for k in (text or "").split(","))))


def _rollback(args: argparse.Namespace) -> int:
    from laya_artifacts.deploy.rollback import roll_forward, rollback
    from laya_artifacts.deploy.sign import open_signer
    from laya_serverless.artifact.store import open_store

    signer = open_signer(args.sign_key) if args.sign_key else None
    store, keys = open_store(args.store), _keys(args.trust)
    if args.forward:
        if args.to:
            return _fail("--forward goes to the artifact the last rollback passed over; it takes no --to")
        _, moved_to = roll_forward(store, args.checkpoint, args.target, _progress, expect_from=args.expect_from,
                                   keys=keys, signer=signer)
    else:
        _, moved_to = rollback(store, args.checkpoint, args.target, _progress, to=args.to,
                               expect_from=args.expect_from, keys=keys, signer=signer)
    print(moved_to)
    return 0


def _verify(args: argparse.Namespace) -> int:
    from laya_serverless.artifact.fetch import fetch_published
    from laya_serverless.artifact.manifest import verify_artifact
    from laya_serverless.artifact.store import open_store

    if args.checkpoint:
        store = open_store(args.store)
        artifact_id, path, _ = fetch_published(store, args.checkpoint, args.target, Path(args.cache_dir))
        if args.key:  # and vouched for by one of these keys (what LAYA_ARTIFACT_KEYS makes the runtime require)
            from laya_serverless.artifact.signature import trusted_keys, verify_signed

            signer = verify_signed(store, artifact_id, trusted_keys(args.key))
            print("signature by key %s verified" % signer)
        print("verified %s/%s -> %s (%s)" % (args.checkpoint, args.target, artifact_id, path))
    else:
        manifest = verify_artifact(Path(args.store))
        print("verified %s: %d files" % (args.store, len(manifest.files)))
    return 0


def _list(args: argparse.Namespace) -> int:
    from laya_serverless.artifact.store import open_store

    store = open_store(args.store)
    for key in store.list("pointers/"):
        found = store.read(key)
        if found:
            record = json.loads(found[0])
            print("%s\t%s\t%s" % (record["checkpoint"], record["target"], record["artifact"]))
            if args.history:
                from laya_artifacts.deploy.rollback import history_rows

                print("\n".join(history_rows(store, record["checkpoint"], record["target"], _keys(args.trust))))
    return 0


def _import(args: argparse.Namespace) -> int:
    from laya_artifacts.deploy.publish import import_artifact
    from laya_artifacts.goldens.record import load_goldens
    from laya_serverless.artifact.store import open_store

    artifact_id, _ = import_artifact(open_store(args.source), args.checkpoint, args.target,
                                     load_goldens(Path(args.goldens)), open_store(args.store),
                                     Path(args.cache_dir), _progress)
    print(artifact_id)
    return 0


def _context_flag(text: str) -> tuple[str, str]:
    key, equals, value = text.partition("=")
    if not equals or not key.strip():
        raise argparse.ArgumentTypeError("-c takes KEY=VALUE, as cdk does (got %r)" % text)
    return key.strip(), value


def _deploy(args: argparse.Namespace) -> int:
    from laya_artifacts.deploy.command import Request, aws_seams, deploy

    request = Request(checkpoints=tuple(args.checkpoint) if args.checkpoint else None,
                      artifacts=tuple(Path(a) for a in args.artifact), targets=tuple(args.targets.split(",")),
                      context=dict(args.context), cdk_args=tuple(args.cdk_args), cache=Path(args.cache),
                      revision=args.revision)
    print(deploy(request, aws_seams(), _progress).url)
    return 0


def _deploy_arguments(deploy: argparse.ArgumentParser) -> None:
    deploy.add_argument("--checkpoint", action="append", metavar="SOURCE",
                        help="demo (the default), a local checkpoint directory or a Hugging Face id; repeatable")
    deploy.add_argument("--revision", help="the Hugging Face checkpoint's branch, tag or commit (one --checkpoint); "
                                           "default main, recorded as the commit it resolves to")
    deploy.add_argument("--artifact", action="append", default=[], metavar="DIR",
                        help="an artifact already built (and gated): published as it is; repeatable")
    deploy.add_argument("--targets", default="cpu-int8,cpu-fp32", metavar="T[,T]",
                        help="targets to build (default %(default)s; cpu-fp32 always; cpu-fp32 alone skips the "
                             "int8 precision search, which the demo's gate refuses)")
    deploy.add_argument("-c", "--context", action="append", default=[], type=_context_flag, metavar="KEY=VALUE",
                        help="CDK context for the stack (docs/deploy.md#cdk-context-flags); repeatable")
    deploy.add_argument("--cache", default=str(BUILD_CACHE), help="where checkpoints, goldens and artifacts are built")
    deploy.add_argument("cdk_args", nargs="*", metavar="-- CDK_ARG",
                        help="after --: passed to `cdk deploy` as they are (e.g. -- --profile prod)")


def _publish_arguments(pub: argparse.ArgumentParser) -> None:
    pub.add_argument("artifact")
    pub.add_argument("--store", default=DEFAULT_LOCAL_STORE)
    pub.add_argument("--sign-key", metavar="KEY", help="sign first: a KMS key ARN or a PEM private-key file")


def _sign_arguments(sign: argparse.ArgumentParser) -> None:
    sign.add_argument("artifact", nargs="?", help="an artifact directory (or --checkpoint and --store)")
    sign.add_argument("--key", required=True, help="a KMS key ARN (ECC_NIST_P256) or a PEM private-key file")
    sign.add_argument("--store", default=DEFAULT_LOCAL_STORE)
    sign.add_argument("--checkpoint", help="sign what (CHECKPOINT, --target) points at in --store")
    sign.add_argument("--target", choices=TARGETS, default=TARGETS[0])


def _keygen_arguments(keygen: argparse.ArgumentParser) -> None:
    keygen.add_argument("--out", default=".laya-keys", help="folder for the key pair (default %(default)s)")


def _rollback_arguments(back: argparse.ArgumentParser) -> None:
    back.add_argument("checkpoint")
    back.add_argument("target", choices=TARGETS)
    back.add_argument("--store", default=DEFAULT_LOCAL_STORE)
    back.add_argument("--to", metavar="ID", help="an artifact of the history (`laya-artifacts list`), not the previous")
    back.add_argument("--from", dest="expect_from", metavar="ID",
                      help="only if the pointer still names ID (a retry never goes a second step back)")
    back.add_argument("--forward", action="store_true", help="undo the last rollback")
    back.add_argument("--trust", metavar="KEYS", default=os.environ.get(ARTIFACT_KEYS),
                      help="the deployment's %s (default: that variable); the destination must verify" % ARTIFACT_KEYS)
    back.add_argument("--sign-key", metavar="KEY", help="sign the release record (needed where signing is on)")


def _verify_arguments(verify: argparse.ArgumentParser) -> None:
    verify.add_argument("store", help="an artifact directory, or a store with --checkpoint")
    verify.add_argument("--checkpoint")
    verify.add_argument("--target", choices=TARGETS, default=CPU_INT8)
    verify.add_argument("--cache-dir", default=str(DEFAULT_CACHE_DIR))
    verify.add_argument("--key", action="append", metavar="KEY",
                        help="with --checkpoint: require a signature by this key (KMS key ARN or PEM public key)")


def _list_arguments(listing: argparse.ArgumentParser) -> None:
    listing.add_argument("--store", default=DEFAULT_LOCAL_STORE)
    listing.add_argument("--history", action="store_true",
                         help="each pointer's history and roll-forward: dates, gate verdict, signature state")
    listing.add_argument("--trust", metavar="KEYS", help="check signatures against these keys (%s)" % ARTIFACT_KEYS)


def _import_arguments(imp: argparse.ArgumentParser) -> None:
    imp.add_argument("source", help="store URI to import from")
    imp.add_argument("--checkpoint", required=True)
    imp.add_argument("--target", choices=TARGETS, default=CPU_INT8)
    imp.add_argument("--goldens", required=True)
    imp.add_argument("--store", default=DEFAULT_LOCAL_STORE, help="store to publish into")
    imp.add_argument("--cache-dir", default=str(DEFAULT_CACHE_DIR))


COMMANDS = (
    Command("publish", "publish a built artifact to a store", _publish_arguments, _publish),
    Command("sign", "sign a built artifact, or a published one (docs/artifacts.md#signatures)", _sign_arguments, _sign),
    Command("keygen", "write a local P-256 signing key pair", _keygen_arguments, _keygen),
    Command("rollback", "point CHECKPOINT TARGET back at the artifact published before (or forward again); "
            "docs/operations.md#roll-back-and-forward", _rollback_arguments, _rollback),
    Command("verify", "verify an artifact directory, or a published one", _verify_arguments, _verify),
    Command("list", "list published (checkpoint, target, artifact)", _list_arguments, _list),
    Command("import", "fetch an artifact built elsewhere, re-gate it here, publish it", _import_arguments, _import),
    Command("deploy", "build, gate and publish the checkpoints, cdk deploy the stack, smoke-test the API "
            "(docs/deploy.md)", _deploy_arguments, _deploy),
)
