"""Golden rows recorded from upstream laya on PyTorch CPU FP32: the reference every build is gated against.

A golden file (format 2) holds the gate corpus (`gate_corpus`: its version, sha256 and counts) and,
per case, the inputs (id, split, source, language, state, questions, controls), a sha256 of each
row's token ids with its length and markers, the raw option logits and the action probabilities;
the questions upstream refuses on this checkpoint's budget are kept with upstream's message (the
runtime must refuse them with the same words). Plus the upstream versions, the CPU family and the
checkpoint's revision and weight hash. Replaying it needs no torch, so the gate can run on the
machine that will serve.

Format 1 (the 13 fixed cases, full token ids and upstream's answers) still replays.
"""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from laya_artifacts.checkpoints.sources import weights_sha256
from laya_artifacts.errors import GoldensError
from laya_artifacts.goldens.resume import PARTIAL_SUFFIX, Meter, PartialWriter, read_partial
from laya_serverless.artifact.cpu import cpu_family
from laya_serverless.gate.splits import token_digest

GOLDENS_FILE = "goldens.json"
# Golden files shipped as package data, named by their weights' sha256 (first 16 hex): the demo's.
SHIPPED_GOLDENS = Path(__file__).parent / "shipped_goldens"
GOLDENS_FORMAT = 2
RECORD_THREADS = 1
RECORD_WORKERS = 1


def _f32(value: Any) -> float:
    """The shortest decimal that reads back as the same float32 (a third of the repr of its double)."""
    import numpy as np

    return float(str(np.float32(value)))


def _encode_case(agent: Any, case: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]], dict[str, str]]:
    """(accepted question ids, upstream's encoded rows for them, {qid: refusal message}) for one case."""
    questions = case["questions"]
    for qid, definition in questions.items():
        agent._check_question(qid, definition)  # upstream's own validation, before any encoding
    internal = {qid: agent._to_internal(definition) for qid, definition in questions.items()}
    try:
        return list(questions), agent._encode_state(case["state"], list(questions), internal, **case["controls"]), {}
    except ValueError:
        pass
    # Some question does not fit this checkpoint's budget: keep the others, record why it was refused.
    refused: dict[str, str] = {}
    for qid in questions:
        try:
            agent._encode_state(case["state"], [qid], internal, **case["controls"])
        except ValueError as exc:
            refused[qid] = str(exc)
    accepted = [qid for qid in questions if qid not in refused]
    items = agent._encode_state(case["state"], accepted, internal, **case["controls"]) if accepted else []
    return accepted, items, refused


def record_goldens(checkpoint_dir: Path, name: str, revision: str | None = None, *,
                   cases: Sequence[dict[str, Any]] | None = None, gate_cases: Iterable[str | Path] = (),
                   threads: int = RECORD_THREADS, workers: int = RECORD_WORKERS, partial: Path | None = None,
                   progress: Callable[[str], None] = lambda _m: None) -> dict[str, Any]:
    """Run upstream laya on PyTorch CPU FP32 over the gate corpus (or `cases`, e.g. a subset of it).

    `gate_cases` adds users' files to the built-in corpus (`gate_corpus.read_gate_cases`); they are
    read and checked before torch is imported, so a malformed line costs nothing. Torch runs on
    `threads` intra-op threads (one by default: a neighbour on a shared core slowed its 2-thread
    pool 20-50x; the thread count is recorded with the reference), in `workers` processes (cases
    dealt out one at a time; 1 records in this process). With `partial` (a file) every case is kept
    as it is recorded and a restart continues where the last run stopped (`goldens/resume.py`).
    """
    from laya_artifacts.goldens.corpus import CORPUS_VERSION, corpus_sha256, gate_corpus, summarize

    cases = list(cases) if cases is not None else gate_corpus(gate_cases)
    header = {"weights_sha256": weights_sha256(checkpoint_dir), "corpus_sha256": corpus_sha256(cases),
              "torch_threads": threads}
    done = read_partial(Path(partial), header) if partial is not None else {}
    if done:
        progress("    resuming: %d of %d cases were recorded already (%s)" % (len(done), len(cases), partial))
    pending = [(i, case) for i, case in enumerate(cases) if i not in done]
    meter = Meter(len(cases), sum(len(c["questions"]) for c in cases), len(done),
                  sum(len(c["questions"]) for i, c in enumerate(cases) if i in done), progress)
    writer = PartialWriter(None if partial is None else Path(partial), header)
    try:
        meta = _record_pending(Path(checkpoint_dir), pending, threads, workers, done, writer, meter)
    finally:
        writer.close()
    rows = [done[i] for i in range(len(cases))]
    max_len = meta["max_len"]
    summary = summarize(cases)
    summary["refused_rows"] = sum(len(r.get("refused", {})) for r in rows)
    summary["cases_by_length"] = dict(Counter(_length_bucket(r.get("state_tokens"), max_len) for r in rows))
    recorded = {
        "format": GOLDENS_FORMAT,
        "checkpoint": {"name": name, "revision": revision, "weights_sha256": header["weights_sha256"]},
        "reference": {"laya": meta["laya"], "torch": meta["torch"], "device": "cpu", "precision": "fp32",
                      "cpu": cpu_family(), "torch_threads": threads, "max_len": max_len,
                      "head_max_len": meta["head_max_len"]},
        "corpus": {"version": CORPUS_VERSION, "sha256": header["corpus_sha256"], "summary": summary},
        "rows": rows,
    }
    writer.finish()
    # JSON-pure, exactly as a golden file reads back (numeric labels become string keys).
    return json.loads(json.dumps(recorded, ensure_ascii=False))


_AGENT: Any = None  # a recording worker's upstream agent (`_worker_start`)


def _open_agent(checkpoint_dir: Path, threads: int) -> Any:
    import laya
    import torch

    torch.set_num_threads(threads)
    return laya.Agent(str(checkpoint_dir), device="cpu")


def _meta(agent: Any) -> dict[str, Any]:
    import laya
    import torch

    return {"laya": laya.__version__ if hasattr(laya, "__version__") else "0.4.15", "torch": torch.__version__,
            "max_len": int(agent.cfg.get("max_len", 512)), "head_max_len": int(agent.cfg.get("head_max_len", 192))}


def _worker_start(checkpoint_dir: Path, threads: int) -> None:
    global _AGENT
    _AGENT = _open_agent(checkpoint_dir, threads)


def _worker_meta() -> dict[str, Any]:
    return _meta(_AGENT)


def _worker_case(index: int, case: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    return index, _record_case(_AGENT, case)


def _record_pending(checkpoint_dir: Path, pending: Sequence[tuple[int, dict[str, Any]]], threads: int, workers: int,
                    done: dict[int, dict[str, Any]], writer: PartialWriter, meter: Meter) -> dict[str, Any]:
    """Record `pending` (index, case) into `done`, each kept by `writer` as it comes; returns the reference's facts."""
    def keep(index: int, row: dict[str, Any]) -> None:
        done[index] = row
        writer.append(index, row)
        meter.update(len(row["questions"]))

    if workers <= 1 or len(pending) <= 1:
        import torch

        before = torch.get_num_threads()
        try:
            agent = _open_agent(checkpoint_dir, threads)
            for index, case in pending:
                keep(index, _record_case(agent, case))
            return _meta(agent)
        finally:
            torch.set_num_threads(before)
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    # spawn: a forked child would inherit this process's torch thread pool state
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"), initializer=_worker_start,
                             initargs=(checkpoint_dir, threads)) as pool:
        futures = [pool.submit(_worker_case, index, case) for index, case in pending]
        try:
            for future in as_completed(futures):
                keep(*future.result())
        except BaseException:
            for future in futures:
                future.cancel()
            raise
        return pool.submit(_worker_meta).result()


def _record_case(agent: Any, case: dict[str, Any]) -> dict[str, Any]:
    """One case's golden row, as upstream encodes and answers it."""
    import numpy as np
    import torch
    from laya.common import collate_items

    from laya_artifacts.goldens.corpus import GateCasesError

    try:
        _, items, refused = _encode_case(agent, case)
    except (ValueError, TypeError) as exc:
        raise GateCasesError("%s: upstream laya cannot answer case %r: %s"
                             % (case.get("origin", case["source"]), case["id"], exc)) from exc
    row = {k: case[k] for k in ("id", "source", "lang", "split", "state", "questions", "controls")}
    if refused:  # the rows below are the accepted questions, in order
        row["refused"] = refused
    if items:
        with torch.no_grad():
            logits, act = agent._forward(collate_items([items], agent.tok.pad_token_id))
        if not np.isfinite(logits).all():
            raise GoldensError("upstream returned non-finite logits for case %r" % case["id"])
        row.update({
            "token_ids_sha256": [token_digest(item["ids"]) for item in items],
            "n_tokens": [len(item["ids"]) for item in items],
            "markers": [item["markers"] for item in items],
            "logits": [[_f32(v) for v in logits[j, : len(item["markers"])]] for j, item in enumerate(items)],
            "act_probabilities": [[_f32(v) for v in act[j]] for j in range(len(items))],
            "state_tokens": items[0]["state_stats"]["state_tokens"],
            "truncated": any(item["state_stats"]["truncated"] for item in items),
        })
    return dict(json.loads(json.dumps(row, ensure_ascii=False)))  # as it reads back from the partial file


def _length_bucket(state_tokens: int | None, max_len: int) -> str:
    if state_tokens is None:
        return "refused"
    if state_tokens <= 32:
        return "<=32 tokens"
    if state_tokens <= 128:
        return "33-128 tokens"
    return "129-max_len tokens" if state_tokens <= max_len else "longer than max_len"


def merge_goldens(goldens: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """Goldens plus rows recorded later (users' cases) for the same checkpoint; ids must not repeat."""
    from laya_artifacts.goldens.corpus import GateCasesError, corpus_sha256

    seen = {row["id"] for row in goldens["rows"]}
    clash = sorted(row["id"] for row in extra["rows"] if row["id"] in seen)
    if clash:
        raise GateCasesError("gate case id(s) already in the goldens: %s" % ", ".join(clash))
    merged = json.loads(json.dumps(goldens))
    merged["rows"] += extra["rows"]
    merged.setdefault("corpus", {})["sha256"] = corpus_sha256(merged["rows"])
    merged["corpus"].setdefault("summary", {})["user_rows_added"] = sum(len(r["questions"]) for r in extra["rows"])
    return merged


def partial_path(directory: Path) -> Path:
    """Where a recording into `directory` keeps its rows until `goldens.json` is written (`goldens/resume.py`)."""
    return Path(directory) / (Path(GOLDENS_FILE).stem + PARTIAL_SUFFIX)


def write_goldens(goldens: dict[str, Any], directory: Path) -> Path:
    """Write `goldens.json`: the header indented, then one line per case (diffable, a third of indent=1)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / GOLDENS_FILE
    head = {k: v for k, v in goldens.items() if k != "rows"}
    text = json.dumps(head, ensure_ascii=False, indent=1)[:-2]
    rows = ",\n".join("  " + json.dumps(row, ensure_ascii=False) for row in goldens["rows"])
    path.write_text(text + ',\n "rows": [\n' + rows + "\n ]\n}\n", encoding="utf-8")
    return path


def load_goldens(path: Path) -> dict[str, Any]:
    path = Path(path)
    if path.is_dir():
        path = path / GOLDENS_FILE
    return json.loads(path.read_text(encoding="utf-8"))


def shipped_goldens(checkpoint_dir: Path, shipped: Path = SHIPPED_GOLDENS) -> Path | None:
    """The golden file shipped with the package for exactly these weights and today's built-in corpus, if any.

    Upstream's answers are a function of the weights and the rows, so a file recorded once with the pinned
    laya and torch is the reference on every machine. Its CPU family is recorded: PyTorch's FP32 rounds
    differently per family in the last bits (the tests replay committed goldens to 1e-4 on other families,
    docs/artifacts.md#goldens).
    """
    from laya_artifacts.goldens.corpus import builtin_cases, corpus_sha256

    weights = weights_sha256(Path(checkpoint_dir))
    path = Path(shipped) / ("%s.json" % weights[:16])
    if not path.is_file():
        return None
    goldens = load_goldens(path)
    if goldens["checkpoint"]["weights_sha256"] != weights or \
            goldens.get("corpus", {}).get("sha256") != corpus_sha256(builtin_cases()):
        return None  # another corpus version: record again
    return path


def goldens_for_build(checkpoint_dir: Path, name: str, revision: str | None, goldens_path: Path | None,
                      user_cases: list[dict[str, Any]], progress: Callable[[str], None]) -> dict[str, Any]:
    """A build's gate corpus: the built-in cases and `user_cases` recorded with upstream now, or the goldens at
    `goldens_path` (noting weights other than these) with `user_cases` recorded and merged in."""
    from laya_artifacts.goldens.corpus import builtin_cases

    if goldens_path is None:
        cases = builtin_cases() + user_cases
        progress("1/4 recording the gate corpus with upstream laya (PyTorch CPU FP32): %d cases, %d rows%s"
                 % (len(cases), sum(len(c["questions"]) for c in cases),
                    ", %d of them yours" % len(user_cases) if user_cases else ""))
        return record_goldens(Path(checkpoint_dir), name, revision, cases=cases, progress=progress)
    progress("1/4 reading goldens from %s" % goldens_path)
    goldens = load_goldens(Path(goldens_path))
    if goldens.get("checkpoint", {}).get("weights_sha256") != weights_sha256(Path(checkpoint_dir)):
        progress("    note: the goldens were recorded from other weights than %s" % checkpoint_dir)
    if user_cases:
        progress("    recording your %d gate cases with upstream laya" % len(user_cases))
        goldens = merge_goldens(goldens, record_goldens(Path(checkpoint_dir), name, revision, cases=user_cases))
    return goldens


def corpus_directory(checkpoint_dir: Path, name: str, cache: Path) -> Path:
    """Where a checkpoint's recorded corpus is kept, one per weights: beside the checkpoint when it lives in
    `cache` (as the demo does), else `cache/goldens/NAME-SHA12`; every target and every build of it reuses it."""
    checkpoint_dir = Path(checkpoint_dir)
    if checkpoint_dir.resolve().is_relative_to(Path(cache).resolve()):
        return checkpoint_dir.parent / (checkpoint_dir.name + "-goldens")
    safe = re.sub(r"[^A-Za-z0-9._-]+", "--", name)
    return Path(cache) / "goldens" / ("%s-%s" % (safe, weights_sha256(checkpoint_dir)[:12]))


def recorded_goldens(checkpoint_dir: Path, name: str, directory: Path, revision: str | None = None,
                     progress: Callable[[str], None] = lambda _m: None, shipped: Path = SHIPPED_GOLDENS) -> Path:
    """`directory/goldens.json`: the built-in gate corpus recorded with upstream the first time, reused after
    (every target of a checkpoint is gated on the same rows, and recording is most of a build's time). The
    package's own file for these weights (the demo's) is used instead of recording, when its corpus is today's."""
    path = Path(directory) / GOLDENS_FILE
    found = None if path.is_file() else shipped_goldens(Path(checkpoint_dir), shipped)
    if found is not None:
        reference = load_goldens(found)["reference"]
        progress("using the goldens shipped for these weights (%s: upstream laya %s, torch %s, CPU FP32 on %s)"
                 % (found.name, reference.get("laya"), reference.get("torch"), reference.get("cpu")))
        Path(directory).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(found, path)
    if not path.is_file():
        progress("recording the gate corpus with upstream laya (PyTorch CPU FP32), once for this checkpoint")
        write_goldens(record_goldens(Path(checkpoint_dir), name, revision, progress=progress,
                                     partial=partial_path(Path(directory))), Path(directory))
    return path
