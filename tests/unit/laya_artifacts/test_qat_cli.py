"""`laya-artifacts build`'s fine-tune options reach the settings that decide the tuned weights."""

from __future__ import annotations

from laya_artifacts.cli import _qat_settings, parser
from laya_artifacts.qat.finetune import QatSettings


def test_the_fine_tune_options_become_its_recipe() -> None:
    args = parser().parse_args(["build", "CKPT", "--quantization-aware", "--qat-steps", "700", "--qat-lr", "3e-4",
                                "--qat-trainable", "all", "--qat-generated-per-case", "10", "--qat-threads", "1"])
    settings = _qat_settings(args)
    assert settings is not None
    assert settings.recipe() == QatSettings(steps=700, lr=3e-4, trainable="all", generated_per_case=10).recipe()
    assert settings.threads == 1


def test_without_the_flag_there_is_no_fine_tune_and_the_defaults_are_the_settings_own() -> None:
    assert _qat_settings(parser().parse_args(["build", "CKPT"])) is None
    defaults = _qat_settings(parser().parse_args(["build", "CKPT", "--quantization-aware"]))
    assert defaults is not None and defaults.recipe() == QatSettings().recipe()
