"""Session-scoped test checkpoints and artifacts, built offline once per run (shared by xdist workers)."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import shutil
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from tests.paths import GOLDENS

_ROW_LISTS = ("token_ids_sha256", "n_tokens", "markers", "logits", "act_probabilities")


def golden_slice(kind: str, keep_case: Callable[[int, dict[str, Any]], bool] = lambda _i, _row: True,
                 keep_question: Callable[[dict[str, Any]], bool] = lambda _q: True) -> dict[str, Any]:
    """A copy of the committed goldens of `kind` with only some cases, and within them some questions.

    Model-running tests gate on slices so the suite stays within minutes on two cores; the whole
    corpus is gated once (`test_fp32_build_meets_the_fp32_tolerance_on_the_whole_corpus`).
    """
    goldens = json.loads((GOLDENS / kind / "goldens.json").read_text(encoding="utf-8"))
    rows = []
    for index, row in enumerate(goldens["rows"]):
        if not keep_case(index, row):
            continue
        refused = row.get("refused", {})
        accepted = [qid for qid in row["questions"] if qid not in refused]
        kept = [qid for qid in row["questions"] if keep_question(row["questions"][qid])]
        if not kept:
            continue
        positions = [accepted.index(qid) for qid in kept if qid in accepted]
        row = dict(row, questions={qid: row["questions"][qid] for qid in kept})
        if refused:
            row["refused"] = {qid: m for qid, m in refused.items() if qid in kept}
        for key in _ROW_LISTS:
            if key in row:
                row[key] = [row[key][i] for i in positions]
        rows.append(row)
    goldens["rows"] = rows
    return goldens


def write_goldens_file(goldens: dict[str, Any], directory: Path) -> Path:
    from laya_artifacts.goldens.record import write_goldens

    return write_goldens(goldens, directory)


def built_once(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """A directory that `build` fills once per test session, however many pytest-xdist workers ask for it: the
    first builds it under a file lock, in the run's shared temp root, and the others wait and read it."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        root = tmp_path_factory.mktemp(name)
        build(root)
        return root
    from filelock import FileLock

    root = tmp_path_factory.getbasetemp().parent / name
    with FileLock(str(root) + ".lock"):
        if not (root / ".built").exists():
            shutil.rmtree(root, ignore_errors=True)   # a worker that died while building it
            root.mkdir()
            build(root)
            (root / ".built").touch()
    return root


def _build(tmp_path_factory: pytest.TempPathFactory, kind: str) -> tuple[Path, Path]:
    from laya_artifacts.checkpoints.make import make_checkpoint
    from laya_artifacts.export.onnx_export import export_checkpoint

    def build(root: Path) -> None:
        export_checkpoint(make_checkpoint(kind, root / "checkpoint"), root / "export-fp32")

    root = built_once(tmp_path_factory, kind, build)
    return root / "checkpoint", root / "export-fp32"


@pytest.fixture(scope="session")
def minilm(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(checkpoint dir, raw FP32 export) of the pretrained MiniLM encoder with a seeded head."""
    return _build(tmp_path_factory, "minilm")


@pytest.fixture(scope="session")
def tiny_modernbert(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(checkpoint dir, raw FP32 export) of a tiny random ModernBERT with a byte-level BPE tokenizer."""
    return _build(tmp_path_factory, "tiny-modernbert")


def tiny_choice_slice() -> dict[str, Any]:
    """The choice questions of every fourth case of the tiny ModernBERT's committed corpus."""
    return golden_slice("tiny-modernbert", keep_case=lambda i, _row: i % 4 == 0,
                        keep_question=lambda q: q["type"] == "choice")


@pytest.fixture(scope="session")
def tiny_fp32(tmp_path_factory: pytest.TempPathFactory, tiny_modernbert: tuple[Path, Path]) -> Path:
    """A gated, manifested cpu-fp32 artifact of the tiny ModernBERT, against the committed goldens.

    The store, handler and service tests use it: FP32 passes its gate on every x86 CPU, while
    int8 results depend on the CPU's instruction set (VNNI or not), so an int8 fixture would tie
    those tests to one CPU family."""
    from laya_artifacts.build import build_artifact
    from laya_artifacts.spec import BuildSpec

    def build(root: Path) -> None:
        build_artifact(tiny_modernbert[0],
                       BuildSpec.of("cpu-fp32", name="tiny-modernbert",
                                    goldens=GOLDENS / "tiny-modernbert" / "goldens.json"), root / "artifact")

    return built_once(tmp_path_factory, "tiny-fp32", build) / "artifact"


@pytest.fixture(scope="session")
def tiny_int8_goldens(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The golden file `tiny_int8` was gated on (see there)."""
    return write_goldens_file(tiny_choice_slice(), tmp_path_factory.mktemp("tiny-int8-goldens"))


@pytest.fixture(scope="session")
def tiny_int8(tmp_path_factory: pytest.TempPathFactory, tiny_modernbert: tuple[Path, Path],
              tiny_int8_goldens: Path) -> Path:
    """A gated, manifested cpu-int8 artifact of the tiny ModernBERT, built through the precision search.

    The tiny model is random, and its noul temperature (0.5) doubles every error: no reduced-precision
    candidate passes its whole corpus (`test_build.py` shows the search refusing it). Tests that need an
    int8 artifact get the 8-bit weight-only candidate gated on the corpus's choice rows (every fourth
    case), which it meets, with the FP32-speed rule lifted (a 64-wide model gains nothing from int8).
    """
    from laya_artifacts.build import build_artifact
    from laya_artifacts.search import precision as search
    from laya_artifacts.spec import BuildSpec

    def build(root: Path) -> None:
        with pytest.MonkeyPatch.context() as patch:  # a short timing: the speed rule is lifted here anyway
            patch.setattr(search, "SPEED_CASES", 4)
            patch.setattr(search, "SPEED_RUNS", 2)
            build_artifact(tiny_modernbert[0],
                           BuildSpec.of("cpu-int8", name="tiny-modernbert", goldens=tiny_int8_goldens,
                                        candidates=["encoder-weight-only-8bit"], min_speedup=0), root / "artifact")

    return built_once(tmp_path_factory, "tiny-int8", build) / "artifact"


@pytest.fixture
def ieee_floats() -> None:
    """Subnormal floats representable again on this thread. The runtime's first onnxruntime session flushes
    denormals on the thread that creates it (`core/session.py`), for the rest of the process; hypothesis
    refuses to generate floats in that state. Which test creates the first session depends on the order and
    worker the tests run in, so the hypothesis tiers reset the thread's floating-point environment first."""
    import ctypes
    import ctypes.util
    import sys

    if sys.platform != "linux":   # FE_DFL_ENV below is glibc's; elsewhere the state is left as it is
        return
    fe_dfl_env = ctypes.c_void_p(-1)   # glibc's FE_DFL_ENV: the default MXCSR, FTZ and DAZ off
    assert ctypes.CDLL(ctypes.util.find_library("m")).fesetenv(fe_dfl_env) == 0


@pytest.fixture
def close_mangums_loop() -> Iterator[None]:
    """Mangum, built on this (main) thread by a Lambda handler, takes the thread's event loop and never closes
    it; closed here, so that it is not finalized (unclosed, with its sockets) in a later test."""
    yield
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            loop = asyncio.get_event_loop_policy().get_event_loop()
    except RuntimeError:  # none: this test built no handler here, or an earlier one was closed
        return
    if not loop.is_running():
        loop.close()
    asyncio.set_event_loop(None)
    gc.collect()


MOTO_REGION = "us-east-1"


@pytest.fixture
def moto_config() -> dict[str, Any]:
    """moto's configuration for the tests below this conftest (tests/cloud overrides it: its Step Functions
    executes the state machine definitions, moto's ASL interpreter, instead of recording executions)."""
    return {}


@pytest.fixture
def moto_aws(monkeypatch: pytest.MonkeyPatch, moto_config: dict[str, Any]) -> Iterator[Callable[[str], Any]]:
    """The suite's one moto fixture: every AWS API faked for the test, with fake credentials in MOTO_REGION (no
    real call can leave the machine). Yields `client(service)`."""
    import boto3
    from moto import mock_aws

    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.setenv(name, "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", MOTO_REGION)
    with mock_aws(config=cast(Any, moto_config) or None):
        yield lambda service: boto3.client(service, region_name=MOTO_REGION)
