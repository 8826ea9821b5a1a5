"""Configuration declared once: the declarations parse, refuse in one line naming the variable, and the reference
page in docs/ lists every variable the runtime reads."""

from __future__ import annotations

import re

import pytest

from laya_serverless import settings as runtime
from laya_serverless.configuration import Boolean, Field, Integer, Invalid, Secret
from laya_serverless.errors import SettingsError
from laya_serverless.settings import Settings
from tests.paths import ROOT

RUNTIME_SOURCES = [*sorted((ROOT / "functions").rglob("*.py"))]


def test_the_reference_page_is_the_rendered_declarations() -> None:
    from laya_infra.reference import render

    page = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert page == render(), \
        "docs/configuration.md is stale: PYTHONPATH=infra python -m laya_infra.reference > docs/configuration.md"


def test_every_variable_the_functions_read_is_declared_and_on_the_page() -> None:
    read = {name for path in RUNTIME_SOURCES for name in re.findall(r"\bLAYA_[A-Z0-9_]+\b", path.read_text())}
    read -= set(runtime.REPLACED)  # upstream's names, named only to be refused with what replaces them
    declared = {f.env for f in runtime.fields().values()} | {f.env for f in runtime.OTHER_FUNCTIONS}
    page = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert read - declared == set()
    assert [name for name in sorted(read) if "`%s`" % name not in page] == []


@pytest.mark.parametrize("environ, message", [
    ({"LAYA_JEV_STRICT": "ture"}, "invalid LAYA_JEV_STRICT 'ture': must be true or false"),
    ({"LAYA_GRAPH_IN_MEMORY": "enabled"}, "invalid LAYA_GRAPH_IN_MEMORY 'enabled'"),
    ({"LAYA_API_KEY": ""}, "invalid LAYA_API_KEY \\(value hidden\\): is set but empty"),
    ({"LAYA_API_KEY": " k3y"}, "invalid LAYA_API_KEY \\(value hidden\\): has leading or trailing whitespace"),
    ({"LAYA_API_KEY": "k3y\n"}, "invalid LAYA_API_KEY \\(value hidden\\): has leading or trailing whitespace"),
    ({"LAYA_API_KEY": "k\x013y"}, "invalid LAYA_API_KEY \\(value hidden\\): holds a control character"),
    ({"LAYA_THREADS": "100000"}, "invalid LAYA_THREADS '100000': must be an integer 0-256"),
    ({"LAYA_TARGET": "cpu-int9"}, "invalid LAYA_TARGET 'cpu-int9': must be one of cpu-int8"),
    ({"LAYA_DEFAULT_MODEL": "french"}, "invalid LAYA_DEFAULT_MODEL 'french': must be one of the deployed names"),
    ({"LAYA_STORE": "s3://"}, "invalid LAYA_STORE 's3://': must be s3://BUCKET"),
    ({"LAYA_DEPLOYED": ","}, "invalid LAYA_DEPLOYED ',': names no checkpoint"),
    ({"LAYA_PORT": "80800"}, "invalid LAYA_PORT '80800'"),
    ({"LAYA_API_KEY": "s3cr3t-kéy"}, "invalid LAYA_API_KEY \\(value hidden\\): holds a character that is not"),
    ({"LAYA_API_KEY": "k" * 20_000}, "invalid LAYA_API_KEY \\(value hidden\\): is 20000 characters long; at most 4096"),
    ({"LAYA_ROOT_PATH": "javascript:alert(1)"}, "invalid LAYA_ROOT_PATH 'javascript:alert\\(1\\)': must be a path"),
    ({"LAYA_API_BASE_PATH": "../x"}, "invalid LAYA_API_BASE_PATH '../x': must be a path like /laya"),
    ({"LAYA_API_BASE_PATH": "/a/../x"}, "invalid LAYA_API_BASE_PATH '/a/../x': must be a path like /laya"),
    ({"LAYA_ARTIFACT_PINS": "legal/cpu-int8=" + "a" * 64},
     "invalid LAYA_ARTIFACT_PINS: legal/cpu-int8 pins a checkpoint that is not deployed \\(LAYA_DEPLOYED: demo\\)"),
    ({"LAYA_API_KEY": "k3y", "LAYA_API_KEY_SECRET_ARN": "arn:aws:secretsmanager:eu-west-1:1:secret:k"},
     "LAYA_API_KEY and LAYA_API_KEY_SECRET_ARN are both set"),
])
def test_a_bad_value_is_refused_in_one_line_naming_the_variable(environ: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError, match=message) as caught:
        Settings.from_environ(environ)
    assert "\n" not in str(caught.value)


def test_a_refused_key_is_never_echoed() -> None:
    with pytest.raises(SettingsError) as caught:
        Settings.from_environ({"LAYA_API_KEY": "s3cr3t-key\n"})
    assert "s3cr3t" not in str(caught.value)


def test_tolerated_values_mean_the_default_as_upstream_reads_them() -> None:
    parsed = Settings.from_environ({"LAYA_MAX_TOKEN_BUDGET": "lots", "LAYA_MAX_CONCURRENT": "-3",
                                    "LAYA_TOURNAMENT_GROUP": "1"})
    assert (parsed.limits.max_token_budget, parsed.limits.max_concurrent, parsed.protocol.tournament_group) == (
        8192, 16, 0)


def test_each_documented_boolean_spelling_reads_back() -> None:
    for word, value in (("1", True), ("TRUE", True), ("yes", True), ("On", True), ("0", False), ("off", False)):
        assert Settings.from_environ({"LAYA_JEV_STRICT": word}).protocol.jev_strict is value


def test_defaults_are_declared_once_and_match_an_empty_environment() -> None:
    assert Settings() == Settings.of() == Settings.from_environ({})
    assert Settings.from_environ({"LAYA_THREADS": "0"}).deployment.threads is None
    assert Settings.from_environ({"LAYA_THREADS": "2"}).deployment.threads == 2


def test_the_stack_wires_what_the_runtime_reads_back() -> None:
    from laya_serverless.configuration import env_value

    fields = runtime.fields()
    wired = env_value([(fields["jev_strict"], True), (fields["jev_confidence"], "jev"), (fields["threads"], None)])
    assert wired == {"LAYA_JEV_STRICT": "1", "LAYA_JEV_CONFIDENCE": "jev"}
    assert Settings.from_environ(wired).protocol.jev_strict is True


def test_parsers_refuse_with_the_rule() -> None:
    with pytest.raises(Invalid, match="must be an integer 1-3"):
        Integer(1, 3)("4")
    with pytest.raises(Invalid, match="true or false"):
        Boolean()("2")
    with pytest.raises(Invalid):
        Secret()("")
    assert Field("LAYA_X", Integer(1, 3), 2, "doc", tolerant=True).read("9") == 2


def test_flat_names_go_to_the_part_that_reads_them() -> None:
    chosen = Settings.of(store="s3://bucket/laya", jobs_workers=0, api_key="k3y", max_concurrent=2, port=9000)
    assert (chosen.deployment.store, chosen.jobs.jobs_workers, chosen.http.api_key, chosen.limits.max_concurrent,
            chosen.local_server.port) == ("s3://bucket/laya", 0, "k3y", 2, 9000)
    assert chosen.protocol == Settings().protocol  # a part nothing was named for keeps its defaults
    with pytest.raises(TypeError, match="no such setting: jobs_worker, stor"):
        Settings.of(jobs_worker=2, stor="x")


def test_every_field_is_declared_on_exactly_one_part() -> None:
    from laya_serverless.configuration import declared

    names = [name for part in vars(Settings()).values() for name in declared(type(part))]
    assert len(names) == len(set(names)) == len(runtime.fields())  # `of` routes each name to one part


@pytest.mark.parametrize(("name", "nearest"), [
    ("LAYA_API_KEYS", "LAYA_API_KEY"),
    ("LAYA_ARTIFACT_KEY", "LAYA_ARTIFACT_KEYS"),
    ("LAYA_ARTIFACT_PIN", "LAYA_ARTIFACT_PINS"),
    ("LAYA_DEPLOY", "LAYA_DEPLOYED"),
    ("LAYA_TARGETS", "LAYA_TARGET"),
    ("LAYA_JEV_STRICTT", "LAYA_JEV_STRICT"),
    ("LAYA_JOB_WORKERS", "LAYA_JOBS_WORKERS"),
    ("LAYA_MAX_CONCURENT", "LAYA_MAX_CONCURRENT"),
])
def test_an_undeclared_name_is_refused_at_start_naming_the_nearest_declared_one(name: str, nearest: str) -> None:
    """A typo used to start with the default: `LAYA_API_KEYS` served without auth, `LAYA_ARTIFACT_KEY` unsigned."""
    with pytest.raises(SettingsError, match=re.escape("unknown setting %s (did you mean %s?)" % (name, nearest))) \
            as caught:
        Settings.from_environ({name: "x"})
    assert "\n" not in str(caught.value)


def test_upstreams_replaced_names_are_refused_with_what_replaces_them() -> None:
    with pytest.raises(SettingsError, match="LAYA_PRELOAD: not read here; set LAYA_DEPLOYED instead"):
        Settings.from_environ({"LAYA_PRELOAD": "english"})
    assert Settings.from_environ({"PATH": "/bin", "LAYAX": "1"}).http.api_key is None  # only LAYA_* is ours


def test_a_choice_suggests_the_nearest_allowed_value() -> None:
    from laya_serverless.configuration import Choice

    with pytest.raises(Invalid, match=re.escape("(did you mean canary?)")) as caught:
        Choice(("canary", "linear", "all-at-once"), case_sensitive=True)("canery")
    assert caught.value.suggestion == "canary"


def test_paths_are_read_back_as_written() -> None:
    chosen = Settings.from_environ({"LAYA_ROOT_PATH": "/prod/laya", "LAYA_API_BASE_PATH": "/laya/"})
    assert (chosen.http.root_path, chosen.http.api_base_path) == ("/prod/laya", "/laya")
    assert (Settings.from_environ({}).http.root_path, Settings.from_environ({}).http.api_base_path) == ("", "/")


def test_local_jobs_workers_are_bounded_by_this_machines_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each worker holds every model: 64 of them on a 2-CPU machine is a swap storm, not a setting."""
    monkeypatch.setattr(runtime.os, "sched_getaffinity", lambda _pid: {0, 1})
    assert Settings.from_environ({"LAYA_JOBS_WORKERS": "2"}).jobs.jobs_workers == 2
    with pytest.raises(SettingsError, match="invalid LAYA_JOBS_WORKERS '64': this machine has 2 CPUs; at most 2"):
        Settings.from_environ({"LAYA_JOBS_WORKERS": "64"})
    stepfunctions = {"LAYA_JOBS_WORKERS": "64", "LAYA_JOBS_STATE_MACHINE": "arn:aws:states:eu-west-1:1:stateMachine:j"}
    assert Settings.from_environ(stepfunctions).jobs.local_processes == 1  # no local pool: not this machine's load
