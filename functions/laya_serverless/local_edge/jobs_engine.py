"""The local engine (the embedded default): the same worker and merger as on AWS, over the configured
store, run by a pool of worker processes on this machine.

Processes rather than threads: each worker holds its own deciders, so answers never queue behind the
server's inference lock or the GIL, and a worker that crashes (a poison state taking the process down)
costs one retry instead of the server. A process costs its own model in memory (docs/jobs.md has the
figure); `LAYA_JOBS_WORKERS` sets how many. Threads (`processes=False`) serve tests and fakes.

Nothing lives only in memory: the job's documents in the store are the queue. `open()` resumes every
job that has not ended, answering only the shards without results, so a server killed mid-job
finishes it on restart with nothing lost (every shard is answered) or doubled (results are create-only).
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from functools import partial

from ..artifact.store import ObjectStore, open_store
from ..errors import JobError, ShardFailed
from ..jobs.job_service import JobService
from ..jobs.merge import fail, finish
from ..jobs.results import read_spec
from ..jobs.runtime import load_worker
from ..jobs.state import TERMINAL, Doc, mark_running, read_job
from ..jobs.store_keys import is_job_id, job_key, shard_failure
from ..jobs.worker import Worker, give_up
from ..settings import Settings

_log = logging.getLogger("laya_serverless")
WorkerFactory = Callable[[], Worker]
_here = threading.local()  # the worker of this pool process or thread


PARENT_POLL_S = 0.5


def _start_worker(factory: WorkerFactory) -> None:
    parent = multiprocessing.parent_process()
    if parent is not None and parent.pid is not None:  # a worker process, not a thread
        _watch_parent(parent.pid)  # the spawning server's pid: it may be gone already (reparented before this)
    _here.worker = factory()


def _watch_parent(parent: int) -> None:
    """End this worker process when its server ends, however it ends (SIGKILL included): it is reparented
    then, and would otherwise wait forever on its pipe, holding a model's memory. A poll, not a parent-death
    signal: Linux sends that when the *thread* that spawned the process exits, which here is any thread."""
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
        os._exit(0)

    threading.Thread(target=watch, name="laya-parent-watch", daemon=True).start()


def _answer(job_id: str, shard: int) -> str:
    worker: Worker = _here.worker
    return worker.answer_shard(job_id, shard)


def failure_detail(error: BaseException, attempts: int) -> str:
    """What a given-up shard's error lines say: our own refusal text, never a traceback or a path."""
    why = str(error) if isinstance(error, ShardFailed) else (
        "a worker process crashed" if isinstance(error, BrokenProcessPool) else "the worker failed")
    return shard_failure(attempts, why)


class LocalEngine:
    def __init__(self, store: ObjectStore, factory: WorkerFactory, workers: int = 1, processes: bool = True,
                 attempts: int = 3, backoff: float = 0.5, resume: bool = True) -> None:
        self.store, self.factory, self.workers, self.processes = store, factory, max(1, workers), processes
        self.attempts, self.backoff, self.resume = attempts, backoff, resume
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._pool: Executor | None = None
        self._closing = False

    def open(self) -> None:
        """Start the dispatcher and (unless told not to) resume every job in the store that has not ended."""
        if self._thread is not None:
            return
        self._closing = False
        self._thread = threading.Thread(target=self._loop, name="laya-jobs", daemon=True)
        self._thread.start()
        for job_id in self.unfinished() if self.resume else []:
            self._queue.put(job_id)

    def start(self, job_id: str) -> None:
        self.open()
        self._queue.put(job_id)

    def close(self) -> None:
        """Stop taking shards; a job in progress stays in the store and resumes at the next `open()`."""
        self._closing = True
        self._queue.put(None)
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
        if self._thread is not None:
            self._thread.join(timeout=30)
        self._thread, self._pool = None, None

    def unfinished(self) -> list[str]:
        """Ids of the jobs in the store that have not ended, oldest first. A job whose document cannot be read is
        skipped, logged (its status says why): one damaged job never stops the server from starting."""
        docs = []
        for key in self.store.list("jobs/"):
            job_id = key.split("/")[1]
            if key.count("/") == 2 and key.endswith("/job.json") and is_job_id(job_id):
                try:
                    docs.append(read_job(self.store, job_id)[0])
                except JobError as exc:
                    _log.warning("job %s is not resumed: %s", job_id, exc)
        return [doc["id"] for doc in sorted(docs, key=lambda d: d["created_at"]) if doc["status"] not in TERMINAL]

    def _executor(self) -> Executor:
        if self._pool is None:
            if self.processes:
                self._pool = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"),
                                                 initializer=_start_worker, initargs=(self.factory,))
            else:
                self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="laya-job-worker",
                                                initializer=_start_worker, initargs=(self.factory,))
        return self._pool

    def _loop(self) -> None:
        while (job_id := self._queue.get()) is not None:
            try:
                self.run_job(job_id)
            except Exception:  # one broken job must not stop the others; it stays in the store
                _log.exception("job %s could not be run", job_id)

    def run_job(self, job_id: str) -> Doc | None:
        """Answer every shard without results (retrying, then giving up), then end the job; None if interrupted."""
        doc, _ = read_job(self.store, job_id)
        if doc["status"] in TERMINAL:
            return doc
        try:
            shards = len(read_spec(self.store, job_id)["bounds"]) - 1
        except JobError as exc:   # nothing to answer: ended, saying why, instead of running forever
            return fail(self.store, job_id, str(exc))
        mark_running(self.store, job_id)
        pending: dict[Future[str], tuple[int, int, Executor]] = {}

        def submit(shard: int, attempt: int) -> None:
            pool = self._executor()
            pending[pool.submit(_answer, job_id, shard)] = (shard, attempt, pool)

        for shard in sorted(set(range(shards)) - set(doc["finished"])):
            submit(shard, 1)
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                shard, attempt, pool = pending.pop(future)
                if self._closing:
                    return None
                error = future.exception()
                if error is None:
                    continue
                if self.store.read(job_key(job_id)) is None:  # expired or removed: nobody can see it, work stops
                    _log.warning("job %s: its document is gone (expired or removed); its work stops", job_id)
                    for other in pending:
                        other.cancel()
                    return None
                if isinstance(error, BrokenProcessPool) and self._pool is pool:
                    self._pool = None  # every shard in flight failed with it; the next submit starts a new pool
                    pool.shutdown(wait=False, cancel_futures=True)
                if attempt < self.attempts:
                    _log.warning("job %s shard %d failed (attempt %d): %s", job_id, shard, attempt, error)
                    time.sleep(self.backoff * 2 ** (attempt - 1))
                    submit(shard, attempt + 1)
                else:
                    give_up(self.store, job_id, [shard], failure_detail(error, attempt))
        return None if self._closing else finish(self.store, job_id)

    def wait(self, job_id: str, timeout: float = 3600.0, poll: float = 0.2) -> Doc:
        """Block until the job ends (for the CLI and tests); its document."""
        deadline = time.monotonic() + timeout
        while True:
            doc, _ = read_job(self.store, job_id)
            if doc["status"] in TERMINAL or time.monotonic() > deadline:
                return doc
            time.sleep(poll)


def local_jobs(settings: Settings, store: ObjectStore | None = None) -> JobService | None:
    """The jobs of `laya-serverless serve`: a pool of `LAYA_JOBS_WORKERS` processes (0: no jobs routes), over the
    serving process's store (each worker process opens its own)."""
    if settings.jobs.jobs_workers == 0:
        return None
    store = open_store(settings.deployment.store, parts=settings.deployment.download_parts) if store is None else store
    engine = LocalEngine(store, partial(load_worker, settings), settings.jobs.jobs_workers)
    return JobService(store, engine, settings.jobs, settings.protocol, settings.limits)
