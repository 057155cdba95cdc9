"""The worker runtime: run a handler over a queue with a pool of threads (SPEC §13).

Built only on the :mod:`alkstore.protocols`, so it runs on every engine::

    from alkstore import Fail, Retry, Worker

    def send_email(job: Job) -> None:
        if not job.payload.get("to"):
            raise Fail("no recipient")          # dead-letter now
        if mail_server_busy():
            raise Retry(delay_s=30)             # try again in 30 s
        deliver(job.payload)                    # return: ack

    Worker(store, "emails", send_email, concurrency=4).run()

The rules it keeps:

- **W-1** A handler that returns is acked. ``raise Retry(delay_s)`` retries
  after that delay (the backoff curve when ``None``); ``raise Fail(reason)``
  dead-letters at once; any other exception retries by the curve with
  ``last_error = "<ExcType>: <message>"``, and the engine dead-letters it when
  the budget is spent.
- **W-2** While a handler runs, one heartbeat thread extends its claim every
  third of the job's visibility timeout, so a handler that outlives the
  timeout is never reclaimed while its worker is alive. A refused heartbeat
  (the claim lapsed, or the job was cancelled) is logged as a warning and the
  handler's result is dropped: no ack, no retry, no fail.
- **W-3** The worker claims only as many jobs as it has free threads and hands
  each claimed job to a thread at once, so it never holds a claim it has not
  started. On stop it claims nothing more, gives running handlers
  ``grace_s`` seconds to finish (their outcomes are recorded as usual), then
  stops heartbeating the rest and drops their outcomes: their claims lapse
  and are reclaimed later. Nothing is lost and no unstarted job loses an
  attempt.
- **W-4** An idle worker blocks in ``claim_batch(..., wait_s=claim_wait_s)``,
  which the engines wake on commits (Q-19); it does not poll in a loop.
- **W-5** Everything is logged through ``logging.getLogger("alkstore.worker")``;
  nothing is printed.
"""

from __future__ import annotations

import logging
import math
import queue as _queue_mod
import signal
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from types import FrameType
from typing import Any

from .engine import check_worker_id, default_owner, error_text
from .errors import InvalidArgument, StoreClosed
from .protocols import Job, Queue, Store
from .types import QueueOpts, check_duration, check_int

__all__ = ["Fail", "Handler", "Retry", "Worker"]

log = logging.getLogger("alkstore.worker")

#: A job handler: called with the claimed job; its return value is ignored.
Handler = Callable[[Job], object]

#: ``last_error`` of a job that a handler retried with a bare ``Retry()`` and
#: that dead-lettered because its budget was spent.
RETRY_DEFAULT_REASON = "retry requested"
#: Most threads one worker runs.
MAX_CONCURRENCY = 1024
#: Shortest heartbeat interval: a floor for tiny visibility timeouts.
_MIN_HEARTBEAT_S = 0.005
#: The longest pause after the database failed before the worker claims again.
_MAX_ERROR_PAUSE_S = 5.0
#: How often waits for threads re-check a stop request.
_SLICE_S = 0.25

#: The signals that stop ``run`` in the main thread.
_SIGNALS: tuple[signal.Signals, ...] = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM") if hasattr(signal, name)
)


class Retry(Exception):
    """Raise from a handler to retry the job (W-1).

    ``Retry()`` waits by the queue's backoff curve (B-1); ``Retry(delay_s=30)``
    waits 30 s. *reason* becomes the job's ``last_error`` should the retry find
    the budget spent and dead-letter the job. A bad *delay_s* raises
    :class:`~alkstore.errors.InvalidArgument` at once, which the worker treats
    like any other handler exception.
    """

    def __init__(self, delay_s: float | None = None, reason: str = RETRY_DEFAULT_REASON) -> None:
        self.delay_s = check_duration("delay_s", delay_s, allow_none=True)
        self.reason = str(reason)
        super().__init__(self.reason)

    def __reduce__(self) -> tuple[type[Retry], tuple[float | None, str]]:
        return (type(self), (self.delay_s, self.reason))


class Fail(Exception):
    """Raise from a handler to dead-letter the job now with ``last_error =
    reason``, whatever budget is left (W-1)."""

    def __init__(self, reason: str) -> None:
        self.reason = str(reason)
        super().__init__(self.reason)

    def __reduce__(self) -> tuple[type[Fail], tuple[str]]:
        return (type(self), (self.reason,))


class Worker:
    """Runs *handler* over the jobs of *queue* on ``concurrency`` threads (W-1..W-5).

    *queue* is a queue name (opened with ``store.queue(queue, queue_opts)``)
    or a :class:`~alkstore.protocols.Queue` handle (then *store* may be
    ``None``). *worker_id* is recorded on
    every claim; by default ``host:pid:random``.

    Keyword options:

    - *heartbeat_every_s*: the heartbeat interval (W-2). By default a third
      of each job's visibility timeout, read from the claim's
      ``visibility_timeout_s`` when the engine's job handle has it, else
      estimated as a third of ``job.deadline - now`` at claim time.
    - *grace_s* (30): how long a stop waits for running handlers (W-3).
    - *claim_wait_s* (0.5): how long one blocking claim waits for work; a
      stop is noticed within that time (W-4).

    One ``Worker`` runs one loop at a time (``run`` or ``run_until_empty``);
    :meth:`stop` may be called from any thread or a signal handler.
    """

    def __init__(
        self,
        store: Store | None,
        queue: str | Queue,
        handler: Handler,
        concurrency: int = 4,
        worker_id: str | None = None,
        *,
        queue_opts: QueueOpts | None = None,
        heartbeat_every_s: float | None = None,
        grace_s: float = 30.0,
        claim_wait_s: float = 0.5,
    ) -> None:
        if not callable(handler):
            raise InvalidArgument(f"handler must be callable, not {type(handler).__name__}")
        if isinstance(queue, str):
            if store is None:
                raise InvalidArgument("a queue name needs its store; or pass a Queue handle")
            self._queue: Queue = store.queue(queue, queue_opts)
        else:
            if queue_opts is not None:
                raise InvalidArgument("queue_opts goes with a queue name, not a Queue handle")
            self._queue = queue
        self._handler = handler
        self._concurrency = check_int("concurrency", concurrency, 1, MAX_CONCURRENCY)
        self._worker_id = default_owner() if worker_id is None else check_worker_id(worker_id)
        self._heartbeat_every_s = check_duration(
            "heartbeat_every_s", heartbeat_every_s, allow_zero=False, allow_none=True
        )
        grace = check_duration("grace_s", grace_s)
        wait = check_duration("claim_wait_s", claim_wait_s, allow_zero=False)
        assert grace is not None and wait is not None
        self._grace_s = grace
        self._claim_wait_s = wait
        self._stop = threading.Event()
        self._running_lock = threading.Lock()
        self._running = False

    def __repr__(self) -> str:
        return (
            f"Worker(queue={self._queue.name!r}, concurrency={self._concurrency}, "
            f"worker_id={self._worker_id!r})"
        )

    @property
    def queue(self) -> Queue:
        """The queue handle the worker claims from."""
        return self._queue

    @property
    def worker_id(self) -> str:
        return self._worker_id

    @property
    def concurrency(self) -> int:
        return self._concurrency

    def stop(self) -> None:
        """Ask a running :meth:`run` to stop gracefully (W-3). Safe from any
        thread and from a signal handler."""
        self._stop.set()

    # --------------------------------------------------------------- run loops

    def run(self, stop: threading.Event | None = None) -> None:
        """Claim and handle jobs until *stop* is set, :meth:`stop` is called,
        or (in the main thread) SIGINT or SIGTERM arrives (W-1..W-4).

        On stop: no new claims; running handlers get ``grace_s`` to finish. A
        second signal skips what is left of the grace period. Signal handlers
        are installed only when called from the main thread, and the previous
        ones are restored on return. Database failures while claiming are
        logged and retried with a growing pause; a closed store ends the loop
        with :class:`~alkstore.errors.StoreClosed`.
        """
        external = stop if stop is not None else threading.Event()
        force = threading.Event()

        def stopping() -> bool:
            return external.is_set() or self._stop.is_set()

        with self._session() as session:
            restore = self._install_signals(force)
            try:
                log.info(
                    "worker %s: started on queue %r with %d threads",
                    self._worker_id,
                    self._queue.name,
                    self._concurrency,
                )
                pause = 0.0
                while not stopping():
                    free = session.wait_for_free_slot(stopping)
                    if free == 0 or stopping():
                        continue
                    try:
                        jobs = self._queue.claim_batch(
                            self._worker_id, free, wait_s=self._claim_wait_s
                        )
                    except StoreClosed:
                        log.error("worker %s: the store was closed; stopping", self._worker_id)
                        raise
                    except Exception as exc:
                        pause = min(max(pause * 2, 0.1), _MAX_ERROR_PAUSE_S)
                        log.error(
                            "worker %s: claiming from %r failed (%s); retrying in %.1f s",
                            self._worker_id,
                            self._queue.name,
                            error_text(exc),
                            pause,
                        )
                        _wait_unless(stopping, pause)
                        continue
                    pause = 0.0
                    # W-3: every claimed job starts now, stop or no stop.
                    for job in jobs:
                        session.start(job)
                log.info(
                    "worker %s: stopping; %d handler(s) running, grace %.1f s",
                    self._worker_id,
                    session.in_flight,
                    self._grace_s,
                )
                session.drain(self._grace_s, force)
            finally:
                restore()
                self._stop.clear()
        log.info("worker %s: stopped after %d job(s)", self._worker_id, session.finished)

    def run_until_empty(self) -> int:
        """Handle every job claimable now, including retries that become
        claimable while it runs, and return how many handler calls ran.

        Returns once no job is claimable and no handler is running. Unlike
        :meth:`run`, a database failure is raised (after the running handlers
        finished) rather than retried.
        """
        with self._session() as session:
            while True:
                free = session.wait_for_free_slot(lambda: False)
                jobs = self._queue.claim_batch(self._worker_id, free, wait_s=0)
                for job in jobs:
                    session.start(job)
                if jobs:
                    continue
                if session.in_flight == 0:
                    break
                # Nothing claimable now, but a running handler may retry its
                # job with no delay: look again when one finishes.
                session.wait_for_any_finish()
            session.drain(math.inf, threading.Event())
        return session.finished

    # ----------------------------------------------------------------- helpers

    def _session(self) -> _Session:
        with self._running_lock:
            if self._running:
                raise RuntimeError("this Worker is already running")
            self._running = True
        return _Session(self)

    def _release(self) -> None:
        with self._running_lock:
            self._running = False

    def _install_signals(self, force: threading.Event) -> Callable[[], None]:
        """SIGINT/SIGTERM stop the loop; a second one skips the grace period.
        Only possible in the main thread; returns the undo."""
        if threading.current_thread() is not threading.main_thread():
            return lambda: None
        previous: dict[signal.Signals, Any] = {}

        def on_signal(signum: int, frame: FrameType | None) -> None:
            name = signal.Signals(signum).name
            if self._stop.is_set():
                log.warning("worker %s: %s again; not waiting for handlers", self._worker_id, name)
                force.set()
            else:
                log.info("worker %s: %s received; stopping", self._worker_id, name)
                self._stop.set()

        try:
            for sig in _SIGNALS:
                previous[sig] = signal.signal(sig, on_signal)
        except (ValueError, OSError):  # pragma: no cover - e.g. embedded interpreters
            log.debug("worker %s: cannot install signal handlers", self._worker_id)

        def restore() -> None:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

        return restore


def _wait_unless(stopping: Callable[[], bool], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not stopping():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return
        time.sleep(min(remaining, _SLICE_S))


class _Running:
    """One started job: its claim, heartbeat schedule and fate.

    ``lock`` serializes the heartbeat thread against the thread that records
    the outcome, so an ack never races a heartbeat of the same claim and a
    refused heartbeat always wins over a later ack (W-2).
    """

    __slots__ = ("abandoned", "done", "interval_s", "job", "lock", "lost", "next_beat")

    def __init__(self, job: Job, interval_s: float) -> None:
        self.job = job
        self.interval_s = interval_s
        self.next_beat = time.monotonic() + interval_s
        self.lock = threading.Lock()
        self.done = False  # the outcome is being or was recorded
        self.lost = False  # a heartbeat was refused: the claim is gone
        self.abandoned = False  # the grace period ran out: leave it to lapse


class _Session:
    """The threads of one ``run`` / ``run_until_empty``: a pool of
    ``concurrency`` daemon threads and one heartbeat thread.

    Daemon threads, so that a handler stuck past the grace period cannot keep
    the process alive after ``run`` returned: its claim lapses and the job is
    reclaimed (W-3).
    """

    def __init__(self, worker: Worker) -> None:
        self._worker = worker
        self._wid = worker.worker_id
        self._work: _queue_mod.SimpleQueue[_Running | None] = _queue_mod.SimpleQueue()
        self._cond = threading.Condition()
        self._in_flight = 0
        self._finished = 0
        self._active: dict[int, _Running] = {}  # id(job) -> entry; heartbeat thread reads it
        self._hb_cond = threading.Condition()
        self._hb_stop = False
        self._threads: list[threading.Thread] = []
        self._heartbeat = threading.Thread(
            target=self._heartbeat_loop, name=f"alkstore-heartbeat-{self._wid}", daemon=True
        )

    def __enter__(self) -> _Session:
        try:
            for i in range(self._worker.concurrency):
                thread = threading.Thread(
                    target=self._thread_loop, name=f"alkstore-worker-{i}", daemon=True
                )
                thread.start()
                self._threads.append(thread)
            self._heartbeat.start()
        except BaseException:
            self._shutdown()
            raise
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        try:
            if exc is not None and self.in_flight:
                # Interrupted (KeyboardInterrupt, a failed claim): give running
                # handlers the grace period rather than dropping them.
                self.drain(self._worker._grace_s, threading.Event())
        finally:
            self._shutdown()

    @property
    def in_flight(self) -> int:
        with self._cond:
            return self._in_flight

    @property
    def finished(self) -> int:
        with self._cond:
            return self._finished

    # ------------------------------------------------------------ main thread

    def wait_for_free_slot(self, stopping: Callable[[], bool]) -> int:
        """The number of free threads, waiting while there are none; 0 when
        *stopping* turned true meanwhile."""
        with self._cond:
            while self._in_flight >= self._worker.concurrency:
                if stopping():
                    return 0
                self._cond.wait(_SLICE_S)
            return self._worker.concurrency - self._in_flight

    def wait_for_any_finish(self) -> None:
        with self._cond:
            seen = self._finished
            while self._finished == seen and self._in_flight:
                self._cond.wait(_SLICE_S)

    def start(self, job: Job) -> None:
        """Hand a claimed job to a free thread now (W-3) and start its
        heartbeats (W-2)."""
        entry = _Running(job, self._heartbeat_interval(job))
        with self._cond:
            self._in_flight += 1
        with self._hb_cond:
            self._active[id(entry)] = entry
            self._hb_cond.notify_all()
        self._work.put(entry)

    def drain(self, grace_s: float, force: threading.Event) -> None:
        """Wait up to *grace_s* for running handlers; abandon the rest (W-3)."""
        deadline = time.monotonic() + grace_s
        with self._cond:
            while self._in_flight and not force.is_set():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._cond.wait(min(remaining, _SLICE_S))
        with self._hb_cond:
            left = list(self._active.values())
            self._active.clear()
        for entry in left:
            with entry.lock:
                if entry.done:
                    continue
                entry.abandoned = True
            log.warning(
                "worker %s: job %s of queue %r did not finish within the grace period; "
                "its claim is left to lapse and the job will be reclaimed",
                self._wid,
                entry.job.id,
                entry.job.queue,
            )

    def _shutdown(self) -> None:
        for _ in self._threads:
            self._work.put(None)
        with self._hb_cond:
            self._hb_stop = True
            self._hb_cond.notify_all()
        if self._heartbeat.is_alive() and self._heartbeat is not threading.current_thread():
            self._heartbeat.join()
        self._worker._release()

    def _heartbeat_interval(self, job: Job) -> float:
        if self._worker._heartbeat_every_s is not None:
            return self._worker._heartbeat_every_s
        # The shared ClaimedJob carries the row's stamp; a third-party Job may
        # not, and then the claim's remaining time stands in for it.
        timeout = getattr(job, "visibility_timeout_s", None)
        if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout <= 0:
            timeout = (job.deadline - datetime.now(timezone.utc)).total_seconds()
        return max(float(timeout) / 3.0, _MIN_HEARTBEAT_S)

    # --------------------------------------------------------- handler threads

    def _thread_loop(self) -> None:
        while True:
            entry = self._work.get()
            if entry is None:
                return
            try:
                self._handle(entry)
            except BaseException:  # pragma: no cover - _handle logs its own failures
                log.exception("worker %s: unexpected failure", self._wid)
            finally:
                with self._hb_cond:
                    self._active.pop(id(entry), None)
                with self._cond:
                    self._in_flight -= 1
                    self._finished += 1
                    self._cond.notify_all()

    def _handle(self, entry: _Running) -> None:
        job = entry.job
        outcome: BaseException | None = None
        try:
            self._worker._handler(job)
        except BaseException as exc:
            outcome = exc
        with self._hb_cond:
            self._active.pop(id(entry), None)
        with entry.lock:
            entry.done = True
            if entry.lost:
                log.warning(
                    "worker %s: job %s of queue %r finished but its claim was lost "
                    "(heartbeat refused); the result is dropped",
                    self._wid,
                    job.id,
                    job.queue,
                )
                return
            if entry.abandoned:
                log.warning(
                    "worker %s: job %s of queue %r finished after the grace period; "
                    "the result is dropped and the job will be reclaimed",
                    self._wid,
                    job.id,
                    job.queue,
                )
                return
            try:
                self._record(job, outcome)
            except Exception as exc:
                log.error(
                    "worker %s: recording the outcome of job %s of queue %r failed (%s); "
                    "its claim will lapse and the job will be reclaimed",
                    self._wid,
                    job.id,
                    job.queue,
                    error_text(exc),
                )

    def _record(self, job: Job, outcome: BaseException | None) -> None:
        """W-1: the handler's outcome becomes ack, retry or fail."""
        ref = f"job {job.id} of queue {job.queue!r} (attempt {job.attempts}/{job.max_attempts})"
        if outcome is None:
            if job.ack():
                log.debug("worker %s: %s done", self._wid, ref)
            else:
                self._refused("ack", ref)
            return
        if isinstance(outcome, Fail):
            if job.fail(outcome.reason):
                log.warning("worker %s: %s failed: %s", self._wid, ref, outcome.reason)
            else:
                self._refused("fail", ref)
            return
        exhausted = job.attempts >= job.max_attempts
        if isinstance(outcome, Retry):
            landed = job.retry(outcome.reason, outcome.delay_s)
            what = "dead-lettered (no attempts left)" if exhausted else "retry requested"
            level = logging.WARNING if exhausted else logging.INFO
            if landed:
                log.log(level, "worker %s: %s %s: %s", self._wid, ref, what, outcome.reason)
            else:
                self._refused("retry", ref)
            return
        text = error_text(outcome)
        if job.retry(text):
            what = "dead-lettered (no attempts left)" if exhausted else "will be retried"
            log.log(
                logging.ERROR if exhausted else logging.WARNING,
                "worker %s: %s raised %s; %s",
                self._wid,
                ref,
                text,
                what,
                exc_info=outcome,
            )
        else:
            self._refused("retry", ref)

    def _refused(self, op: str, ref: str) -> None:
        log.warning(
            "worker %s: %s of %s was refused: the claim lapsed or the job was cancelled",
            self._wid,
            op,
            ref,
        )

    # -------------------------------------------------------- heartbeat thread

    def _heartbeat_loop(self) -> None:
        """W-2: extend every running claim when its interval comes round."""
        while True:
            with self._hb_cond:
                while True:
                    if self._hb_stop:
                        return
                    now = time.monotonic()
                    due = [e for e in self._active.values() if e.next_beat <= now]
                    if due:
                        break
                    soonest = min((e.next_beat for e in self._active.values()), default=None)
                    self._hb_cond.wait(None if soonest is None else soonest - now)
            for entry in due:
                self._beat(entry)

    def _beat(self, entry: _Running) -> None:
        job = entry.job
        with entry.lock:
            if entry.done or entry.lost or entry.abandoned:
                return
            try:
                extended = job.heartbeat()
            except Exception as exc:
                # The claim may still be valid: try again soon, inside the margin.
                entry.next_beat = time.monotonic() + entry.interval_s / 2
                log.error(
                    "worker %s: heartbeat of job %s of queue %r failed (%s); retrying",
                    self._wid,
                    job.id,
                    job.queue,
                    error_text(exc),
                )
                return
            if extended:
                entry.next_beat = time.monotonic() + entry.interval_s
                return
            entry.lost = True
        with self._hb_cond:
            self._active.pop(id(entry), None)
        log.warning(
            "worker %s: heartbeat of job %s of queue %r was refused (the claim lapsed or "
            "the job was cancelled); its handler's result will be dropped",
            self._wid,
            job.id,
            job.queue,
        )
