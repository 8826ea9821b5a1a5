"""`make serve`'s command, `laya-artifacts demo`, end to end: the shipped demo built with the deploy command's build
policy, published to a local store, loaded back verified and answering the README's example; a second run reuses
what was published."""

from __future__ import annotations

import json

import pytest


@pytest.mark.slow
def test_the_demo_command_publishes_once_and_answers_the_readme_example(tmp_path, capsys):
    from laya_artifacts.cli import main

    store, cache = tmp_path / "store", tmp_path / "cache"
    args = ["demo", "--once", "--store", str(store), "--cache", str(cache), "--keys", str(tmp_path / "keys")]
    assert main(args) == 0
    first = capsys.readouterr()
    answer = json.loads(first.out)
    assert answer["answers"]["team"]["choice"] == "billing"
    assert answer["answers"]["urgency"]["type"] == "score" and 0 <= answer["answers"]["churn"]["noul"] <= 1
    assert "step 3/4: publishing" in first.err
    mark = json.loads((cache / "demo-published.json").read_text())
    served = mark["target"]
    assert len(mark["artifact"]) == 64   # the build record: what this run published, and signed
    assert list(store.glob("artifacts/%s/signatures/*.json" % mark["artifact"]))
    assert list(store.glob("releases/demo/%s/*/*.json" % served))
    assert (store / "pointers").exists() or any(store.rglob("*%s*" % served))

    assert main(args) == 0
    second = capsys.readouterr()
    assert "already published" in second.err and "publishing" not in second.err
    assert json.loads(second.out) == answer
