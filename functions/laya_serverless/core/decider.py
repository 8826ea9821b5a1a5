"""The decider: typed questions about states, answered by one ONNX session run per pass.

    tokenize (state once per request, question side cached) -> rows -> session -> decode -> gate
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from .. import observe
from ..artifact.cpu import cpu_profile
from ..artifact.fetch import DEFAULT_CACHE_DIR, fetch_verified
from ..artifact.gpu import gpu_profile, unproven_on_this_gpu
from ..artifact.layout import DECODE_CONFIG_FILE, GRAPH_FILE, TOKENIZER_FILE, DecodeConfig
from ..artifact.manifest import verify_artifact
from ..artifact.platform import gated_elsewhere, unproven_here
from ..artifact.positions import graph_positions
from ..artifact.store import open_store
from ..artifact.targets import CPU_INT8
from ..artifact.trust import trusted_artifact
from ..errors import ArtifactError, InferenceError, StateError
from .abstention import Threshold, apply_abstention, check_min_confidence
from .controls import check_batch_size, check_budget, check_position_limit
from .decode import MODEL_NAME, build_answer, option_probabilities, softmax_rows, temperature_for
from .fallback import open_decision_session, request_scope
from .providers import CPU, ONNXRUNTIME, Placement, device_of_target
from .questions import Question, parse_questions
from .sequence import Row, build_row, encode_state
from .session import DecisionSession, Feeds, Loading, Threads, collate
from .tokenize import TextEncoder

# Upstream sorts states by length inside windows of this many passes.
SORT_WINDOW_PASSES = 8


class Decider:
    """Answers `choice`, `score` and `noul` questions about a state with one decision model."""

    def __init__(self, session: DecisionSession, encoder: TextEncoder, config: DecodeConfig) -> None:
        self.session = session
        self.encoder = encoder
        self.config = config

    @classmethod
    def from_artifact(cls, artifact_dir: str | Path, threads: Threads = None, verify: bool = True, *,
                      device: str = CPU, cpu_retry: bool = False, placement: Placement = ONNXRUNTIME,
                      graph: Path | None = None, files: Mapping[str, Path] | None = None,
                      release_graph: Callable[[], None] | None = None) -> Decider:
        """Open an artifact directory: graph, tokenizer and decode config.

        With `verify` (the default) the manifest and the hash of every file are checked first,
        before any byte is parsed; `verify=False` opens an unpublished export (tests, benchmarks).
        `device` is where the session must run (`core.providers`: refused, never moved, when it cannot);
        `cpu_retry` lets a GPU out-of-memory request run again on the CPU (`core.fallback`); `graph`, the graph
        where the fetch kept it (in memory, `artifact.fetch.MemoryFile`), if not in the directory; `files`, where
        to read each verified file (`artifact.fetch.Fetched.files`: the handles that were verified);
        `release_graph`, what frees the graph's bytes, called as soon as onnxruntime has parsed them (a CPU session).
        """
        path = Path(artifact_dir)
        if verify:
            verify_artifact(path)
        files = files or {}
        graph = graph or files.get(GRAPH_FILE)
        config = DecodeConfig.load(path, files.get(DECODE_CONFIG_FILE))
        encoder = TextEncoder.from_artifact(path, file=files.get(TOKENIZER_FILE))
        # read before the session: the graph's bytes may be released while it is made
        config = replace(config, max_positions=graph_positions(graph or path / GRAPH_FILE))
        # a level recorded by the build means compact storage (`layout.DecodeConfig.load_optimization`): widen it
        loading = Loading(config.session_level, release_graph, restore=config.load_optimization is not None)
        with observe.span(observe.SESSION):
            session = open_decision_session(graph or path / GRAPH_FILE, device, threads=threads, loading=loading,
                                            cpu_retry=cpu_retry, placement=placement)
        return cls(session, encoder, config)

    @classmethod
    def from_store(cls, uri: str | Path, checkpoint: str, target: str = CPU_INT8, *,
                   cache_dir: str | Path = DEFAULT_CACHE_DIR, threads: Threads = None,
                   s3_client: Any = None, keys: Sequence[str] = (),
                   here: Callable[[], dict[str, Any]] | None = None) -> Decider:
        """Resolve the published artifact of (checkpoint, target) as the server does, fetch it verified, and open it.

        `keys` (KMS key ARNs or PEM public-key files, what `LAYA_ARTIFACT_KEYS` holds): its signature and the
        latest signed release are required. Always: its manifest must name (checkpoint, target) with a passing
        gate, and an int8 artifact whose gate never covered this CPU's int8 kernels (`here`, default this CPU's
        profile) is refused, as is a cuda one on a GPU it was not gated on."""
        store = open_store(uri, s3_client=s3_client)
        artifact_id, manifest = trusted_artifact(store, checkpoint, target, tuple(keys))
        if device_of_target(target) == CPU:
            refused = gated_elsewhere(manifest[1], artifact_id) or unproven_here(
                manifest[1], artifact_id, store, (here or cpu_profile)())
        else:
            refused = unproven_on_this_gpu(manifest[1], artifact_id, store, (here or gpu_profile)())
        if refused is not None:
            raise ArtifactError(refused)
        fetched = fetch_verified(store, artifact_id, manifest, Path(cache_dir))
        try:  # fetch verified every file, and they are read through its handles; a cuda-* target opens on the GPU
            return cls.from_artifact(fetched.directory, threads=threads, verify=False, device=device_of_target(target),
                                     files=fetched.files)
        finally:
            fetched.release()

    def predict(self, state: Any, questions: dict[str, Any], *, max_len: int | None = None,
                head_max_len: int | None = None, min_confidence: Threshold | None = None) -> dict[str, Any]:
        """Answer every question about one state, in one session run."""
        return self.predict_batch([state], questions, max_len=max_len, head_max_len=head_max_len,
                                  min_confidence=min_confidence)[0]

    def predict_batch(self, states: Sequence[Any], questions: dict[str, Any], batch_size: int | None = None, *,
                      max_len: int | None = None, head_max_len: int | None = None,
                      min_confidence: Threshold | None = None,
                      sort_by_length: bool = False) -> list[dict[str, Any]]:
        """Answer the same questions about many states, `batch_size` states per session run."""
        if isinstance(states, str | bytes | dict) or not isinstance(states, Sequence):
            raise StateError("predict_batch expects a list of states; pass a single state to predict()")
        if any(state is None for state in states):
            raise StateError("state must not be None; pass a string, dict, or list")
        threshold = check_min_confidence(min_confidence) if min_confidence is not None else None
        width = check_budget("max_len", max_len) or self.config.max_len
        head_width = check_budget("head_max_len", head_max_len) or self.config.head_max_len
        check_position_limit("max_len", max_len, self.config.max_positions)
        check_position_limit("head_max_len", head_max_len, self.config.max_positions)
        batch_size = check_batch_size(batch_size)
        parsed = parse_questions(questions)
        if not parsed:
            results = [{"model": MODEL_NAME, "answers": {}, "usage": {"input_tokens": 0, "output_tokens": 0}}
                       for _ in states]
        else:
            with request_scope(self.session):
                results = self._answer(list(states), parsed, width, head_width, batch_size, sort_by_length)
        apply_abstention(results, threshold)
        return results

    def check_budgets(self, questions: dict[str, Any], max_len: int | None = None,
                      head_max_len: int | None = None) -> None:
        """Refuse what `predict_batch` would refuse of these budgets for every state, before any state runs: past
        the encoder's positions, or too small for the questions' option markers (a job checks at submission)."""
        width = check_budget("max_len", max_len) or self.config.max_len
        head_width = check_budget("head_max_len", head_max_len) or self.config.head_max_len
        check_position_limit("max_len", max_len, self.config.max_positions)
        check_position_limit("head_max_len", head_max_len, self.config.max_positions)
        self.rows_for("", parse_questions(questions), width, head_width)  # the markers depend on the questions only

    def rows_for(self, state: Any, questions: Sequence[Question], max_len: int, head_max_len: int) -> list[Row]:
        """One state's rows, its text tokenized once for every question."""
        tokens = encode_state(self.encoder, self.config.special, state)
        return [build_row(self.encoder, self.config.special, q, tokens, max_len, head_max_len) for q in questions]

    def feeds(self, rows: Sequence[Row], questions: Sequence[Question]) -> Feeds:
        """The graph's inputs for rows of states that share the question list."""
        types = [q.type_index for q in questions] * (len(rows) // max(1, len(questions)))
        return collate(rows, types, self.config.special.pad_id)

    def run_rows(self, rows: Sequence[Row], questions: Sequence[Question]) -> tuple[np.ndarray, np.ndarray]:
        """Logits and action probabilities for rows of states that share the question list."""
        logits, act_logits = self.session.run(self.feeds(rows, questions))
        if not (np.all(np.isfinite(logits)) and np.all(np.isfinite(act_logits))):
            raise InferenceError("the model returned non-finite values")
        return logits, softmax_rows(act_logits)

    def _answer(self, states: list[Any], questions: list[Question], max_len: int, head_max_len: int,
                batch_size: int | None, sort_by_length: bool) -> list[dict[str, Any]]:
        chunk = batch_size if batch_size and batch_size > 0 else len(states)
        reorder = sort_by_length and 1 < chunk < len(states)
        window = chunk * SORT_WINDOW_PASSES if reorder else chunk
        results: list[dict[str, Any]] = []
        for start in range(0, len(states), window):
            encoded = [self.rows_for(s, questions, max_len, head_max_len) for s in states[start:start + window]]
            order = list(range(len(encoded)))
            if reorder:
                order.sort(key=lambda i: max(len(r.ids) for r in encoded[i]))
            window_results: list[dict[str, Any]] = [{}] * len(encoded)
            for offset in range(0, len(order), chunk):
                indices = order[offset:offset + chunk]
                rows = [row for i in indices for row in encoded[i]]
                logits, act = self.run_rows(rows, questions)
                for n, i in enumerate(indices):
                    first = n * len(questions)
                    window_results[i] = self._result(encoded[i], questions, logits[first:], act[first:])
            results.extend(window_results)
        return results

    def _result(self, rows: list[Row], questions: list[Question], logits: np.ndarray,
                act: np.ndarray) -> dict[str, Any]:
        answers = {}
        for j, (row, question) in enumerate(zip(rows, questions, strict=True)):
            k = len(row.markers)
            temperature = temperature_for(self.config, question.type_index, k)
            p = option_probabilities(logits[j, :k], temperature, question.option_order)
            answers[question.qid] = build_answer(question, p, float(act[j, 0]))
        return {"model": MODEL_NAME, "answers": answers, "usage": _usage(rows, questions)}


def _usage(rows: list[Row], questions: list[Question]) -> dict[str, Any]:
    dropped = max(r.state_tokens - r.state_tokens_used for r in rows)
    usage: dict[str, Any] = {
        "input_tokens": sum(len(r.ids) for r in rows),
        "output_tokens": 0,
        "state_tokens": rows[0].state_tokens,
        "state_tokens_dropped": dropped,
        "truncated": dropped > 0,
        "truncated_questions": [q.qid for q, r in zip(questions, rows, strict=True) if r.state_truncated],
    }
    collapsed = {
        q.qid: {"total": q.n_options, "distinct": r.options_distinct, "tokens_per_option": r.tokens_per_option}
        for q, r in zip(questions, rows, strict=True) if r.options_distinct < q.n_options
    }
    if collapsed:
        usage["options"] = collapsed
    return usage
