"""`laya-artifacts tune`'s options and how it runs: here (`measure`) or on AWS through Power Tuning (`power_tuning`)."""

from __future__ import annotations

import argparse
import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from laya_serverless.command import Command

if TYPE_CHECKING:
    from laya_artifacts.tune.prices import Prices
    from laya_artifacts.tune.workload import Request


def _tune(args: argparse.Namespace) -> int:
    """`tune`: time and price an artifact here, or the deployed function through Power Tuning (`--aws`)."""
    from laya_artifacts.tune.measure import TuneError, parse_configs, parse_memory, tune
    from laya_artifacts.tune.prices import ARCHES, Prices
    from laya_artifacts.tune.report import plot, table
    from laya_artifacts.tune.workload import read_workload

    # Refusals (TuneError, PriceError, WorkloadError: BuildErrors) are said in one line by `cli.main`.
    memory = parse_memory(args.memory)
    arches = [a.strip() for a in args.arch.split(",") if a.strip()]
    if not arches or any(a not in ARCHES for a in arches):
        raise TuneError("--arch takes %s, got %r" % (",".join(ARCHES), args.arch))
    prices = Prices.load(Path(args.prices) if args.prices else None, args.arm64_time_factor)
    requests = read_workload(Path(args.workload) if args.workload else None)
    if args.aws:
        return _tune_aws(args, memory, prices, requests)
    if not args.artifact:
        raise TuneError("give an ARTIFACT directory to time here, or --aws FUNCTION_ARN")
    configs = parse_configs(args.configs)
    result = tune(Path(args.artifact), requests, memory=memory, arches=arches, configs=configs, prices=prices,
                  slo_p99_ms=args.slo_p99_ms, rounds=args.rounds, warm_requests=args.requests,
                  quota=not args.no_quota, workload_name=args.workload or "built-in", progress=args.progress,
                  command=" ".join(["laya-artifacts", *args.argv]))
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    png = plot(result, Path(args.png) if args.png else out.with_suffix(".png"))
    print(table(result))
    args.progress("wrote %s and %s in %.0f s" % (out, png, result["elapsed_s"]))
    return 0


def _tune_aws(args: argparse.Namespace, memory: list[int], prices: Prices, requests: list[Request]) -> int:
    import boto3

    from laya_artifacts.tune.power_tuning import table, tune_aws

    if not args.state_machine:
        return args.fail("--aws needs --state-machine ARN: Power Tuning's state machine (docs/deploy.md)")
    bearer = os.environ.get(args.bearer_env) if args.bearer_env else None
    if args.bearer_env and not bearer:
        return args.fail("--bearer-env %s: that variable is not set" % args.bearer_env)
    for flag, arn, kind in (("--aws", args.aws, "lambda"), ("--state-machine", args.state_machine, "states")):
        if not re.fullmatch(r"arn:aws[a-z-]*:%s:[a-z0-9-]+:\d{12}:.+" % kind, arn):
            return args.fail("%s takes a %s ARN (arn:aws:%s:REGION:ACCOUNT:...), got %r" % (flag, kind, kind, arn))
    result = tune_aws(args.aws, args.state_machine, requests, memory, prices,
                      sfn=boto3.client("stepfunctions", region_name=args.state_machine.split(":")[3]),
                      lambda_client=boto3.client("lambda", region_name=args.aws.split(":")[3]), num=args.num,
                      parallel=args.parallel, prefix=args.prefix, stage=args.stage, bearer=bearer,
                      slo_mean_ms=args.slo_p99_ms, progress=args.progress)
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(table(result))
    return 0


def _arguments(tune: argparse.ArgumentParser) -> None:
    from laya_artifacts.tune.measure import CONFIG_HELP, DEFAULT_CONFIGS, DEFAULT_REQUESTS, DEFAULT_ROUNDS
    from laya_artifacts.tune.power_tuning import DEFAULT_NUM

    tune.add_argument("artifact", nargs="?", help="an artifact directory (not needed with --aws)")
    tune.add_argument("--memory", default="1024,2048,3008", metavar="MB[,MB]", help="sizes (default %(default)s)")
    tune.add_argument("--arch", default="x86_64,arm64", metavar="A[,A]",
                      help="architectures to price (default %(default)s); arm64 time is estimated from x86_64's")
    tune.add_argument("--workload", metavar="FILE.jsonl",
                      help="Jev request bodies, one a line (default: a built-in mix of short and long states, "
                           "1 and 8 questions)")
    tune.add_argument("--slo-p99-ms", type=float, metavar="N", help="recommend only sizes whose warm p99 is <= N "
                                                                      "(with --aws: the mean, all Power Tuning gives)")
    tune.add_argument("--json", required=True, metavar="OUT", help="where the JSON result goes")
    tune.add_argument("--png", metavar="FILE", help="cost against p99 per size (default: OUT with .png)")
    tune.add_argument("--configs", default=",".join(DEFAULT_CONFIGS), metavar="C[,C]",
                      help="thread/spinning settings to time per size (default %%(default)s): %s" % CONFIG_HELP)
    tune.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS, help="alternating rounds (default %(default)s)")
    tune.add_argument("--requests", type=int, default=DEFAULT_REQUESTS,
                      help="warm requests per process (default %(default)s)")
    tune.add_argument("--no-quota", action="store_true", help="do not emulate the CPU quota (timings unconstrained)")
    tune.add_argument("--prices", metavar="FILE.json", help="a price table in the shipped one's shape "
                                                             "(laya_artifacts/tune/tune_data/prices.json)")
    tune.add_argument("--arm64-time-factor", type=float, metavar="X",
                      help="arm64 time = x86_64 time x X (default: the price table's)")
    aws = tune.add_argument_group("AWS Lambda Power Tuning (--aws)")
    aws.add_argument("--aws", metavar="FUNCTION_ARN", help="tune the deployed function with Power Tuning instead")
    aws.add_argument("--state-machine", metavar="ARN", help="Power Tuning's state machine ARN")
    aws.add_argument("--num", type=int, default=DEFAULT_NUM, help="invocations per size (default %(default)s)")
    aws.add_argument("--parallel", action="store_true", help="Power Tuning's parallelInvocation")
    aws.add_argument("--prefix", default="", help="the stack's -c prefix, if any (e.g. /laya)")
    aws.add_argument("--stage", default="prod", help="the REST stage (default %(default)s)")
    aws.add_argument("--bearer-env", metavar="NAME",
                     help="an environment variable holding the API key (it is sent in every payload, so it is "
                          "stored in the execution's history)")


# `args.progress` and `args.fail` are the CLI's own reporting, set on every command by `cli.parser`.
COMMANDS = (Command("tune", "time an artifact under each Lambda memory size's CPU share and price a decision per size "
                    "and architecture (docs/deploy.md#choosing-a-size)", _arguments, _tune),)

