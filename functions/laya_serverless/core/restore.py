"""A compact graph's FP16-stored weights widened on their way into onnxruntime, so INIT never holds them all twice.

A `cpu-fp32` artifact stores most weights in FP16, each behind a `Cast` to FP32 (the build's compact storage).
Opened as stored, onnxruntime folds every Cast in one pass while it initializes the session and holds all the FP16
weights beside their FP32 copies: an INIT peak of about 1.45x the session's steady memory. `widened` streams the
graph to onnxruntime through a named pipe instead, and each weight goes one of three ways:

- read only by Gathers (an embedding table): widened here into an array onnxruntime reads in place
  (`SessionOptions.add_initializer`), never copied or parsed;
- up to `artifact.compact.FOLD_SHARE` of the weights' FP32 bytes, in FP16: left as stored for onnxruntime to
  fold, the cheapest way in; what it holds twice while folding is bounded by that share;
- the rest: written as the FP32 tensor its Cast makes, the Cast left out.

Widening runs onnxruntime's own Cast kernel, so every value is the one its folding makes and the answers are the
same bit for bit. A graph only this process can reach (an anonymous memory file) is freed as it streams, behind
what onnxruntime has read; glibc maps large blocks on their own while onnxruntime parses, and the heap's free
pages are given back once the session exists, so that its transient copies leave no holes to count. `artifact.compact`
finds the weights and lays out the graph onnxruntime reads.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import logging
import mmap
import os
import shutil
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from ..artifact.compact import PLACEHOLDER, Part, Weight, cast_model, dims, parts, scan
from ..errors import ArtifactError

CHUNK = 1 << 22              # bytes read, widened and written at a time
PACE_S = 0.0005              # the writer's pause on a full pipe: a blocked writer would be woken at every 8 KiB read
_PUNCH_HOLE = 0x02 | 0x01    # FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE
# glibc's M_MMAP_THRESHOLD while onnxruntime parses, and after: the largest its own adjustment reaches
_MMAP_THRESHOLD, PARSE_MMAP_THRESHOLD, MMAP_THRESHOLD_MAX = -3, 1 << 20, 32 << 20
_LIBC = ctypes.CDLL(None, use_errno=True)
_log = logging.getLogger("laya_serverless")


class _Source:
    """The stored graph, read and widened in chunks; what was read may be freed where the file allows."""

    def __init__(self, graph: Path, discard: bool) -> None:
        import onnxruntime as ort

        self.fd = os.open(graph, os.O_RDONLY)
        # only a file no one else can open by name (an anonymous memory file) is ever freed
        freeable = discard and os.fstat(self.fd).st_nlink == 0 and hasattr(_LIBC, "fallocate")
        self._writable = os.open(graph, os.O_RDWR) if freeable else None
        self._half, self._wide = np.empty(CHUNK // 2, "<f2"), np.empty(CHUNK // 2, "<f4")
        options = ort.SessionOptions()
        options.intra_op_num_threads = options.inter_op_num_threads = 1
        # Made here, on the caller's thread, with the decision session's setting: onnxruntime flushes denormals on
        # the thread that creates the process's first session, once, and the stream's thread must not be that one.
        options.add_session_config_entry("session.set_denormal_as_zero", "1")
        self._cast = ort.InferenceSession(cast_model(), options, providers=["CPUExecutionProvider"])
        self._ort = ort

    def close(self) -> None:
        for fd in (self.fd, self._writable):
            if fd is not None:
                os.close(fd)

    def free(self, start: int, end: int) -> int:
        """Give back the whole pages in [start, end); returns where freeing the pages that follow starts."""
        start, end = (start + 4095) & ~4095, end & ~4095
        if self._writable is not None and end > start:
            _LIBC.fallocate(self._writable, _PUNCH_HOLE, ctypes.c_long(start), ctypes.c_long(end - start))
        return max(start, end)

    def widened(self, start: int, end: int, into: np.ndarray | None = None) -> Iterator[tuple[int, Any]]:
        """(where the chunk ends, its values as FP32) over the FP16 bytes [start, end), into `into` if given."""
        view, done = self._half.view(np.uint8).data, 0
        while start < end:
            size = min(CHUNK, end - start)
            if os.preadv(self.fd, [view[:size]], start) != size:
                raise ArtifactError("the model graph ended early")
            count, start = size // 2, start + size
            out = self._wide[:count] if into is None else into[done: done + count]
            binding = self._cast.io_binding()
            binding.bind_ortvalue_input("x", self._ort.OrtValue.ortvalue_from_numpy(self._half[:count]))
            binding.bind_ortvalue_output("y", self._ort.OrtValue.ortvalue_from_numpy(out))
            self._cast.run_with_iobinding(binding)
            done += count
            yield start, out


def _in_place(source: _Source, buf: Any, weight: Weight) -> np.ndarray:
    shape, size = dims(buf, weight.message), 2 * (weight.raw[1] - weight.raw[0])
    # anonymous memory without numpy's huge-page advice (which can stall on compaction), its pages made at once
    populate = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | getattr(mmap, "MAP_POPULATE", 0)
    flat = np.frombuffer(mmap.mmap(-1, size, flags=populate), dtype="<f4")
    freed = weight.raw[0]
    for stop, _ in source.widened(*weight.raw, into=flat):
        freed = source.free(freed, stop)
    return flat.reshape(shape)


class _Stream(threading.Thread):
    """Writes the parts into the pipe onnxruntime reads; frees the source behind what it has read; keeps its error."""

    def __init__(self, source: _Source, parts: list[Part], pipe: Path) -> None:
        super().__init__(name="laya-graph-stream", daemon=True)
        self.source, self.parts, self.pipe = source, parts, pipe
        self.error: BaseException | None = None
        self.cancelled = threading.Event()
        self._written, self._marks, self._freed, self._splice = 0, deque[tuple[int, int]](), 0, True

    def run(self) -> None:
        while not self.cancelled.is_set():   # never blocks: a session that fails before reading cancels it
            try:
                target = os.open(self.pipe, os.O_WRONLY | os.O_NONBLOCK)
                break
            except OSError:   # ENXIO: onnxruntime has not opened it yet
                time.sleep(0.001)
        else:
            return
        try:
            try:   # fewer, larger hand-overs; any process may ask for up to 1 MiB
                fcntl.fcntl(target, fcntl.F_SETPIPE_SZ, 1 << 20)
            except OSError:
                pass
            self._copy(target, fcntl.fcntl(target, fcntl.F_GETPIPE_SZ))
        except BaseException as exc:   # noqa: BLE001 - handed to the caller with the session's outcome
            self.error = exc
        finally:
            os.close(target)

    def _copy(self, target: int, capacity: int) -> None:
        for part in self.parts:
            if part[0] == "bytes":
                self._put(target, memoryview(part[1]), None, capacity)
            elif part[0] == "widen":
                for stop, chunk in self.source.widened(part[1], part[2]):
                    self._put(target, chunk.view(np.uint8).data, stop, capacity)
            else:
                self._forward(target, part[1], part[2], capacity)

    def _forward(self, target: int, start: int, end: int, capacity: int) -> None:
        """Unchanged bytes: spliced from the source into the pipe (no copy), or read and written where splicing is
        refused."""
        while start < end:
            size = min(CHUNK, end - start)
            if self._splice:
                try:
                    sent = self._wait(partial(os.splice, self.source.fd, target, size, offset_src=start))
                except OSError as exc:
                    if exc.errno not in (errno.EINVAL, errno.ENOSYS, errno.EXDEV):
                        raise
                    self._splice = False
                    continue
                if not sent:
                    raise ArtifactError("the model graph ended early")
                self._moved(sent, start + sent, capacity)
            else:
                sent = len(data := os.pread(self.source.fd, size, start))
                if not sent:
                    raise ArtifactError("the model graph ended early")
                self._put(target, memoryview(data), start + sent, capacity)
            start += sent

    def _put(self, target: int, data: memoryview, stop: int | None, capacity: int) -> None:
        while data:
            sent = self._wait(partial(os.write, target, data))
            data = data[sent:]
            self._moved(sent, None if data else stop, capacity)

    def _wait(self, send: Any) -> int:
        """`send()` once the pipe has room; a pause instead of a blocking call (see `PACE_S`)."""
        while True:
            try:
                return int(send())
            except BlockingIOError:
                if self.cancelled.is_set():
                    raise
                time.sleep(PACE_S)

    def _moved(self, sent: int, stop: int | None, capacity: int) -> None:
        """`sent` bytes more are in the pipe, ending source byte `stop`: what onnxruntime has surely read (all but the
        pipe's capacity) is freed."""
        self._written += sent
        if stop is not None:
            self._marks.append((self._written, stop))
        while self._marks and self._marks[0][0] <= self._written - capacity:
            self._freed = self.source.free(self._freed, self._marks.popleft()[1])


def _mmap_threshold(size: int) -> None:
    """Blocks of `size` bytes or more get their own mapping from glibc, which gives them back when they are freed.
    At 1 MiB while onnxruntime parses: its protobuf copies of the weights, freed as it initializes the session, then
    leave no holes in the heap for the INIT peak to count."""
    if hasattr(_LIBC, "mallopt"):   # glibc's; elsewhere the heap behaves as it does
        _LIBC.mallopt(_MMAP_THRESHOLD, size)


def _give_back_heap() -> None:
    """The heap's free pages back to the system once the session exists: onnxruntime's transient copies of the
    weights leave holes in the heap that would otherwise stay in the process's memory (glibc's `malloc_trim`)."""
    _mmap_threshold(MMAP_THRESHOLD_MAX)
    if hasattr(_LIBC, "malloc_trim"):
        _LIBC.malloc_trim(0)


@dataclass
class Widened:
    """What onnxruntime opens: `path` (the pipe, or the graph itself when it stores nothing to widen), the FP32
    weights it reads in place, by name (`SessionOptions.add_initializer`: keep them as long as the session), and
    what to call between its parse and its initialization."""

    path: Path
    in_place: dict[str, np.ndarray] = field(default_factory=dict)
    parsed: Callable[[], None] = lambda: None   # to call once onnxruntime has parsed `path`, before it initializes


@contextmanager
def widened(graph: Path, *, discard: bool = False) -> Iterator[Widened]:
    """`graph` as onnxruntime should open it, its FP16-stored weights widened (see the module). With `discard`, a
    graph in an anonymous memory file is freed as it streams (unreadable afterwards). Open the session inside the
    block: the pipe and the in-place weights' placeholder are removed on leaving it."""
    source, folder = _Source(graph, discard), None
    try:
        with mmap.mmap(source.fd, 0, prot=mmap.PROT_READ) as whole, memoryview(whole) as buf:
            try:
                found = scan(buf)
                folder = _folder(found[2]) if found else None
                if found and folder:
                    plan = parts(buf, *found)
                    in_place = {w.name: _in_place(source, buf, w) for w in found[2] if w.way == "in-place"}
            except (ValueError, IndexError, UnicodeDecodeError) as exc:
                raise ArtifactError("model graph %s is not a readable ONNX model: %s" % (graph, exc)) from exc
        if folder is None:
            yield Widened(graph)
            return
        yield from _streamed(source, plan, in_place, folder)
        _give_back_heap()
    finally:
        source.close()
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


def _folder(weights: list[Weight]) -> Path | None:
    """A private folder with the pipe onnxruntime reads and, for in-place weights, the sparse file they are declared
    to live in (never read: onnxruntime only checks that it exists); None where this system cannot make them, and
    the graph is then opened as stored."""
    folder = Path(tempfile.mkdtemp(prefix="laya-graph-"))
    try:
        os.mkfifo(folder / "model.onnx", 0o600)
        with open(folder / PLACEHOLDER, "wb") as placeholder:
            placeholder.truncate(max([2 * (w.raw[1] - w.raw[0]) for w in weights if w.way == "in-place"] or [0]))
    except OSError as exc:
        _log.warning("the model graph is opened as stored (more memory at INIT): no pipe in %s (%s)", folder, exc)
        shutil.rmtree(folder, ignore_errors=True)
        return None
    return folder


def _streamed(source: _Source, plan: list[Part], in_place: dict[str, np.ndarray],
              folder: Path) -> Iterator[Widened]:
    stream = _Stream(source, plan, folder / "model.onnx")
    stream.start()
    _mmap_threshold(PARSE_MMAP_THRESHOLD)
    try:
        yield Widened(folder / "model.onnx", in_place, partial(_mmap_threshold, MMAP_THRESHOLD_MAX))
    finally:
        _mmap_threshold(MMAP_THRESHOLD_MAX)
        stream.cancelled.set()
        stream.join()
    if stream.error is not None:
        raise ArtifactError("the model graph could not be streamed to onnxruntime: %s" % stream.error) \
            from stream.error
