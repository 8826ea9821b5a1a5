"""The GPU endpoint's settings from CDK context, checked before anything is built (`-c gpu=true` and its flags)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from laya_serverless.configuration import Boolean, Choice, Field, Integer, Invalid, Text, declared, setting

from . import constants as c
from .config import ConfigError, _flag, _read

_INSTANCE = re.compile(r"^ml\.([a-z0-9]+)\.([a-z0-9]+)$")
_GPU = Field(None, Boolean(), False, "The CUDA endpoint (SageMaker); the other gpu_* flags need it", context="gpu",
             example="true")


def _instance_type(text: str) -> str:
    match = _INSTANCE.match(text)
    if not match or match.group(1) not in c.GPU_INSTANCE_FAMILIES:
        families = ", ".join("ml.%s.*" % f for f in c.GPU_INSTANCE_FAMILIES)
        raise Invalid("must be a SageMaker GPU instance (%s)" % families)
    return text


def _g(key: str, parse: Any, default: Any, doc: str, example: str) -> Any:
    return setting(Field(None, parse, default, doc, context=key, example=example))


@dataclass(frozen=True)
class GpuConfig:
    instance_type: str = _g("gpu_instance_type", Text("ml.<family>.<size>", _instance_type),
                            c.DEFAULT_GPU_INSTANCE_TYPE, "SageMaker GPU instance type", c.DEFAULT_GPU_INSTANCE_TYPE)
    min_instances: int = _g("gpu_min_instances", Integer(0, c.MAX_GPU_INSTANCES), c.DEFAULT_GPU_MIN_INSTANCES,
                            "Instances kept (0: scale to zero through an inference component)", "1")
    max_instances: int = _g("gpu_max_instances", Integer(1, c.MAX_GPU_INSTANCES), c.DEFAULT_GPU_MAX_INSTANCES,
                            "Instances at most", "2")
    invocations_per_instance: int = _g("gpu_invocations_per_instance", Integer(1, 100_000),
                                       c.DEFAULT_GPU_INVOCATIONS_PER_INSTANCE,
                                       "Target invocations per instance for scaling (not with min 0)", "600")
    target: str = _g("gpu_target", Choice(c.GPU_TARGETS, True), c.DEFAULT_GPU_TARGET, "The endpoint's CUDA target",
                     "cuda-fp16")

    @property
    def scales_to_zero(self) -> bool:
        """`-c gpu_min_instances=0`: an inference component whose copies, and the instances under them, go to 0."""
        return self.min_instances == 0

    @classmethod
    def from_context(cls, get: Any) -> GpuConfig | None:
        """None without `-c gpu=true`; a GPU flag given without it is refused rather than ignored."""
        fields = declared(cls)
        raw = {name: get(field.context) for name, field in fields.items()}
        enabled = get("gpu")
        if enabled is None or not _read(_GPU, enabled):
            given = sorted(str(fields[name].context) for name, value in raw.items() if value is not None)
            if given:
                raise ConfigError("context %s only applies to the GPU endpoint (use -c gpu=true with it)"
                                  % ", ".join(repr(k) for k in given))
            return None
        config = cls(**{name: _read(fields[name], value) for name, value in raw.items() if value is not None})
        if config.scales_to_zero and raw["invocations_per_instance"] is not None:
            raise ConfigError("context 'gpu_invocations_per_instance' does not apply with gpu_min_instances=0: the "
                              "model's copies track concurrent requests (use -c gpu_min_instances=1 with it)")
        if config.max_instances < config.min_instances:
            raise ConfigError("context 'gpu_max_instances' (%d) is below 'gpu_min_instances' (%d) (use %s)"
                              % (config.max_instances, config.min_instances,
                                 _flag("gpu_max_instances", str(config.min_instances))))
        return config


def gpu_fields() -> list[Field]:
    """The GPU endpoint's flags, for docs/configuration.md."""
    return [_GPU, *declared(GpuConfig).values()]
