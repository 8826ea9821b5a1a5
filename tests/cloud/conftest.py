"""The stack's own permissions, enforced: each function's real code runs with credentials carrying exactly
the policy documents the synthesized template gives its role, under moto's IAM enforcement.

How: the template is synthesized once (the infra tier's fixture); a role's `AWS::IAM::Policy` statements
are resolved to this test's bucket (`Fn::GetAtt`/`Ref`/`Fn::Join`); moto creates the role with them and
STS assumes it *before* enforcement starts (moto cannot evaluate the Lambda service principal CDK
writes as the trust policy), then every call made with those credentials is checked.

Where moto's S3 differs from S3, S3's documented behaviour is encoded here: without `s3:ListBucket` on a
prefix, S3 answers 403 (not 404) for a missing key there, and moto answers 404 whatever the policy
says, and ignores `Condition` blocks (`s3:prefix`). `S3AsDocumented` turns a 404 into the 403 S3 would
give when the role's policy has no matching ListBucket statement (its `s3:prefix` condition evaluated).
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from ..infra.conftest import asset_dir, synth  # noqa: F401  (the synthesized template, once per module)

REGION, ACCOUNT = "us-east-1", "123456789012"
BUCKET = "laya-cloud-tier"


def resolve(value: Any, bucket_ids: set[str], known: dict[str, str] | None = None) -> Any:
    """A template value with the stack's bucket (any of `bucket_ids`) resolved to `BUCKET`, and the
    `Ref`/`Fn::GetAtt` of each logical id in `known` to its value there (`"Id"` or `"Id.Attribute"`)."""
    known = known or {}
    if isinstance(value, list):
        return [resolve(v, bucket_ids, known) for v in value]
    if not isinstance(value, dict):
        return value
    if set(value) == {"Fn::Join"}:
        sep, parts = value["Fn::Join"]
        return sep.join(str(resolve(p, bucket_ids, known)) for p in parts)
    if set(value) == {"Fn::GetAtt"}:
        logical_id, attribute = value["Fn::GetAtt"][:2]
        if logical_id in bucket_ids and attribute == "Arn":
            return "arn:aws:s3:::%s" % BUCKET
        # a log group, queue, function...: a placeholder unless the test named it
        return known.get("%s.%s" % (logical_id, attribute), _placeholder(logical_id))
    if set(value) == {"Ref"}:
        ref = value["Ref"]
        pseudo = {"AWS::Partition": "aws", "AWS::Region": REGION, "AWS::AccountId": ACCOUNT,
                  "AWS::URLSuffix": "amazonaws.com"}
        return pseudo.get(ref, BUCKET if ref in bucket_ids else known.get(ref, _placeholder(ref)))
    return {k: resolve(v, bucket_ids, known) for k, v in value.items()}


def _placeholder(logical_id: str) -> str:
    return "arn:aws:cloudformation:%s:%s:stack/resource/%s" % (REGION, ACCOUNT, logical_id)


def bucket_ids(template: dict[str, Any]) -> set[str]:
    return {lid for lid, r in template["Resources"].items() if r["Type"] == "AWS::S3::Bucket"}


def role_statements(template: dict[str, Any], role_id: str,
                    known: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Every statement the template's `AWS::IAM::Policy` resources attach to `role_id`, resolved."""
    found = []
    for resource in template["Resources"].values():
        if resource["Type"] == "AWS::IAM::Policy" and {"Ref": role_id} in resource["Properties"]["Roles"]:
            found.extend(resource["Properties"]["PolicyDocument"]["Statement"])
    return resolve(found, bucket_ids(template), known)


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def allows(statements: list[dict[str, Any]], action: str, resource: str) -> bool:
    """Whether an Allow statement grants `action` on `resource` (no Deny in our policies; no conditions). For
    the services whose resource-level checks moto does not enforce (it matches only `"*"` outside S3 and SQS)."""
    return any(st.get("Effect") == "Allow"
               and any(fnmatch.fnmatchcase(action, a) for a in _as_list(st["Action"]))
               and any(fnmatch.fnmatchcase(resource, r) for r in _as_list(st["Resource"])) for st in statements)


def function_with_handler(template: dict[str, Any], handler: str) -> dict[str, Any]:
    matches = [r["Properties"] for r in template["Resources"].values()
               if r["Type"] == "AWS::Lambda::Function" and r["Properties"].get("Handler") == handler]
    assert len(matches) == 1, "expected one function with handler %s, found %d" % (handler, len(matches))
    return matches[0]


def function_environment(template: dict[str, Any], function: dict[str, Any]) -> dict[str, str]:
    raw = (function.get("Environment") or {}).get("Variables") or {}
    return {k: str(resolve(v, bucket_ids(template))) for k, v in raw.items()}


@contextmanager
def as_role(statements: list[dict[str, Any]], name: str = "under-test") -> Iterator[Any]:
    """A boto3 session holding credentials of a moto role carrying exactly `statements`, with IAM enforced."""
    from moto.core import enable_iam_authentication

    session = role_session(statements, name)
    with enable_iam_authentication():
        yield session


def role_session(statements: list[dict[str, Any]], name: str) -> Any:
    """A boto3 session for a moto role carrying exactly `statements` (created and assumed unenforced)."""
    iam = boto3.client("iam", region_name=REGION)
    trust = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"AWS": "*"},
                                                      "Action": "sts:AssumeRole"}]}
    role = iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(trust))["Role"]
    iam.put_role_policy(RoleName=name, PolicyName="template",
                        PolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": statements}))
    creds = boto3.client("sts", region_name=REGION).assume_role(RoleArn=role["Arn"], RoleSessionName="cloud-tier")
    return boto3.Session(aws_access_key_id=creds["Credentials"]["AccessKeyId"],
                         aws_secret_access_key=creds["Credentials"]["SecretAccessKey"],
                         aws_session_token=creds["Credentials"]["SessionToken"], region_name=REGION)


def lists(statements: list[dict[str, Any]], key: str) -> bool:
    """Whether `statements` allow s3:ListBucket on BUCKET for a listing that would show `key`."""
    for st in statements:
        actions = st["Action"] if isinstance(st["Action"], list) else [st["Action"]]
        resources = st["Resource"] if isinstance(st["Resource"], list) else [st["Resource"]]
        if st.get("Effect") != "Allow" or not any(fnmatch.fnmatchcase("s3:ListBucket", a) for a in actions):
            continue
        if not any(fnmatch.fnmatchcase("arn:aws:s3:::%s" % BUCKET, r) for r in resources):
            continue
        prefixes = ((st.get("Condition") or {}).get("StringLike") or {}).get("s3:prefix")
        if prefixes is None or any(fnmatch.fnmatchcase(key, p) for p in
                                   (prefixes if isinstance(prefixes, list) else [prefixes])):
            return True
    return False


class S3AsDocumented:
    """An S3 client whose GetObject/HeadObject answer a missing key as S3 does for this role (see module)."""

    def __init__(self, client: Any, statements: list[dict[str, Any]]) -> None:
        self._client, self._statements = client, statements
        self.denied_absences: list[str] = []
        self.read_keys: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def _call(self, method: str, **kwargs: Any) -> Any:
        self.read_keys.append(kwargs["Key"])
        try:
            return getattr(self._client, method)(**kwargs)
        except ClientError as exc:
            missing = exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404")
            if missing and not lists(self._statements, kwargs["Key"]):
                self.denied_absences.append(kwargs["Key"])
                raise ClientError({"Error": {"Code": "AccessDenied", "Message": "Access Denied"},
                                   "ResponseMetadata": {"HTTPStatusCode": 403}}, method) from exc
            raise

    def get_object(self, **kwargs: Any) -> Any:
        return self._call("get_object", **kwargs)

    def head_object(self, **kwargs: Any) -> Any:
        return self._call("head_object", **kwargs)


def _shortest_case_of_each_split() -> list[dict[str, Any]]:
    from laya_artifacts.goldens.corpus import builtin_cases

    def size(case: dict[str, Any]) -> int:
        return len(json.dumps(case["state"])) + len(json.dumps(case["questions"]))

    cases = builtin_cases()
    return [min((c for c in cases if c["split"] == split), key=size) for split in ("selection", "confirmation")]


@pytest.fixture(scope="session")
def modernbert_base(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(checkpoint, goldens) of a random checkpoint shaped like ModernBERT-base (~150M parameters, a 626 MiB FP32
    graph: larger than /tmp, yet smaller than the published checkpoints, ModernBERT-large at 421.3M and mmBERT-base
    at 322M, whose FP32 graphs are 1,607 and 1,228 MiB; docs/deploy.md#memory), its corpus the built-in one's
    shortest case of each split only (longer cases cost seconds a forward pass at this shape, docs/testing.md): what
    the artifacts built from it prove is size, not fidelity (the tiny and MiniLM checkpoints carry the full gate)."""
    from laya_artifacts.checkpoints.make import make_checkpoint
    from laya_artifacts.goldens.record import record_goldens

    root = tmp_path_factory.mktemp("modernbert-base")
    checkpoint = make_checkpoint("modernbert-base", root / "checkpoint")
    goldens = record_goldens(Path(checkpoint), "modernbert-base", None, cases=_shortest_case_of_each_split())
    (root / "goldens.json").write_text(json.dumps(goldens), encoding="utf-8")
    return Path(checkpoint), root / "goldens.json"


@pytest.fixture(scope="session")
def modernbert_base_fp32(modernbert_base: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Its cpu-fp32 artifact (~100 s with the checkpoint, once per test session)."""
    from laya_artifacts.build import build_artifact
    from laya_artifacts.spec import BuildSpec

    out, _ = build_artifact(modernbert_base[0],
                            BuildSpec.of("cpu-fp32", name="modernbert-base", goldens=modernbert_base[1]),
                            tmp_path_factory.mktemp("mb-fp32") / "artifact")
    return out


@pytest.fixture
def moto_config() -> dict[str, Any]:
    """The cloud tier runs the deployed state machine definition itself (moto's ASL interpreter)."""
    return {"stepfunctions": {"execute_state_machine": True}}


@pytest.fixture
def aws(moto_aws: Any) -> Iterator[Any]:
    """The suite's moto scope (`moto_aws`), with the test's bucket created (unrestricted, before enforcement)."""
    client = moto_aws("s3")
    client.create_bucket(Bucket=BUCKET)
    yield client
