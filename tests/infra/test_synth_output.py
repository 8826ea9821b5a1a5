"""What a reviewer reads off a default synth: no warning, no feature flag left for the CDK CLI to report, cdk-nag's
run stated in one line, and one deletion policy and retention per kind of data (laya_infra/retention.py,
docs/deploy.md)."""

from __future__ import annotations

import json
from types import SimpleNamespace

from laya_infra.constants import LOG_RETENTION, STACK_NAME
from laya_infra.feature_flags import FEATURE_FLAGS
from laya_infra.retention import DELETED, KEPT
from laya_infra.suppressions import nag_summary


def _metadata(out):
    return json.loads((out / ("%s.metadata.json" % STACK_NAME)).read_text())


def test_a_default_synth_prints_no_warning(synth):
    _, _, out = synth()
    warnings = [(path, entry["data"]) for path, entries in _metadata(out).items() for entry in entries
                if entry["type"] == "aws:cdk:warning"]
    assert warnings == []


# Flags the CDK CLI never reports, as its own list (aws-cdk's lib/commands/flags: OBSOLETE_FLAGS).
_OBSOLETE = {"@aws-cdk/core:enableStackNameDuplicates", "@aws-cdk/aws-s3:grantWriteWithoutAcl",
             "@aws-cdk/aws-kms:defaultKeyPolicies"}


def _flag_report(out):
    manifest = json.loads((out / "manifest.json").read_text())
    [report] = [a for a in manifest["artifacts"].values() if a["type"] == "cdk:feature-flag-report"]
    return report["properties"]["flags"]


def _unconfigured(flags):
    """The CDK CLI's rule for "N feature flags are not configured" after a synth: no value set, not obsolete, and an
    unset behaviour other than the recommended value."""
    return sorted(name for name, flag in flags.items() if name not in _OBSOLETE and "userValue" not in flag
                  and (flag.get("unconfiguredBehavesLike") or {}).get("v2", False) != flag["recommendedValue"])


def test_a_default_synth_leaves_no_feature_flag_for_the_cdk_cli_to_report(synth):
    _, _, out = synth()
    flags = _flag_report(out)
    assert _unconfigured(flags) == [], "set them in infra/laya_infra/feature_flags.py (cdk flags --unstable=flags)"
    assert set(FEATURE_FLAGS) <= set(flags)   # none stale: each one this aws-cdk-lib still knows


def test_the_feature_flag_rule_sees_an_unset_flag(synth):
    _, _, out = synth()
    flags = _flag_report(out)
    del flags["@aws-cdk/aws-apigateway:logGroupDestinationArnWithoutWildcard"]["userValue"]
    assert _unconfigured(flags) == ["@aws-cdk/aws-apigateway:logGroupDestinationArnWithoutWildcard"]


def test_every_function_s_log_group_expires_after_the_stack_s_retention(synth):
    """The deploy gate's Provider framework included: the group CDK makes for it keeps logs two years."""
    assert LOG_RETENTION == "ONE_MONTH"
    for context in ({}, {"gpu": "true", "auth": "false"}):
        _, raw, _ = synth(**context)
        days = {name: r["Properties"].get("RetentionInDays") for name, r in raw["Resources"].items()
                if r["Type"] == "AWS::Logs::LogGroup"}
        assert set(days.values()) == {30}, days


def test_cdk_nag_s_run_is_one_line_with_what_it_acknowledged(synth):
    _, _, out = synth()
    line = nag_summary(SimpleNamespace(directory=str(out)), STACK_NAME)
    assert line.startswith("cdk-nag AwsSolutions checks: passed with no unacknowledged finding; ")
    assert int(line.split("; ")[1].split()[0]) > 10


def test_each_kind_of_data_has_one_deletion_policy(synth):
    _, raw, _ = synth(signing="true")   # the signing key too
    found = {(r["Type"], r.get("DeletionPolicy", "Delete")) for r in raw["Resources"].values()
             if r["Type"] in {**KEPT, **DELETED}}
    assert found == {(kind, "Retain") for kind in KEPT} | {(kind, "Delete") for kind in DELETED}
