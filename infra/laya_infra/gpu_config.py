"""The GPU endpoint's settings from CDK context, checked before anything is built (`-c gpu=true` and its flags)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from . import constants as c
from .config import ConfigError, _bool, _flag, _int

KEYS = ("gpu_instance_type", "gpu_min_instances", "gpu_max_instances", "gpu_invocations_per_instance", "gpu_target")
_INSTANCE = re.compile(r"^ml\.([a-z0-9]+)\.([a-z0-9]+)$")


@dataclass(frozen=True)
class GpuConfig:
    instance_type: str = c.DEFAULT_GPU_INSTANCE_TYPE
    min_instances: int = c.DEFAULT_GPU_MIN_INSTANCES
    max_instances: int = c.DEFAULT_GPU_MAX_INSTANCES
    invocations_per_instance: int = c.DEFAULT_GPU_INVOCATIONS_PER_INSTANCE
    target: str = c.DEFAULT_GPU_TARGET

    @property
    def scales_to_zero(self) -> bool:
        """`-c gpu_min_instances=0`: an inference component whose copies, and the instances under them, go to 0."""
        return self.min_instances == 0

    @classmethod
    def from_context(cls, get: Any) -> GpuConfig | None:
        """None without `-c gpu=true`; a GPU flag given without it is refused rather than ignored."""
        enabled = get("gpu")
        raw = {key: get(key) for key in KEYS}
        if enabled is None or not _bool(enabled, "gpu"):
            given = sorted(key for key, value in raw.items() if value is not None)
            if given:
                raise ConfigError("context %s only applies to the GPU endpoint (use -c gpu=true with it)"
                                  % ", ".join(repr(k) for k in given))
            return None
        values: dict[str, Any] = {}
        if raw["gpu_instance_type"] is not None:
            match = _INSTANCE.match(str(raw["gpu_instance_type"]))
            if not match or match.group(1) not in c.GPU_INSTANCE_FAMILIES:
                raise ConfigError("context 'gpu_instance_type' must be a SageMaker GPU instance (%s), got %r (use %s)"
                                  % (", ".join("ml.%s.*" % f for f in c.GPU_INSTANCE_FAMILIES),
                                     raw["gpu_instance_type"], _flag("gpu_instance_type", c.DEFAULT_GPU_INSTANCE_TYPE)))
            values["instance_type"] = str(raw["gpu_instance_type"])
        if raw["gpu_min_instances"] is not None:
            values["min_instances"] = _int(raw["gpu_min_instances"], "gpu_min_instances", 0, c.MAX_GPU_INSTANCES, "1")
        if raw["gpu_max_instances"] is not None:
            values["max_instances"] = _int(raw["gpu_max_instances"], "gpu_max_instances", 1, c.MAX_GPU_INSTANCES, "2")
        if raw["gpu_invocations_per_instance"] is not None:
            values["invocations_per_instance"] = _int(raw["gpu_invocations_per_instance"],
                                                      "gpu_invocations_per_instance", 1, 100_000, "600")
        if raw["gpu_target"] is not None:
            if raw["gpu_target"] not in c.GPU_TARGETS:
                raise ConfigError("context 'gpu_target' must be one of %s, got %r (use %s)"
                                  % (", ".join(c.GPU_TARGETS), raw["gpu_target"], _flag("gpu_target", "cuda-fp16")))
            values["target"] = str(raw["gpu_target"])
        config = cls(**values)
        if config.scales_to_zero and raw["gpu_invocations_per_instance"] is not None:
            raise ConfigError("context 'gpu_invocations_per_instance' does not apply with gpu_min_instances=0: the "
                              "model's copies track concurrent requests (use -c gpu_min_instances=1 with it)")
        if config.max_instances < config.min_instances:
            raise ConfigError("context 'gpu_max_instances' (%d) is below 'gpu_min_instances' (%d) (use %s)"
                              % (config.max_instances, config.min_instances,
                                 _flag("gpu_max_instances", str(config.min_instances))))
        return config
