"""Unknown `-c` keys and misspelled choices are refused at synth, in one line naming the nearest declared one."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from .conftest import INFRA


@pytest.mark.parametrize(("context", "message"), [
    ({"memroy": "4096"}, "unknown context memroy (did you mean memory?)"),
    ({"jev_strcit": "true"}, "unknown context jev_strcit (did you mean jev_strict?)"),
    ({"gpu_max_instance": "2"}, "unknown context gpu_max_instance (did you mean gpu_max_instances?)"),
])
def test_an_unknown_context_key_is_refused_naming_the_nearest(context, message, asset_dir):
    from app import build_app
    from laya_infra.config import ConfigError

    with pytest.raises(ConfigError, match=re.escape(message)) as caught:
        build_app({"asset_dir": str(asset_dir), **context})
    assert "\n" not in str(caught.value)


def test_a_misspelled_choice_suggests_the_nearest_allowed_value(asset_dir):
    from laya_infra.config import ConfigError, DeployConfig

    values = {"asset_dir": str(asset_dir), "rollout": "canery"}
    with pytest.raises(ConfigError, match=re.escape("(did you mean canary?)") + ".*" + re.escape("-c rollout=canary")):
        DeployConfig.from_context(values.get)


def test_cdk_feature_flags_and_lookups_are_not_the_users_keys(asset_dir):
    from laya_infra.config import refuse_unknown_context

    refuse_unknown_context(["@aws-cdk/core:newStyleStackSynthesis", "aws:cdk:enable-path-metadata",
                            "availability-zones:account=1:region=eu-west-1", "acknowledged-issue-numbers"], [])


def test_synth_refuses_in_one_line_without_a_traceback(asset_dir):
    """What `cdk synth -c memroy=4096` shows: the app's refusal, not a Python traceback."""
    paths = [str(INFRA), str(INFRA.parent / "functions"), os.environ.get("PYTHONPATH", "")]
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join(paths),
                       CDK_CONTEXT_JSON=json.dumps({"memroy": "4096", "asset_dir": str(asset_dir)}))
    result = subprocess.run([sys.executable, "app.py"], cwd=INFRA, env=environment, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 1
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert lines == ["error: unknown context memroy (did you mean memory?): every -c key is declared in "
                     "docs/configuration.md"]
    assert "Traceback" not in result.stderr
