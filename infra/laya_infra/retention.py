"""One deletion policy per kind of data the stack holds, applied to every resource of that kind by an aspect, so
that no construct (ours or a library's, such as the custom-resource framework's log group) sets another
(docs/deploy.md#what-deleting-the-stack-keeps)."""

from __future__ import annotations

import jsii
from aws_cdk import CfnResource, IAspect, RemovalPolicy
from constructs import IConstruct

# Kept when the stack is deleted or a resource replaced: what outlives a deployment.
KEPT = {
    "AWS::S3::Bucket": "published artifacts, their gate records and batch-job inputs and outputs",
    "AWS::KMS::Key": "the signing key: retained artifacts' signatures are checked against it",
    "AWS::Logs::LogGroup": "what ran and why it failed (a failed first deploy included); each expires by its "
                           "retention",
}
# Deleted with the stack: what only this stack's functions use.
DELETED = {
    "AWS::SecretsManager::Secret": "the generated bearer key: a new stack generates a new one",
    "AWS::SQS::Queue": "dead letters of this stack's functions (kept 14 days while the stack lives)",
}


@jsii.implements(IAspect)
class DeletionPolicies:
    def visit(self, node: IConstruct) -> None:
        if isinstance(node, CfnResource) and node.cfn_resource_type in KEPT:
            node.apply_removal_policy(RemovalPolicy.RETAIN)
        elif isinstance(node, CfnResource) and node.cfn_resource_type in DELETED:
            node.apply_removal_policy(RemovalPolicy.DESTROY)
