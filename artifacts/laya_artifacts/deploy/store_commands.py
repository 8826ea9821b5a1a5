"""`laya-artifacts publish | sign | keygen | rollback`: putting artifacts into a store and keeping it trustworthy."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


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


def _rollback(args: argparse.Namespace) -> int:
    from laya_artifacts.deploy.rollback import rollback
    from laya_serverless.artifact.store import open_store

    _, previous = rollback(open_store(args.store), args.checkpoint, args.target, _progress)
    print(previous)
    return 0


def add_publishing_commands(commands: argparse._SubParsersAction, targets: tuple[str, ...], store: str) -> None:
    """publish, and what keeps a store trustworthy: sign, keygen, rollback."""
    pub = commands.add_parser("publish", help="publish a built artifact to a store")
    pub.add_argument("artifact")
    pub.add_argument("--store", default=store)
    pub.add_argument("--sign-key", metavar="KEY", help="sign first: a KMS key ARN or a PEM private-key file")
    pub.set_defaults(run=_publish)
    sign = commands.add_parser("sign", help="sign a built artifact, or a published one (docs/artifacts.md#signatures)")
    sign.add_argument("artifact", nargs="?", help="an artifact directory (or --checkpoint and --store)")
    sign.add_argument("--key", required=True, help="a KMS key ARN (ECC_NIST_P256) or a PEM private-key file")
    sign.add_argument("--store", default=store)
    sign.add_argument("--checkpoint", help="sign what (CHECKPOINT, --target) points at in --store")
    sign.add_argument("--target", choices=targets, default=targets[0])
    sign.set_defaults(run=_sign)
    keygen = commands.add_parser("keygen", help="write a local P-256 signing key pair")
    keygen.add_argument("--out", default=".laya-keys", help="folder for the key pair (default %(default)s)")
    keygen.set_defaults(run=_keygen)
    back = commands.add_parser("rollback", help="point CHECKPOINT TARGET back at the artifact published before")
    back.add_argument("checkpoint")
    back.add_argument("target", choices=targets)
    back.add_argument("--store", default=store)
    back.set_defaults(run=_rollback)
