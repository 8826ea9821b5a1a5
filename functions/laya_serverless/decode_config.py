"""What the runtime needs to know about a checkpoint, read from an artifact's `decode_config.json`.

The build side writes this file from the checkpoint's `rl_agent_config.json` and its tokenizer;
the runtime never reads the checkpoint itself.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import ArtifactError

DECODE_CONFIG_FILE = "decode_config.json"
DEFAULT_MAX_LEN = 512
DEFAULT_HEAD_MAX_LEN = 192
TEMP_MIN, TEMP_MAX = 0.5, 5.0


def clamp_temperature(value: Any) -> float:
    """A usable temperature: a finite number confined to [0.5, 5.0], else the neutral 1.0.

    Published checkpoints ship some buckets fitted to sharpen (e.g. 0.1), which would turn a
    coin flip into a certainty; upstream clamps them at load, and so do we.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 1.0
    value = float(value)
    if not math.isfinite(value):
        return 1.0
    return min(TEMP_MAX, max(TEMP_MIN, value))


@dataclass(frozen=True)
class SpecialTokens:
    cls_id: int
    sep_id: int
    mask_id: int
    pad_id: int
    mask_text: str


@dataclass(frozen=True)
class DecodeConfig:
    special: SpecialTokens
    max_len: int = DEFAULT_MAX_LEN
    head_max_len: int = DEFAULT_HEAD_MAX_LEN
    temperature: tuple[float, float, float] = (1.0, 1.0, 1.0)
    temperature_by_options: dict[str, float] = field(default_factory=dict)
    n_act: int = 1
    optimized_offline: bool = False

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> DecodeConfig:
        temps = raw.get("temperature", [1.0, 1.0, 1.0])
        if not isinstance(temps, list) or len(temps) != 3:
            raise ArtifactError("decode config: 'temperature' must be a list of 3 numbers, got %r" % (temps,))
        by_options = raw.get("temperature_by_options") or {}
        if not isinstance(by_options, dict):
            raise ArtifactError("decode config: 'temperature_by_options' must be an object")
        try:
            special = SpecialTokens(**raw["special_tokens"])
            return cls(
                special=special,
                max_len=int(raw.get("max_len", DEFAULT_MAX_LEN)),
                head_max_len=int(raw.get("head_max_len", DEFAULT_HEAD_MAX_LEN)),
                temperature=(clamp_temperature(temps[0]), clamp_temperature(temps[1]),
                             clamp_temperature(temps[2])),
                temperature_by_options={str(k): clamp_temperature(v) for k, v in by_options.items()},
                n_act=int(raw.get("n_act", 1)),
                optimized_offline=bool(raw.get("optimized_offline", False)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ArtifactError("decode config is malformed: %s" % exc) from exc

    @classmethod
    def load(cls, artifact_dir: Path) -> DecodeConfig:
        path = Path(artifact_dir) / DECODE_CONFIG_FILE
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError as exc:
            raise ArtifactError("%s is missing from the artifact %s" % (DECODE_CONFIG_FILE, artifact_dir)) from exc
        except (OSError, ValueError) as exc:
            raise ArtifactError("%s cannot be read: %s" % (path, exc)) from exc
        if not isinstance(raw, dict):
            raise ArtifactError("%s must hold a JSON object" % path)
        return cls.from_dict(raw)
