"""The one error tree of the runtime.

Caller mistakes (`QuestionError`, `StateError`) are also `ValueError`s, because the protocol maps a
`ValueError` raised during inference to a 422 carrying its message.
"""


class LayaError(Exception):
    """Base of every error this package raises on purpose."""


class QuestionError(LayaError, ValueError):
    """A question definition or a per-request control cannot be answered as sent."""


class StateError(LayaError, ValueError):
    """A state cannot be decided about (null, or not JSON-serializable)."""


class ArtifactError(LayaError):
    """An artifact is missing, corrupted, or does not match what its manifest promises."""


class InferenceError(LayaError):
    """The model session failed or returned something unusable (for example a non-finite value)."""


class RequestError(LayaError):
    """A request refused before inference, with the protocol's status and `detail` text."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
