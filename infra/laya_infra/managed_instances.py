"""Lambda Managed Instances (`-c compute=managed-instances`): the API function on EC2 instances of pinned families.

A capacity provider launches the instances in a VPC of the stack's own (private subnets in up to three zones,
one NAT gateway for S3, Secrets Manager and the logs), allowing only the instance types the config accepted:
families whose int8 kernel class the gate covers. Python's runtime there answers each concurrent request in
its own process, each with its own copy of the model, so the function's per-environment concurrency is the
number of copies its memory holds (`DeployConfig.mi_concurrency`), and `LAYA_THREADS` shares the environment's
vCPUs between them (`DeployConfig.managed_threads`).
"""

from __future__ import annotations

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from laya_serverless import settings as env

from . import constants as c
from .config import DeployConfig
from .suppressions import MANAGED_EC2_OPERATOR, acknowledge

_ARCH = {"x86_64": lambda_.Architecture.X86_64, "arm64": lambda_.Architecture.ARM_64}


class ManagedInstances(Construct):
    """The VPC and the capacity provider; `attach` runs a function on it."""

    def __init__(self, scope: Construct, construct_id: str, config: DeployConfig) -> None:
        super().__init__(scope, construct_id)
        self.config = config
        self.vpc = ec2.Vpc(self, "Vpc", max_azs=3, nat_gateways=1, subnet_configuration=[
            ec2.SubnetConfiguration(name="public", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=24),
            ec2.SubnetConfiguration(name="instances", subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS, cidr_mask=22),
        ])
        self.vpc.add_flow_log("FlowLogs")
        # S3 through a gateway endpoint: artifact downloads at INIT neither pay NAT data charges nor leave AWS
        self.vpc.add_gateway_endpoint("S3", service=ec2.GatewayVpcEndpointAwsService.S3)
        self.security_group = ec2.SecurityGroup(self, "Instances", vpc=self.vpc, allow_all_outbound=True,
                                                description="laya-serverless managed instances: outbound only")
        self.provider = lambda_.CapacityProvider(
            self, "Provider",
            subnets=self.vpc.private_subnets,
            security_groups=[self.security_group],
            architectures=[_ARCH[config.arch]],
            instance_type_filter=lambda_.InstanceTypeFilter.allow(
                [ec2.InstanceType(name) for name in config.instance_types]),
            max_v_cpu_count=c.MI_MAX_VCPUS,
        )
        acknowledge(self.provider, MANAGED_EC2_OPERATOR)

    def attach(self, function: lambda_.Function) -> None:
        function.add_environment(env.THREADS, str(self.config.managed_threads))
        self.provider.add_function(function, per_execution_environment_max_concurrency=self.config.mi_concurrency,
                                   execution_environment_memory_gib_per_v_cpu=c.MI_MEMORY_GIB_PER_VCPU)
