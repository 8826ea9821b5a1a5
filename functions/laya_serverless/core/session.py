"""The model call: collate rows into the graph's inputs and run one ONNX Runtime session.

`DecisionSession` is the seam: the decider needs only `run(feeds) -> (logits, act_logits)`, so
tests can hand it a fake, and a CUDA or other provider is a different session, not a new decider.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ..artifact.layout import GRAPH_INPUTS, GRAPH_OUTPUTS
from ..errors import ArtifactError, InferenceError
from .restore import Widened, widened
from .sequence import Row

# The exported graph takes top-2 of the option probabilities, so every pass needs at least two
# marker columns; the extra masked column does not change any result.
MIN_OPTION_COLUMNS = 2

Feeds = dict[str, np.ndarray]


class DecisionSession(Protocol):
    def run(self, feeds: Feeds) -> tuple[np.ndarray, np.ndarray]: ...


def collate(rows: Sequence[Row], type_indices: Sequence[int], pad_id: int) -> Feeds:
    """Pad rows to the longest one in the pass and lay out the five graph inputs."""
    n = len(rows)
    width = max(len(r.ids) for r in rows)
    columns = max(MIN_OPTION_COLUMNS, max(len(r.markers) for r in rows))
    input_ids = np.full((n, width), pad_id, dtype=np.int64)
    attention = np.zeros((n, width), dtype=np.int64)
    marker_pos = np.zeros((n, columns), dtype=np.int64)
    marker_mask = np.zeros((n, columns), dtype=bool)
    for i, row in enumerate(rows):
        input_ids[i, : len(row.ids)] = row.ids
        attention[i, : len(row.ids)] = 1
        marker_pos[i, : len(row.markers)] = row.markers
        marker_mask[i, : len(row.markers)] = True
    return {
        "input_ids": input_ids,
        "attention_mask": attention,
        "marker_pos": marker_pos,
        "marker_mask": marker_mask,
        "qtype": np.asarray(type_indices, dtype=np.int64),
    }


# An execution provider by name, or (name, provider options) as onnxruntime takes them.
ProviderSpec = str | tuple[str, dict[str, str]]


DENORMALS_AS_ZERO = "session.set_denormal_as_zero"
ARENA_SHRINKAGE = "memory.enable_memory_arena_shrinkage"
INTRA_OP_SPINNING, INTER_OP_SPINNING = "session.intra_op.allow_spinning", "session.inter_op.allow_spinning"


@dataclass(frozen=True)
class Threading:
    """How a session's threads run: intra-op threads (None: ONNX Runtime's default, one per core) and whether
    idle threads spin. Spinning is off: under a CPU quota (Lambda) a spinning thread spends granted time waiting."""

    intra_op: int | None = None
    spinning: bool = False


# A bare count is `Threading(count)`: sessions sized by hand or by `core.cpu_share` are opened the same way.
Threads = int | Threading | None


@dataclass(frozen=True)
class Loading:
    """How a session opens its graph: at which graph-optimization level (a `layout.LOAD_LEVELS` name;
    `DecodeConfig.session_level` says which an artifact needs); what to call once onnxruntime has parsed the
    graph, before it initializes the session: freeing an in-memory graph there keeps its bytes from sitting
    beside the session's own copies at the INIT peak (docs/artifacts.md#loading-a-graph-held-in-memory); and
    whether to widen its FP16-stored weights on the way in (`core.restore`; an artifact stored compactly)."""

    level: str = "ORT_ENABLE_ALL"
    after_parse: Callable[[], None] | None = None
    restore: bool = False


RAW_EXPORT = Loading()  # a raw export's: ORT's full optimization, nothing to free


def _inference_session(graph_path: Path, options: Any, providers: list[Any],
                       after_parse: Callable[[], None] | None) -> Any:
    """onnxruntime's session; with `after_parse`, its two steps (parse, then initialize), which the public
    constructor runs back to back, are run apart and `after_parse` is called between them."""
    import onnxruntime as ort

    if after_parse is None or not hasattr(ort.InferenceSession, "_from_initialized_c_session"):
        session = ort.InferenceSession(str(graph_path), sess_options=options, providers=providers)
        if after_parse is not None:
            after_parse()
        return session
    from onnxruntime.capi import _pybind_state as c_api
    from onnxruntime.capi.onnxruntime_inference_collection import check_and_normalize_provider_args

    names, provider_options = check_and_normalize_provider_args(providers, None, c_api.get_available_providers())
    parsed = c_api.InferenceSession(options, str(graph_path), True, False)  # the graph parsed, not yet initialized
    after_parse()
    parsed.initialize_session(names, provider_options, set())
    return ort.InferenceSession._from_initialized_c_session(parsed)


def _then(first: Callable[[], None], second: Callable[[], None] | None) -> Callable[[], None]:
    def both() -> None:
        first()
        if second is not None:
            second()
    return both


class OnnxDecisionSession:
    """An ONNX Runtime session over an exported decision graph: on the CPU unless `providers` says otherwise
    (`core.providers` chooses them and checks where the session really landed)."""

    def __init__(self, graph_path: Path, threads: Threads = None, optimized_offline: bool = False,
                 providers: Sequence[ProviderSpec] = ("CPUExecutionProvider",), level: str | None = None,
                 after_parse: Callable[[], None] | None = None, restore: bool = False) -> None:
        import onnxruntime as ort

        options = ort.SessionOptions()
        # Denormal floats as zero (FTZ/DAZ on onnxruntime's threads): softmax outputs of long states fall into
        # the denormal range, where x86 arithmetic is many times slower; flushing them moves no probability.
        options.add_session_config_entry(DENORMALS_AS_ZERO, "1")
        # `level`, the artifact's recorded one (`DecodeConfig.session_level`), wins; else a graph optimized when the
        # artifact was built is run as is (optimizing it again would only spend cold-start time), a raw export fully.
        default = "ORT_DISABLE_ALL" if optimized_offline else "ORT_ENABLE_ALL"
        options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level or default)
        threading = threads if isinstance(threads, Threading) else Threading(threads or None)
        if threading.intra_op:
            options.intra_op_num_threads = threading.intra_op
            options.inter_op_num_threads = 1
        spinning = "1" if threading.spinning else "0"
        options.add_session_config_entry(INTRA_OP_SPINNING, spinning)
        options.add_session_config_entry(INTER_OP_SPINNING, spinning)
        if not Path(graph_path).is_file():
            raise ArtifactError("model graph %s is missing" % graph_path)
        # Weights onnxruntime reads in place (`core.restore`): theirs is the only copy, kept as long as the session.
        self._in_place: list[Any] = []
        try:
            # A compact graph's weights widened as it streams in: onnxruntime then never holds FP16 and FP32 at once.
            with widened(Path(graph_path), discard=after_parse is not None) if restore else \
                    nullcontext(Widened(Path(graph_path))) as source:
                for name, array in source.in_place.items():
                    self._in_place.append(ort.OrtValue.ortvalue_from_numpy(array))
                    options.add_initializer(name, self._in_place[-1])
                self._session = _inference_session(source.path, options, list(providers),
                                                   _then(source.parsed, after_parse) if restore else after_parse)
        except ArtifactError:
            raise
        except Exception as exc:  # onnxruntime raises its own Fail/InvalidGraph types
            raise ArtifactError("model graph %s cannot be loaded: %s" % (graph_path, exc)) from exc
        # The CPU arena goes back to its first chunk after every run: it otherwise keeps the largest pass's memory for
        # good (one batch of long states took RSS from 216 MB to 4.4 GB, and it stayed there; docs/operations.md).
        self._run_options = ort.RunOptions()
        self._run_options.add_run_config_entry(ARENA_SHRINKAGE, "cpu:0")
        names = {i.name for i in self._session.get_inputs()}
        if names != set(GRAPH_INPUTS):
            raise ArtifactError("model graph %s takes inputs %s, expected %s"
                                % (graph_path, sorted(names), sorted(GRAPH_INPUTS)))

    def active_providers(self) -> list[str]:
        """The providers onnxruntime actually registered: a CUDA request it could not honour is missing here."""
        return list(self._session.get_providers())

    def run(self, feeds: Feeds) -> tuple[np.ndarray, np.ndarray]:
        try:
            logits, act_logits = self._session.run(list(GRAPH_OUTPUTS), feeds, self._run_options)
        except Exception as exc:
            raise InferenceError("the model session failed: %s" % exc) from exc
        return np.asarray(logits), np.asarray(act_logits)
