"""laya-serverless runtime: Laya typed decisions on ONNX Runtime, with no torch and no transformers."""

from .decider import Decider
from .errors import ArtifactError, InferenceError, LayaError, QuestionError, RequestError, StateError

__all__ = ["ArtifactError", "Decider", "InferenceError", "LayaError", "QuestionError", "RequestError", "StateError"]
