"""What a reviewer reads off a default synth: no warning, cdk-nag's run stated in one line, and one deletion policy
per kind of data (laya_infra/retention.py, docs/deploy.md)."""

from __future__ import annotations

import json
from types import SimpleNamespace

from laya_infra.constants import STACK_NAME
from laya_infra.retention import DELETED, KEPT
from laya_infra.suppressions import nag_summary


def _metadata(out):
    return json.loads((out / ("%s.metadata.json" % STACK_NAME)).read_text())


def test_a_default_synth_prints_no_warning(synth):
    _, _, out = synth()
    warnings = [(path, entry["data"]) for path, entries in _metadata(out).items() for entry in entries
                if entry["type"] == "aws:cdk:warning"]
    assert warnings == []


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
