"""cdk-nag (AwsSolutions) findings this design accepts, each acknowledged where it arises, with its reason."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from aws_cdk import Acknowledgment, Validations
from constructs import IConstruct

Acknowledgement = tuple[str, str]

RUNTIME = ("AwsSolutions-L1",
           "Python 3.12 on purpose: the dependency layer is built and smoke-imported for 3.12 "
           "(onnxruntime wheels); a newer runtime is a rebuild and re-test, not a flag")
API_KEY_ROTATION = ("AwsSolutions-SMG4",
                    "A static bearer key shared with API clients; rotating it on a schedule would lock "
                    "them out. Operators rotate it by hand (README, deploy section)")
ARTIFACT_OBJECTS = ("Artifact ids are content hashes known only after publishing, so read access is scoped to "
                    "the artifacts/ key prefix of the artifact store (GetObject only); pointers are exact keys")
NO_COGNITO = ("AwsSolutions-COG4",
              "The Jev protocol authenticates with a bearer API key, checked by the TOKEN authorizer")
OPEN_HEALTH = ("AwsSolutions-APIG4",
               "GET /health must stay open (protocol section 2); the app reduces its payload without the key")
NO_EXECUTION_LOGS = ("AwsSolutions-APIG6",
                     "Access logs are on; execution logging needs the account-wide API Gateway CloudWatch role, "
                     "which one app's stack should not take over")
NO_WAF = ("AwsSolutions-APIG3",
          "WAF is an account-level choice with its own cost; stage throttling and the authorizer are in place")
NO_REQUEST_MODELS = ("AwsSolutions-APIG2",
                     "The app validates every body with the protocol's exact errors; a gateway model would answer "
                     "malformed requests differently from upstream")
JOBS_OBJECTS = ("Job ids are made when a job is submitted, so job access is scoped to the jobs/ key prefix of the "
                "store (GetObject/PutObject, and the engine's multipart parts for its result manifest), never the "
                "whole bucket")
DLQ_IS_THE_DLQ = ("AwsSolutions-SQS3",
                  "This queue is the dead-letter queue: the jobs engine's catch and the jobs function's async "
                  "on-failure destination send to it; an alarm watches its depth")
LAMBDA_VERSIONS = "Step Functions invokes the jobs function by ARN; the :* covers its versions and aliases only"
STATES_EXECUTIONS = ("A Distributed Map describes, stops and redrives the child executions it starts; their names are "
                     "made at run time, under this state machine's own executions")
VENDED_LOGS_AND_TRACES = ("AwsSolutions-IAM5[Resource::*]",
                          "CloudWatch Logs vended delivery and X-Ray trace APIs take no resource ARNs; Step Functions "
                          "needs them to write its execution logs and traces (added by the CDK for logs=, tracing=)")
NO_AUTH = ("AwsSolutions-APIG4", "Deployed with -c auth=false: an open API was asked for explicitly")
DLQ_ITSELF = ("AwsSolutions-SQS3", "This queue is the dead-letter queue of the functions' async invocations")
XRAY = ("AwsSolutions-IAM5[Resource::*]",
        "X-Ray's PutTraceSegments and PutTelemetryRecords have no resource-level permissions (active tracing)")


GPU_LOGS = ("SageMaker writes the endpoint's container logs to log groups it names /aws/sagemaker/Endpoints/<name> "
            "at creation; the grant is scoped to that prefix")
ECR_TOKEN = ("AwsSolutions-IAM5[Resource::*]",
             "ecr:GetAuthorizationToken has no resource-level permissions; image pulls are scoped to the "
             "asset repository")

SIGNING_KEY_ROTATION = ("AwsSolutions-KMS5",
                        "An asymmetric KMS key cannot rotate automatically; signing keys rotate by a new key trusted "
                        "beside the old one (docs/artifacts.md#signatures)")
CODEDEPLOY_ROLE = ("AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
                   "AWSCodeDeployRoleForLambdaLimited]",
                   "CodeDeploy's own role for Lambda traffic shifting: the AWS-managed policy limited to Lambda")
MANAGED_EC2_OPERATOR = (
    "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/AWSLambdaManagedEC2ResourceOperator]",
    "The policy AWS maintains for Lambda to launch, patch and retire a capacity provider's instances; its actions "
    "follow the service, which a hand-written copy would not")


def acknowledge(construct: IConstruct, *items: Acknowledgement) -> None:
    for rule, reason in items:
        Validations.of(construct).acknowledge(Acknowledgment(id=rule, reason=reason))


def artifact_prefix_rule(resource: str) -> Acknowledgement:
    return prefix_rule(resource, ARTIFACT_OBJECTS)


def prefix_rule(resource: str, reason: str) -> Acknowledgement:
    return ("AwsSolutions-IAM5[Resource::%s]" % resource, reason)


def nag_summary(assembly: Any, stack_name: str) -> str:
    """What cdk-nag did on this synth, in one line (its plugin report is empty when nothing is unacknowledged), read
    from the stack's metadata file (jsii cannot hand these entries to Python)."""
    path = Path(assembly.directory) / ("%s.metadata.json" % stack_name)
    entries = json.loads(path.read_text()) if path.is_file() else {}
    rules = [rule for found in entries.values() for entry in found if entry["type"] == "aws:cdk:acknowledged-rules"
             for rule in entry["data"]]
    return ("cdk-nag AwsSolutions checks: passed with no unacknowledged finding; %d findings acknowledged, each with "
            "its reason (infra/laya_infra/suppressions.py, the synthesized metadata)" % len(rules))
