"""laya-serverless runtime: Laya typed decisions on ONNX Runtime, with no torch and no transformers.

    core/      tokenize -> questions -> sequence -> session -> decode -> abstention -> decider
    artifact/  the artifact's file layout and decode config, manifest, store, fetch
    http/      the Jev protocol over HTTP: limits, routing, answer shaping, the FastAPI app
    handler (Lambda), cli (local), settings, errors: the entry points and what they share
"""

from .core.decider import Decider
from .errors import (
    ArtifactError,
    InferenceError,
    LayaError,
    QuestionError,
    RequestError,
    SettingsError,
    StateError,
)

__all__ = ["ArtifactError", "Decider", "InferenceError", "LayaError", "QuestionError",
           "RequestError", "SettingsError", "StateError"]
