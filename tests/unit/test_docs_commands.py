"""Every command line the docs show (tests/doc_commands.py finds them) is in exactly one class:

- **run by a test**: `RUN_BY` names the test that runs it: its subcommand and options, on the test's own inputs;
- **parsed**: one of `PARSED`'s rules, each with the reason no test runs it (minutes to hours, a GPU, Docker);
- **AWS-only**: below an `# AWS-only:` line of its code block, or for an inline span, `needs_aws`'s rule.

Whatever its class, every command is checked as far as this machine can without running it: `laya-artifacts`,
`laya-serverless`, `scripts/*.py` and `jevcompat` parse its argv with their real parsers (a stale flag or a wrong
choice fails); `make` names targets and variables the Makefile has, and every `-c key=value` it, `cdk`,
`laya-artifacts deploy` or `--context` pass is a CDK context key that accepts the value; paths into the checkout
exist; pytest's markers are declared; curl's routes are the app's.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import re
import shlex
import tomllib
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.doc_commands import AWS_MARK, DocCommand, all_commands, fenced_commands, inline_commands, synopsis
from tests.paths import ROOT

_F = "tests/functional/"
_RUNNERS = _F + "laya_serverless/local_edge/test_quickstart_runners.py::"
_SIGNED = _F + "laya_serverless/artifact/test_signed_artifacts.py::test_the_rollback_and_sign_commands"
_TRUST = _F + "laya_serverless/artifact/test_trust_binds.py::test_the_commands_roll_back_and_forward_and_list_history"
_DEMO = _F + "laya_artifacts/test_demo_command.py::test_the_demo_command_publishes_once_and_answers_the_readme_example"
_LA = r"(sudo |/usr/bin/time -v |nice -n \d+ )?laya-artifacts "

# A command (its `text`, fully matched) -> the test that runs it.
RUN_BY: dict[str, str] = {
    # `make serve`'s recipe is `laya-artifacts demo` (tests/unit/test_docs.py keeps it so)
    r"make serve|(time )?laya-artifacts demo --once": _DEMO,
    r"laya-serverless serve": _RUNNERS + "test_serve_answers_and_says_which_target_it_serves",
    r"laya-serverless start-api": _RUNNERS + "test_start_api_answers_through_the_lambda_handler",
    r"laya-serverless start-api --payload v2": _RUNNERS + "test_start_api_answers_http_api_events",
    r"(LAYA_API_BASE_PATH=/laya )?laya-serverless invoke --event (tests/events/\S+|FILE)": _RUNNERS
    + "test_invoke_answers_the_docs_events_and_exits_zero",
    r"laya-serverless job run .*": _RUNNERS + "test_job_run_answers_every_line",
    r"laya-serverless job (submit|status|results) .*": _RUNNERS + "test_the_job_commands_submit_follow_and_fetch",
    r"curl -s 127\.0\.0\.1:8000/health|curl -s -X POST 127\.0\.0\.1:8000/v1/systemone .*": _RUNNERS
    + "test_the_readme_s_curl_commands_answer",
    r"curl -s localhost:8000/v1/jobs.*": _RUNNERS + "test_the_jobs_page_s_curl_commands_run_a_job",
    r"jevcompat test .*": _F + "laya_serverless/http/test_jev_client.py::test_jevcompat_strict_mode_is_conformant",
    r"laya-artifacts (keygen|publish|sign) .*|laya-artifacts verify (ARTIFACT_DIR|URI .*)": _SIGNED,
    r"laya-artifacts rollback (NAME|CHECKPOINT) TARGET --store \S+": _SIGNED,
    r"laya-artifacts rollback (C T --store S|CHECKPOINT TARGET) (--from|--to) ID( --sign-key KEY)?": _TRUST,
    r"laya-artifacts rollback C T --store S --forward": _TRUST,
    r"laya-artifacts list --store S --history .*": _TRUST,
    r"laya-artifacts list --store URI": _F + "laya_artifacts/test_build.py::"
    "test_minilm_int8_builds_and_publishes_through_the_cli",
    r"laya-artifacts make-checkpoint demo --out \S+": _F + "laya_artifacts/test_demo_assembly.py::"
    "test_make_checkpoint_demo_assembles_the_shipped_head",
    r"laya-artifacts make-checkpoint ((KIND|tiny-modernbert|minilm) --out \S+|demo\|\S+ --out DIR \[--max-len N\])": _F
    + "laya_artifacts/test_checkpoint_kinds.py::test_max_len_sets_the_checkpoints_context",
    r"laya-artifacts parity ARTIFACT --goldens \S+ (--target cpu-int8|\[--split NAME\])": _F
    + "laya_artifacts/test_parity_replay.py::test_the_replay_passes_both_splits_and_imports_no_torch",
    r"laya-artifacts probe --arch x86_64 --cpu haswell .*": _F + "laya_artifacts/test_probe.py::"
    "test_the_x86_package_answers_as_an_avx2_cpu_as_this_machine_does",
    r"laya-artifacts probe --arch arm64 .*": "tests/arm64/test_arm64.py::"
    "test_the_arm64_package_answers_as_a_graviton2_and_says_what_ran_it",
    r"laya-artifacts tune (\"\$\(ls -d \.cache/artifacts/demo-cpu-fp32-\* \| tail -n 1\)\"|ARTIFACT) .*": _F
    + "laya_artifacts/test_tune.py::test_every_size_holds_its_figures_costs_per_arch_and_fit",
    r"python scripts/module_map\.py": "tests/unit/test_docs_architecture.py::"
    "test_the_module_map_is_the_package_as_it_is",
}

# Commands no test runs, by rule (fully matched against `text`), each with why not: they are parsed only.
PARSED: dict[str, str] = {
    r"(CI=true )?make test(-fast|-arm64|-research)?( TEST_WORKERS=\d+)?": "the suite itself: minutes",
    r"(CI=true )?bash \.ci/run": "CI's run of the suite: minutes",
    r"make (layer|synth)( .*)?|laya-artifacts package .*": "the Lambda package, pip-installed for the arch: minutes",
    r"python layers/lock\.py": "compiles the layer's hash lock from the package index: needs the network",
    r"(PYTHONPATH=\S+ )?(python -m )?pytest( .*)?": "a test run: its paths must exist and its markers be declared",
    _LA + r"(build|goldens|import) .*": "records the gate corpus with upstream, builds and gates: minutes to hours",
    _LA + r"bench .*": "a benchmark: minutes, and its figures hold only on the machine a page names",
    _LA + r"tune \.cache/(artifacts|lead)/.*": "a benchmark page's tuning run of a built artifact: minutes",
    _LA + r"make-checkpoint (modernbert-base|modernbert-large|mmbert-base)(\|[\w-]+)?( .*)?": "a published size",
    r"(\w+=\S+ )*python3? (research/)?scripts/(?!module_map\.py).*|scripts/gpu_\w+\.(py|sh) .*": "a maintainer's "
    "or the research wing's tool: real-size models, training, or a GPU machine",
    r"LAYA_DEVICE=cuda .*|laya-artifacts parity .* --target cuda-fp16": "needs an NVIDIA GPU (docs/gpu.md)",
    r"sam local .*|sam build .*|docker build .*": "needs Docker (and the SAM CLI)",
    r"LAYA_STORE=\.\.\. .* laya-serverless serve --port 8812": "the server jevcompat is pointed at; the jevcompat "
    "test serves the same settings in process",
}

MIN_COMMANDS = 230  # what the pages show now, rounded down: a collector that finds nothing must fail


@functools.cache
def _commands() -> list[DocCommand]:
    return all_commands()


def _matches(table: dict[str, str], command: DocCommand) -> list[str]:
    return [pattern for pattern in table if re.fullmatch(pattern, command.text, re.S)]


def needs_aws(command: DocCommand) -> bool:
    """Whether a command needs an AWS account, from what it must be given (a synopsis's `[...]` options aside)."""
    words, text = command.argv, re.sub(r"\[[^\]]*\]", "", command.text)
    if command.tool == "aws" or "s3://" in text:
        return True
    if command.tool in ("cdk", "sam") and words[1:2] and words[1] in ("deploy", "bootstrap", "destroy", "diff"):
        return True
    if (command.tool == "make" and "deploy" in words[1:]) or words[:2] == ("laya-artifacts", "deploy"):
        return True
    if command.tool == "laya-artifacts" and "--aws" in words:
        return True
    return command.tool == "curl" and not re.search(r"(^|\s)(127\.0\.0\.1|localhost)[:/]", text)


def classes(command: DocCommand) -> list[str]:
    """The classes a command is in: exactly one is right. A marked (or, inline, an account-bound) command is
    AWS-only whichever parse rule also matches it; none may be in RUN_BY."""
    aws = command.marked if command.fenced else needs_aws(command)
    run, parsed = _matches(RUN_BY, command), _matches(PARSED, command)
    found = (["AWS-only"] if aws else []) + ["run by %s" % RUN_BY[p] for p in run]
    return found + ([] if aws else ["parsed (%s)" % PARSED[p] for p in parsed])


# --- checks that need no run -----------------------------------------------------------------------------------

_PLACEHOLDER = re.compile(r"[A-Z][A-Z0-9_]*")
_CHECKOUT = ("tests", "docs", "artifacts", "functions", "research", "layers", "scripts", "infra", "goldens", ".ci")


class _Refused(Exception):
    pass


def _raising(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """`parser` (and its subparsers) raising _Refused with argparse's message instead of exiting."""

    def error(message: str) -> Any:
        raise _Refused(message)

    parser.error = error  # type: ignore[method-assign]
    parser.allow_abbrev = False  # a page spells a flag out: `--target` is not `--targets`
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _raising(sub)
    return parser


def parse_error(parser: argparse.ArgumentParser, argv: list[str]) -> str | None:
    """argparse's refusal of `argv`, or None. A placeholder (`N`, `TARGET`) where a number or a choice must be
    stands for one: it is replaced by 1 or the first choice and parsed again."""
    argv, message = list(argv), ""
    for _ in range(len(argv) + 1):
        try:
            _raising(parser).parse_args(argv)
            return None
        except _Refused as exc:
            message = str(exc)
        bad = re.search(r"invalid (choice|int value|float value): '?([^' ]*)'?(?: \(choose from (.*)\))?", message)
        if not bad or not _PLACEHOLDER.fullmatch(bad.group(2)) or bad.group(2) not in argv:
            return message
        choices = re.findall(r"[\w.-]+", bad.group(3) or "")
        argv[argv.index(bad.group(2))] = choices[0] if bad.group(1) == "choice" else "1"
    return message


@functools.cache
def _cli_parser(tool: str) -> argparse.ArgumentParser:
    if tool == "laya-artifacts":
        from laya_artifacts.cli import parser

        return parser()
    if tool == "jevcompat":
        from jevcompat.cli import build_parser

        return build_parser()
    from laya_serverless.local_edge.cli import parser as serverless

    return serverless()


@functools.cache
def _script(path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_script_" + Path(path).stem, ROOT / path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@functools.cache
def _context_fields() -> dict[str, Any]:
    from laya_infra.config import DeployConfig
    from laya_infra.gpu_config import gpu_fields
    from laya_serverless.configuration import declared

    return {f.context: f for f in [*declared(DeployConfig).values(), *gpu_fields()] if f.context}


def _context_problems(argv: list[str], flag: str = "-c") -> list[str]:
    """Each `-c key=value` pair: a key the CDK app declares (app.py refuses others), a value its field reads."""
    from laya_serverless.configuration import Invalid

    problems = []
    for flagged, pair in zip(argv, argv[1:], strict=False):
        key, sep, value = pair.partition("=")
        if flagged != flag or not sep or _PLACEHOLDER.fullmatch(key):
            continue
        field = _context_fields().get(key)
        if field is None:
            problems.append("%s %s: not a context key of the CDK app (docs/configuration.md)" % (flag, key))
        elif not re.search(r"[$<…]|\.\.\.", value) and not _PLACEHOLDER.fullmatch(value):
            try:
                field.read(value)
            except Invalid as exc:
                problems.append("%s %s: %s" % (flag, pair, exc))
    return problems


def _argv(command: DocCommand) -> list[str]:
    """The tool's arguments as a parser sees them: a synopsis made one argv, a Makefile's `$(VAR)`s dropped."""
    return [w for w in synopsis(command.argv[1:]) if not re.fullmatch(r"\$\(\w+\)", w)]


def _check_laya(command: DocCommand) -> list[str]:
    argv = _argv(command)
    refused = parse_error(_cli_parser(command.tool), argv)
    return (["%s refuses it: %s" % (command.tool, refused)] if refused else []) + _context_problems(argv)


def _makefile() -> tuple[set[str], set[str]]:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    targets = set(re.findall(r"^([\w./-]+):", text, re.M))
    variables = set(re.findall(r"\$\((\w+)\)", text)) | set(re.findall(r"^(\w+) *[?:]?=", text, re.M))
    return targets, variables


def _check_make(command: DocCommand) -> list[str]:
    from laya_infra.constants import ARCHITECTURES

    targets, variables = _makefile()
    named, given, problems = [], {}, []
    for word in _argv(command):
        name, sep, value = word.partition("=")
        if sep and re.fullmatch(r"[A-Z_]+", name):
            given[name] = value
        else:
            named.append(word)
    problems += ["no Makefile target %s" % t for t in named if t not in targets]
    problems += ["the Makefile reads no %s" % v for v in given if v not in variables]
    if given.get("ARCH", "x86_64") not in ARCHITECTURES:
        problems.append("ARCH=%s: not one of %s" % (given["ARCH"], ", ".join(ARCHITECTURES)))
    if not given.get("TEST_WORKERS", "0").isdigit():
        problems.append("TEST_WORKERS=%s: not a number" % given["TEST_WORKERS"])
    cdk_args = shlex.split(given.get("CDK_ARGS", ""))
    problems += _context_problems(cdk_args)
    if "deploy" in named:  # the recipe: laya-artifacts deploy -c arch=$(ARCH) $(CDK_ARGS) $(DEPLOY_ARGS)
        argv = [
            "deploy",
            "-c",
            "arch=" + given.get("ARCH", "x86_64"),
            *cdk_args,
            *shlex.split(given.get("DEPLOY_ARGS", "")),
        ]
        refused = parse_error(_cli_parser("laya-artifacts"), argv)
        problems += ["its recipe's laya-artifacts deploy refuses it: %s" % refused] if refused else []
    return problems


def _check_cdk(command: DocCommand) -> list[str]:
    from laya_infra.constants import STACK_NAME

    argv = _argv(command)
    if not argv or argv[0] not in ("synth", "deploy", "bootstrap", "destroy", "diff", "ls", "list"):
        return ["not a cdk command this project uses: %s" % (argv[:1] or ["(none)"])[0]]
    stacks = [w for w in argv[1:3] if not w.startswith("-")][:1] if argv[1:2] and not argv[1].startswith("-") else []
    return ["no stack %s (the app has %s)" % (s, STACK_NAME) for s in stacks if s != STACK_NAME] + _context_problems(
        argv
    )


def _check_script(command: DocCommand) -> list[str]:
    path, argv = command.argv[0], synopsis(command.argv[1:])
    if not (ROOT / path).is_file():
        return ["no script %s" % path]
    if path.startswith("scripts/") and path.endswith(".py"):
        module = _script(path)
        if not hasattr(module, "parser"):
            return ["%s takes no arguments (or give it a parser())" % path] if argv else []
        refused = parse_error(module.parser(), argv)
        problems = ["%s refuses it: %s" % (path, refused)] if refused else []
        return problems + _context_problems(argv, "--context")
    source = (ROOT / path).read_text(encoding="utf-8")
    if path.startswith("research/scripts/"):  # parsers built in main() from the research wing's imports
        flags = [w.split("=")[0] for w in argv if w.startswith("--")]
        return ["%s declares no %s" % (path, f) for f in flags if '"%s"' % f not in source]
    if path.endswith(".sh") and argv:
        named = re.search(r"^\s*%s(\(\)|\))" % re.escape(argv[0]), source, re.M)  # a function or a case
        return [] if named else ["%s has no %s" % (path, argv[0])]
    return ["%s takes no arguments" % path] if argv else []


def _markers() -> set[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return {m.split(":")[0] for m in config["tool"]["pytest"]["ini_options"]["markers"]}


def _check_pytest(command: DocCommand) -> list[str]:
    argv, problems, paths, keywords = list(command.argv[1:]), [], [], []
    while argv:
        word = argv.pop(0)
        if word == "-m" and argv:
            unknown = set(re.findall(r"[\w-]+", argv.pop(0))) - {"and", "or", "not"} - _markers()
            problems += ["no marker %s in pyproject.toml" % m for m in sorted(unknown)]
        elif word == "-k" and argv:
            keywords.append(argv.pop(0))
        elif word in ("-n", "--dist", "-p", "--durations", "--maxfail") and argv:
            argv.pop(0)
        elif not word.startswith("-"):
            paths.append(word.split("::")[0])
    checked = [p for p in paths if not any(_PLACEHOLDER.fullmatch(part) for part in p.split("/"))]
    problems += ["no %s" % p for p in checked if not (ROOT / p).exists()]
    files = [ROOT / p for p in checked if (ROOT / p).is_file()]
    for keyword in keywords:
        if files and re.fullmatch(r"\w+", keyword) and not any(keyword in f.read_text() for f in files):
            problems.append("-k %s selects no test of %s" % (keyword, ", ".join(map(str, checked))))
    return problems


@functools.cache
def _routes() -> list[tuple[str, re.Pattern[str]]]:
    from laya_serverless.http import catalog, job_routes, routes, sagemaker

    found = []
    for module in (routes, catalog, sagemaker, job_routes):
        for route in module.router.routes:
            pattern = re.compile(re.sub(r"\\\{\w+\\\}", "[^/]+", re.escape(route.path)))
            found += [(method, pattern) for method in route.methods]
    return found


def _check_curl(command: DocCommand) -> list[str]:
    argv, method, urls = list(command.argv[1:]), "GET", []
    while argv:
        word = argv.pop(0)
        if word in ("-X", "--request") and argv:
            method = argv.pop(0)
        elif word in ("-d", "--data", "--data-binary") and argv:
            argv.pop(0)
            method = "POST" if method == "GET" else method
        elif word in ("-H", "--header", "-o", "--output", "-w") and argv:
            argv.pop(0)
        elif not word.startswith("-"):
            urls.append(word)
    paths = [re.sub(r"^(https?://)?[^/]*", "", url) or "/" for url in urls]
    return [
        "no route %s %s in the app" % (method, path)
        for path in paths
        if not any(m == method and pattern.fullmatch(path) for m, pattern in _routes())
    ]


def _check_aws(command: DocCommand) -> list[str]:
    from laya_infra.constants import STACK_NAME

    stacks = [b for a, b in zip(command.argv, command.argv[1:], strict=False) if a == "--stack-name" and "$" not in b]
    return ["no stack %s (the app has %s)" % (s, STACK_NAME) for s in stacks if s != STACK_NAME]


def _check_module(command: DocCommand) -> list[str]:
    return [] if importlib.util.find_spec(command.argv[0]) else ["no module %s" % command.argv[0]]


def _check_jevcompat(command: DocCommand) -> list[str]:
    refused = parse_error(_cli_parser("jevcompat"), _argv(command))
    return ["jevcompat refuses it: %s" % refused] if refused else []


_CHECKS: dict[str, Callable[[DocCommand], list[str]]] = {
    "laya-artifacts": _check_laya,
    "laya-serverless": _check_laya,
    "make": _check_make,
    "cdk": _check_cdk,
    "script": _check_script,
    "pytest": _check_pytest,
    "curl": _check_curl,
    "aws": _check_aws,
    "python-module": _check_module,
    "jevcompat": _check_jevcompat,
    "sam": lambda _c: [],
    "docker": lambda _c: [],
}


def _paths_exist(command: DocCommand) -> list[str]:
    """Paths into the checkout (tests/events/..., layers/gpu/Dockerfile) that the command names exist."""
    missing = []
    for word in command.argv[1:]:
        for path in (word, word.partition("=")[2]):
            parts = path.split("/")
            if (
                len(parts) > 1
                and parts[0] in _CHECKOUT
                and not path.startswith("infra/cdk.out")
                and not re.search(r"[$*<…]|\.\.\.", path)
                and not any(_PLACEHOLDER.fullmatch(p) for p in parts)
                and not (ROOT / path.split("::")[0]).exists()
            ):
                missing.append("no %s in the checkout" % path)
    return missing


def problems(command: DocCommand) -> list[str]:
    return _paths_exist(command) + _CHECKS[command.tool](command)


# --- the tests -------------------------------------------------------------------------------------------------


def test_every_command_is_in_exactly_one_class() -> None:
    wrong = []
    for command in _commands():
        found = classes(command)
        if len(found) != 1:
            wrong.append(
                "%s: %s -> %s"
                % (
                    command.where,
                    command.text[:120],
                    found
                    or "no class: add it to RUN_BY (and a test that runs it), to a PARSED rule, or mark its block %r"
                    % AWS_MARK,
                )
            )
    assert wrong == [], "\n".join(wrong)


def test_every_command_that_needs_an_account_is_marked() -> None:
    unmarked = ["%s: %s" % (c.where, c.text[:120]) for c in _commands() if c.fenced and needs_aws(c) and not c.marked]
    assert unmarked == [], "put a line %r above these in their code block:\n%s" % (AWS_MARK, "\n".join(unmarked))


def test_every_command_parses_and_names_what_exists() -> None:
    wrong = ["%s: %s\n    %s" % (c.where, c.text[:120], "\n    ".join(p)) for c in _commands() if (p := problems(c))]
    assert wrong == [], "\n".join(wrong)


def test_every_test_run_by_names_exists_and_runs_the_commands_options() -> None:
    """The test RUN_BY names exists, and its file says the subcommand and each option the command passes."""
    wrong = []
    for pattern, test in RUN_BY.items():
        path, _, name = test.partition("::")
        source = (ROOT / path).read_text(encoding="utf-8") if (ROOT / path).is_file() else ""
        if not re.search(r"^(async )?def %s\(" % re.escape(name), source, re.M):
            wrong.append("%s: no test %s" % (pattern, test))
    for command in _commands():
        for pattern in _matches(RUN_BY, command) if command.tool.startswith("laya-") else []:
            source = (ROOT / RUN_BY[pattern].partition("::")[0]).read_text(encoding="utf-8")
            said = [w for w in _argv(command) if w.startswith("-") or w == _argv(command)[0]]
            unsaid = [w.split("=")[0] for w in said if '"%s"' % w.split("=")[0] not in source]
            if unsaid:
                wrong.append("%s: %s: %s never passes %s" % (command.where, command.text, RUN_BY[pattern], unsaid))
    assert wrong == [], "\n".join(wrong)


def test_every_rule_and_registry_entry_matches_a_command() -> None:
    unused = [p for p in [*RUN_BY, *PARSED] if not any(re.fullmatch(p, c.text, re.S) for c in _commands())]
    assert unused == []


def test_the_collector_finds_the_pages_commands_in_every_class() -> None:
    found = _commands()
    counted = {
        kind: sum(1 for c in found if classes(c)[:1] and classes(c)[0].startswith(kind))
        for kind in ("run by", "parsed", "AWS-only")
    }
    assert len(found) >= MIN_COMMANDS and all(counted.values()), counted
    assert {c.tool for c in found} >= {"make", "laya-artifacts", "laya-serverless", "curl", "cdk", "aws", "script"}


def test_the_collector_reads_blocks_and_spans_as_a_reader_would() -> None:
    page = (
        "Run `make serve`, then `laya-artifacts tune ART --json o.json` (not `laya-artifacts tune`).\n\n"
        "```bash\n"
        "make test   # a comment\n"
        "cd infra && ./node_modules/.bin/cdk synth -c prefix=/laya \\\n"
        "  -c arch=arm64 && cd ..\n"
        "curl -s -X POST 127.0.0.1:8000/v1/systemone -d '{\n"
        '  "state": "a # not a comment"}\'\n'
        "# AWS-only: needs an account\n"
        "URL=$(aws cloudformation describe-stacks --stack-name LayaServerless)\n"
        "laya-artifacts build CKPT [--target cpu-int8|cpu-fp32] | laya-artifacts list\n"
        "```\n"
    )
    fenced = fenced_commands(page, "x.md")
    assert [(c.line, c.tool, c.marked) for c in fenced] == [
        (4, "make", False),
        (5, "cdk", False),
        (7, "curl", False),
        (10, "aws", True),
        (11, "laya-artifacts", True),
        (11, "laya-artifacts", True),
    ]
    assert fenced[1].argv == ("cdk", "synth", "-c", "prefix=/laya", "-c", "arch=arm64")
    assert fenced[2].argv[-1] == '{\n  "state": "a # not a comment"}'
    assert synopsis(fenced[4].argv) == ["laya-artifacts", "build", "CKPT", "--target", "cpu-int8"]
    assert [c.text for c in inline_commands(page, "x.md")] == ["laya-artifacts tune ART --json o.json"]


@pytest.mark.parametrize(
    ("text", "wrong"),
    [
        ("laya-artifacts build CKPT --target cpu-int9", "invalid choice"),
        ("laya-artifacts tune ART --json o.json --memroy 1024", "unrecognized arguments"),
        ("laya-serverless start-api --payload v3", "invalid choice"),
        ('make deploy CDK_ARGS="-c memroy=4096"', "not a context key"),
        ('make deploy DEPLOY_ARGS="--target cpu-fp32"', "recipe's laya-artifacts deploy refuses it"),
        ("make layer ARCH=amd64", "ARCH=amd64"),
        ("cdk deploy -c gpu_min_instances=many", "-c gpu_min_instances=many"),
        ("python scripts/lambda_emulation.py ART --context graph_mb=lots", "--context graph_mb=lots"),
        ("python scripts/sliced_goldens.py CKPT english", "required"),
        ("pytest tests/parity -m fast", "no marker fast"),
        ("pytest tests/unit/test_docs.py -k no_such_test", "selects no test"),
        ("laya-serverless invoke --event tests/events/nope.json", "no tests/events/nope.json"),
        ("curl -s 127.0.0.1:8000/v2/systemone", "no route GET /v2/systemone"),
    ],
)
def test_a_stale_command_is_caught(text: str, wrong: str) -> None:
    (command,) = fenced_commands("```bash\n%s\n```\n" % text, "x.md")
    assert any(wrong in p for p in problems(command)), problems(command)


def test_placeholders_stand_for_numbers_and_choices() -> None:
    from laya_artifacts.cli import parser

    assert parse_error(parser(), ["rollback", "C", "TARGET", "--store", "S"]) is None
    assert parse_error(parser(), ["make-checkpoint", "KIND", "--out", "DIR", "--max-len", "N"]) is None
    assert "invalid choice" in (parse_error(parser(), ["make-checkpoint", "kind", "--out", "DIR"]) or "")
