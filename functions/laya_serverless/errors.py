"""The runtime's error tree (the build wing's, `laya_artifacts.errors`, grows from its `LayaError`).

Caller mistakes (`QuestionError`, `StateError`) are also `ValueError`s, because the protocol maps a
`ValueError` raised during inference to a 422 carrying its message. Refusals of a request before
inference are `RequestError`s, one class per kind, and each kind declares its own wire: its HTTP
`status`, its `strict_status` where strict Jev mode answers otherwise, its Jev `error_type`, and whether
the client should retry (`retry_later`: a 503 with `Retry-After`); `laya_serverless.http.statuses` reads
them. Both carry where in the request body they point and what kind of mistake it is (`Located`), which
strict Jev mode answers as `loc` and `type`.
"""

from typing import ClassVar, Literal, Self

Location = tuple[str | int, ...]
"""A path into the request body after "body": ("questions", "q1"), ("max_len",); () is the whole body."""
Kind = Literal["missing", "too_short", "json_invalid", "value_error"]
"""What is wrong at a location, in the words of FastAPI's validation `type`."""


class LayaError(Exception):
    """Base of every error this project raises on purpose."""


class Located(LayaError):
    """An error about a request: its `location` in the body and its `kind` (the whole body, a value error,
    unless told otherwise)."""

    def __init__(self, message: str, *, location: Location = (), kind: Kind = "value_error") -> None:
        super().__init__(message)
        self.location = location
        self.kind: Kind = kind


class QuestionError(Located, ValueError):
    """A question definition or a per-request control cannot be answered as sent."""


class StateError(Located, ValueError):
    """A state cannot be decided about (null, or not JSON-serializable)."""


class SettingsError(LayaError, ValueError):
    """A configuration variable is set to something that cannot be used; the message names it and its value."""


class ArtifactError(LayaError):
    """An artifact is missing, corrupted, or does not match what its manifest promises."""


class StorageUnavailable(ArtifactError):
    """The local store or the artifact cache cannot be read or written here, or the cache is not this user's own."""


class DeviceUnavailable(ArtifactError):
    """The configured device cannot run an artifact here: its execution provider is not offered, onnxruntime
    placed the session elsewhere, or the artifact was gated on another GPU or onnxruntime."""


class InferenceError(LayaError):
    """The model session failed or returned something unusable (for example a non-finite value)."""


class JobError(LayaError):
    """A job's stored parts cannot be read or moved (a missing or corrupt document, a race lost too many times)."""


class ShardFailed(JobError):
    """A shard could not be answered for a reason of ours; the engine retries it, then gives it up as error lines."""


class RequestError(Located):
    """A request refused before (or instead of) inference, with the protocol's exact `detail` text."""

    status: ClassVar[int] = 500
    strict_status: ClassVar[int | None] = None   # None: strict mode answers `status` too
    error_type: ClassVar[str] = "api_error"       # strict mode's `detail.error_type` for a non-validation refusal
    retry_later: ClassVar[bool] = False

    def __init__(self, detail: str, *, location: Location = (), kind: Kind = "value_error") -> None:
        super().__init__(detail, location=location, kind=kind)
        self.detail = detail

    @classmethod
    def from_error(cls, error: Located) -> Self:
        """This refusal of a caller's mistake found below the protocol: its message, location and kind."""
        return cls(str(error), location=error.location, kind=error.kind)


class MalformedRequest(RequestError):
    """The body is not what the protocol's shape demands (not JSON, not an object, a missing field)."""

    status = 400
    # The Jev contract answers every body validation failure with 422; upstream says 400 for the shape ones.
    strict_status = 422


class Unauthenticated(RequestError):
    """The bearer token is missing or wrong."""

    status = 401
    error_type = "authentication_error"


class BodyTimeout(RequestError):
    """The body did not arrive within the read deadline."""

    status = 408
    error_type = "request_timeout"


class TooLarge(RequestError):
    """The body, the state, or the number of questions, options or states is over a limit."""

    status = 413
    error_type = "request_too_large"


class UnsupportedEncoding(RequestError):
    """The body's `Content-Encoding` is not one this server decodes."""

    status = 415
    error_type = "unsupported_media_type"


class NotFound(RequestError):
    """The request names something this deployment does not have (an unknown job id)."""

    status = 404


class Conflict(RequestError):
    """The request cannot be answered in the current state of what it names (a job's results before it ends)."""

    status = 409


class InvalidRequest(RequestError):
    """The request is well formed but a value in it cannot be used."""

    status = 422


class Overloaded(RequestError):
    """Every admission slot is taken; the client should retry shortly."""

    status = 503
    error_type = "overloaded_error"
    retry_later = True


class DeviceOutOfMemory(Overloaded):
    """The GPU ran out of memory on this request and no gated CPU retry exists for the artifact; retry later."""


class NotReady(RequestError):
    """The deployment cannot answer (its artifacts are missing or were refused); the client should retry later."""

    status = 503
    error_type = "service_unavailable"
    retry_later = True


class MalformedEvent(MalformedRequest):
    """A Lambda HTTP event that cannot become a request (missing or mistyped fields, unencodable text)."""

    strict_status = 400
    error_type = "invalid_request_error"


class ClientDisconnected(RequestError):
    """The client went away before its whole body arrived; nobody reads the answer, the log has one line."""

    status = 400   # never read by anyone; 400 rather than nginx's non-standard 499
    error_type = "client_disconnected"


class InferenceFailed(RequestError):
    """Inference broke for a reason of ours; the client sees only this, the log has the traceback."""

    error_type = "internal_error"
