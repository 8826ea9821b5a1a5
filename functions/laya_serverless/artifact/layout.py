"""The artifact's file layout and its decode-config schema: one definition for the build side and the runtime.

An artifact directory holds the decision graph, the tokenizer, the decode config (what the runtime
needs to know about the checkpoint: budgets, temperatures, special tokens) and, once the parity
gate passed, the manifest. The build side writes `decode_config.json` through `DecodeConfig.write`
from the checkpoint's `rl_agent_config.json` and its tokenizer; the runtime never reads the
checkpoint itself.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ArtifactError

GRAPH_FILE = "model.onnx"
TOKENIZER_FILE = "tokenizer.json"
DECODE_CONFIG_FILE = "decode_config.json"
MANIFEST_FILE = "manifest.json"
# Signatures of the manifest, one file per key (`artifact.signature`): beside the manifest, never listed by it.
SIGNATURES_DIR = "signatures"
# The decision graph's contract: five inputs (dynamic rows, tokens, options) and two outputs.
GRAPH_INPUTS = ("input_ids", "attention_mask", "marker_pos", "marker_mask", "qtype")
GRAPH_OUTPUTS = ("logits", "act_logits")
DEFAULT_MAX_LEN = 512
DEFAULT_HEAD_MAX_LEN = 192
TEMP_MIN, TEMP_MAX = 0.5, 5.0
# ONNX Runtime's graph-optimization levels, named as `onnxruntime.GraphOptimizationLevel` names them.
LOAD_LEVELS = ("ORT_DISABLE_ALL", "ORT_ENABLE_BASIC", "ORT_ENABLE_EXTENDED", "ORT_ENABLE_ALL")


def clamp_temperature(value: Any) -> float:
    """A usable temperature: a finite number confined to [0.5, 5.0], else the neutral 1.0.

    Published checkpoints ship some buckets fitted to sharpen (e.g. 0.1), which would turn a
    coin flip into a certainty; upstream clamps them at load, and so do we.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 1.0
    number = float(value)
    if not math.isfinite(number):
        return 1.0
    return min(TEMP_MAX, max(TEMP_MIN, number))


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
    optimized_offline: bool = False
    max_positions: int | None = None  # the encoder's position limit (`artifact.positions`), None: no table
    # The level a session must open the graph at, when the build says (a graph stored compactly, whose Casts
    # back to FP32 are folded at load: `export/compact.py`); None: `session_level`'s default.
    load_optimization: str | None = None

    @property
    def session_level(self) -> str:
        """The graph-optimization level to open the graph at: the recorded one, else none for a graph optimized
        offline (it would only spend cold-start time) and ORT's full optimization for a raw export."""
        if self.load_optimization is not None:
            return self.load_optimization
        return "ORT_DISABLE_ALL" if self.optimized_offline else "ORT_ENABLE_ALL"

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
                optimized_offline=bool(raw.get("optimized_offline", False)),
                load_optimization=_load_level(raw.get("load_optimization")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ArtifactError("decode config is malformed: %s" % exc) from exc

    @classmethod
    def load(cls, artifact_dir: Path, file: Path | None = None) -> DecodeConfig:
        """The decode config of `artifact_dir`, read from `file` when given (a verified handle's path)."""
        path = file or Path(artifact_dir) / DECODE_CONFIG_FILE
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError as exc:
            raise ArtifactError("%s is missing from the artifact %s" % (DECODE_CONFIG_FILE, artifact_dir)) from exc
        except (OSError, ValueError) as exc:
            raise ArtifactError("%s cannot be read: %s" % (path, exc)) from exc
        if not isinstance(raw, dict):
            raise ArtifactError("%s must hold a JSON object" % path)
        return cls.from_dict(raw)


def _load_level(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str) and value in LOAD_LEVELS:
        return value
    raise ArtifactError("decode config: 'load_optimization' must be one of %s, got %r"
                        % (", ".join(LOAD_LEVELS), value))


def write_decode_config(artifact_dir: Path, *, special: SpecialTokens, max_len: int, head_max_len: int,
                        temperature: list[float], temperature_by_options: dict[str, float],
                        optimized_offline: bool = False, load_optimization: str | None = None) -> Path:
    """Write `decode_config.json` with the checkpoint's values as shipped.

    Temperatures are kept unclamped: the runtime clamps them at load, as upstream does, so the
    artifact records what the checkpoint said. `load_optimization` is written only when set, so the configs
    of graphs that need no particular level keep their bytes."""
    raw: dict[str, Any] = {
        "max_len": int(max_len), "head_max_len": int(head_max_len), "temperature": list(temperature),
        "temperature_by_options": dict(temperature_by_options), "special_tokens": asdict(special),
        "optimized_offline": bool(optimized_offline)}
    if load_optimization is not None:
        raw["load_optimization"] = load_optimization
    DecodeConfig.from_dict(raw)  # what is written must read back
    path = Path(artifact_dir) / DECODE_CONFIG_FILE
    path.write_text(json.dumps(raw, indent=2) + "\n", encoding="utf-8")
    return path


def copy_decode_config(source_dir: Path, artifact_dir: Path, *, optimized_offline: bool,
                       load_optimization: str | None = None) -> Path:
    """The decode config of `source_dir` written into `artifact_dir`, saying whether its graph was optimized offline
    and the level a session must open it at, if any."""
    raw = json.loads((Path(source_dir) / DECODE_CONFIG_FILE).read_text(encoding="utf-8"))
    config = DecodeConfig.from_dict(raw)
    return write_decode_config(artifact_dir, special=config.special, max_len=config.max_len,
                               head_max_len=config.head_max_len, temperature=raw.get("temperature", [1.0] * 3),
                               temperature_by_options=raw.get("temperature_by_options") or {},
                               optimized_offline=optimized_offline, load_optimization=load_optimization)
