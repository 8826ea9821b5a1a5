"""The one error tree of the build wing: every error a build-side command raises on purpose is a `BuildError`.

`BuildError` is a `LayaError`, so the project keeps one root. Where a class was a `ValueError`,
`RuntimeError` or `FileNotFoundError` before it had a place here, it stays one: callers that catch the
builtin keep working. `cli.main` turns a `BuildError` into one line and a non-zero exit. Plain
`ValueError`s remain only for argument validation (an unknown target, candidate or kind).
"""

from typing import Any

from laya_serverless.errors import ArtifactError, LayaError


class BuildError(LayaError):
    """Base of every error the build side raises on purpose."""


class GateFailed(BuildError):
    """The parity gate refused a configuration: it is never published. `report` holds every failing row."""

    def __init__(self, message: str, report: Any = None) -> None:
        super().__init__(message)
        self.report = report


class DeployFailed(BuildError):
    """A step of `laya-artifacts deploy` could not go on. Raised inside a step with the reason alone; the command
    raises it again naming the step (`step`), as its one line: "step 4/6 deploy: cdk exited 1 ..."."""

    def __init__(self, message: str, step: str | None = None) -> None:
        super().__init__(message)
        self.step = step


class DemoError(BuildError, ArtifactError):
    """The shipped demo files, or the installed encoder, are not the ones the demo head was trained with."""


class CheckpointError(BuildError, ValueError):
    """A checkpoint cannot be made or resolved as asked (no init law for a tensor, a hub answer without a commit)."""


class CheckpointNotFound(BuildError, FileNotFoundError):
    """A checkpoint to build is not there, or is not in the Laya layout."""


class GateCasesError(BuildError, ValueError):
    """A gate-case file (or a corpus) that cannot be used; the message names every bad line."""


class GoldensError(BuildError, RuntimeError):
    """Upstream could not record a golden row (non-finite logits)."""


class ExportError(BuildError, ValueError):
    """A checkpoint's graph cannot be exported or converted as asked (a layout, a cycle, a lost marker)."""


class SearchError(BuildError, ValueError):
    """The precision search cannot run a candidate on what it was given (no selection rows, no calibration)."""


class SmoothingNotExact(SearchError):
    """A smoothed FP32 graph moved the answers past the FP32 tolerance: that candidate is not built."""


class EmulationError(BuildError, RuntimeError):
    """The gate under qemu could not run, failed, or answered other questions than the native run."""


class OutputExists(BuildError, FileExistsError):
    """A build's output directory is not empty: builds never overwrite an artifact."""


class QatError(BuildError, ValueError):
    """A quantization-aware build cannot go on as asked (the wrong goldens, a copy of other weights, a lost record)."""


class PackageError(BuildError, RuntimeError):
    """A pinned download for the Lambda package does not hash to its pin."""


class LockError(BuildError, ValueError):
    """The lock cannot be installed as it is: the message names the package and the command that rewrites it."""


class ProbeError(BuildError, RuntimeError):
    """The emulated package could not be run (no build, no emulator, or it failed): the message says which."""


class TuneError(BuildError, ValueError):
    """Options `tune` cannot run with; the message says which."""


class PriceError(BuildError, ValueError):
    """A price file that cannot be used; the message names the field."""


class WorkloadError(BuildError, ValueError):
    """A workload line that is not a Jev request; the message names the file and line."""


class PowerTuningError(BuildError, RuntimeError):
    """The state machine could not be started, failed, or answered something this module cannot read."""


__all__ = ["BuildError", "CheckpointError", "CheckpointNotFound", "DemoError", "DeployFailed", "EmulationError",
           "ExportError", "GateCasesError", "GateFailed", "GoldensError", "LockError", "OutputExists",
           "PackageError", "PowerTuningError", "PriceError", "ProbeError", "QatError", "SearchError",
           "SmoothingNotExact", "TuneError", "WorkloadError"]
