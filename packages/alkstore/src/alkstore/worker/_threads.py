# Generated from _tasks.py by scripts/async_to_sync.py: edit that file, not this one.
"""``Worker``: run a handler over queues (SPEC §13, A-5).

Built only on the :mod:`alkstore.protocols`, so it runs on every engine::

    from alkstore import Worker, Fail, Retry

    def send_email(job: Job) -> None:
        if not job.payload.get("to"):
            raise Fail("no recipient")  # dead-letter now
        if mail_server_busy():
            raise Retry(delay_s=30)  # try again in 30 s
        deliver(job.payload)  # return: ack

    Worker(store, "emails", send_email, concurrency=4).run()

One code, two faces (docs/adr/0017): the async worker is written, and the
sync worker is generated from it by ``scripts/async_to_sync.py``. How each
runs:

- The sync face claims on the caller's thread as many jobs as there are free
  slots (W-3); handlers run on ``concurrency`` threads, or, for coroutine
  functions, as tasks on one event loop the worker owns (W-8); one heartbeat
  thread keeps every claim alive and times handlers out (W-2, W-11); one
  flusher thread settles finished jobs in groups, one transaction per flush
  (W-6). In the main thread, SIGINT and SIGTERM stop it.
- The async face does the same on the caller's event loop (a FastAPI
  lifespan, an aiohttp app): coroutine handlers run as tasks, at most
  ``concurrency`` at a time, a plain handler in a pool of threads of that
  size; heartbeats and flushes are tasks, and a timeout cancels the
  handler's task. Signals are the application's: call :meth:`stop` or set
  the *stop* event.

The rules both faces share are in ``_rules``.
"""

from __future__ import annotations

import inspect
import logging
import math
import os
import queue as _queue_mod
import signal
import socket
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from types import FrameType
from typing import Any

from alkstore._acompat import (
    Condition,
    Event,
    Lock,
    Spawned,
    cond_wait,
    join,
    sleep,
    spawn,
)
from alkstore._version import __version__
from alkstore.errors import InvalidArgument, StoreClosed, TransientError
from alkstore.names import encode_payload
from alkstore.protocols import Capability, Job, Queue, RateLimit, Store
from alkstore.types import QueueOpts, WorkerCount, WorkerInfo, check_duration

from . import _hooks
from ._loop import HandlerLoop, await_result, call_coroutine
from ._rules import (
    MAX_ERROR_PAUSE_S,
    SLICE_S,
    HandlerJobBase,
    Running,
    Settings,
    StopSignal,
    apply_args,
    check_face,
    check_settings,
    error_text,
    heartbeat_interval,
    is_coroutine_handler,
    log_dropped,
    log_outcome,
    outcome_of,
    queue_names_of,
    split_flush,
    timeout_outcome,
    unit_pause_s,
    unit_wait_s,
)

__all__ = ["Handler", "Worker"]

log = logging.getLogger("alkstore.worker")

#: A job handler: called with the claimed job; its return value is ignored. A
#: coroutine function (or a handler that returns an awaitable) is awaited; on
#: the async face a plain callable runs in a thread.
Handler = Callable[[Job], object] | Callable[[Job], object]

_IS_ASYNC = False
_STOP_EVENT = "a threading.Event"
_STARTED_ON = ""
#: Each running job's lock (``Running.lock``, W-2).
_entry_lock = threading.Lock
#: The signals that stop ``run`` in the main thread.
_SIGNALS: tuple[signal.Signals, ...] = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM") if hasattr(signal, name)
)

#: Transient failures of one flush are retried this many times (the claims
#: are heartbeated meanwhile), then its jobs are left to lapse and rerun.
_FLUSH_TRIES = 8


def _kept_results(batch: Sequence[Running]) -> list[Any] | None:
    """The results a flush's acks keep (RS-1): ``None`` when none does."""
    results = [e.outcome.result if e.outcome is not None else None for e in batch]
    return results if any(r is not None for r in results) else None


def _result_error(value: object) -> BaseException | None:
    """RS-1: a return value the store cannot keep (C-3) makes the attempt
    fail as an exception from the handler would (W-1), so that one job's
    result never refuses its whole flush."""
    try:
        encode_payload(value)
    except InvalidArgument as exc:
        return exc
    return None


class HandlerJob(HandlerJobBase):
    """The job as the handler sees it: the claim's handle, plus
    ``should_stop()`` (W-12), and settle operations that tell the worker the
    handler took care of its job (W-9)."""

    __slots__ = ()

    def ack(self, tx: object | None = None, *, result: Any = None) -> bool:
        if result is None:
            return self._settled(self._job.ack(tx))
        return self._settled(self._job.ack(tx, result=result))

    def retry(self, error: str, delay_s: float | None = None, tx: object | None = None) -> bool:
        return self._settled(self._job.retry(error, delay_s, tx))

    def fail(self, error: str, tx: object | None = None) -> bool:
        return self._settled(self._job.fail(error, tx))

    def release(self) -> bool:
        return self._settled(self._job.release())

    def heartbeat(self, extend_s: float | None = None) -> bool:
        ok: bool = self._job.heartbeat(extend_s)
        return ok

    def progress(self, value: Any, tx: object | None = None) -> bool:
        """Q-28: store a checkpoint on the running job (its next attempt,
        after a retry or a crash, reads it as ``job.checkpoint``)."""
        ok: bool = self._job.progress(value, tx)
        return ok


class Worker:
    """Runs *handler* over the jobs of *queue* (W-1..W-12, A-5).

    *queue* is a queue name (opened with ``store.queue(queue, queue_opts)``),
    a queue handle (:class:`~alkstore.protocols.Queue`; then *store* may
    be ``None``), or a list of names or handles: several queues are served in
    strict order through ``store.claim_any`` (W-10). *concurrency* handlers
    run at once. *worker_id* is recorded on every claim; by default
    ``host:pid:random``. A store or handle of the other face is refused
    (A-7).

    Keyword options:

    - *heartbeat_every_s*: the heartbeat interval (W-2); by default a third of
      each job's visibility timeout.
    - *grace_s* (30): how long a stop waits for running handlers (W-3).
    - *claim_wait_s* (0.5): how long one blocking claim waits for work; a stop
      is noticed within that time (W-4).
    - *timeout_s*: a handler running longer is timed out: its job is retried
      by the curve with ``last_error = "timeout after T s"`` (W-11); a
      coroutine handler is cancelled.
    - *flush_s* (0.005): the longest a finished job waits for its flush (W-6).
    - *rate_limit*: a limiter of the store; claims take one unit per job (R-1).
    - *register_every_s* (10): while :meth:`run` runs, the worker's row in the
      store's registry is refreshed this often, with its per-minute counts of
      finished jobs (O-5); ``None`` keeps it out of the registry.

    One worker runs one loop at a time (``run`` or ``run_until_empty``).
    """

    #: Whether a slot stays taken until its job's outcome commits (the outbox:
    #: one delivery after the other, even across a crash), rather than
    #: freeing when the handler returns (W-6).
    _hold_slots = False

    def __init__(
        self,
        store: Store | None,
        queue: str | Queue | Sequence[str | Queue],
        handler: Handler,
        concurrency: int = 4,
        worker_id: str | None = None,
        *,
        queue_opts: QueueOpts | None = None,
        heartbeat_every_s: float | None = None,
        grace_s: float = 30.0,
        claim_wait_s: float = 0.5,
        timeout_s: float | None = None,
        flush_s: float = 0.005,
        rate_limit: RateLimit | None = None,
        register_every_s: float | None = 10.0,
    ) -> None:
        self._settings: Settings = check_settings(
            handler,
            concurrency,
            worker_id,
            heartbeat_every_s,
            grace_s,
            claim_wait_s,
            timeout_s,
            flush_s,
        )
        if store is not None and not hasattr(store, "transaction"):
            raise InvalidArgument(f"store must be an alkstore store, not {type(store).__name__}")
        check_face(store, _IS_ASYNC)
        self._store = store
        names = queue_names_of(queue)
        if names is not None and len(names) > 1:
            if store is None:
                raise InvalidArgument("several queues need their store")
            if queue_opts is not None:
                raise InvalidArgument("queue_opts goes with one queue name")
            self._queues: list[Queue] = [
                q if not isinstance(q, str) else store.queue(q)  # type: ignore[misc]
                for q in names
            ]
            self._many = True
        else:
            one = names[0] if names is not None else queue
            self._queues = [_one_queue(store, one, queue_opts)]
            self._many = False
        for handle in self._queues:
            check_face(handle, _IS_ASYNC)
        # W-6: what the flushes settle through; a worker given only a queue
        # handle settles through the store the handle came from, so that
        # every form of the worker (and the outbox) commits in groups.
        self._settler: Store | None = store if store is not None else _store_of(self._queues[0])
        self._handler = handler
        self._is_async = is_coroutine_handler(handler)
        self._rate_limit = rate_limit
        self._stop = Event()
        self._running_lock = threading.Lock()
        self._running = False
        # O-5: the registry's refresh interval (None: not registered).
        self._register_every_s = check_duration(
            "register_every_s", register_every_s, allow_zero=False, allow_none=True
        )

    def __repr__(self) -> str:
        names = [q.name for q in self._queues]
        return (
            f"Worker(queues={names!r}, concurrency={self._settings.concurrency}, "
            f"worker_id={self._settings.worker_id!r})"
        )

    @property
    def queue(self) -> Queue:
        """The (first) queue handle the worker claims from."""
        return self._queues[0]

    @property
    def queues(self) -> list[Queue]:
        """Every queue the worker serves, in claim order (W-10)."""
        return list(self._queues)

    @property
    def worker_id(self) -> str:
        return self._settings.worker_id

    @property
    def concurrency(self) -> int:
        return self._settings.concurrency

    def stop(self) -> None:
        """Ask a running :meth:`run` to stop gracefully (W-3): on the sync face
        from any thread or a signal handler, on the async face from the loop."""
        self._stop.set()

    # --------------------------------------------------------------- claims

    def _claim(self, n: int, wait_s: float, paced: bool = True) -> list[Job]:
        extra: dict[str, Any] = {}
        if paced and self._rate_limit is not None:
            extra["rate_limit"] = self._rate_limit
        if self._many:
            assert self._store is not None
            return self._store.claim_any(self._queues, self.worker_id, n, wait_s, **extra)
        return self._queues[0].claim_batch(self.worker_id, n, wait_s, **extra)

    # --------------------------------------------------------------- loops

    def run(self, stop: Event | None = None) -> None:
        """Claim and handle jobs until *stop* is set, :meth:`stop` is called,
        or, on the sync face in the main thread, SIGINT or SIGTERM arrives
        (W-1..W-12).

        On stop: no new claims (jobs a last claim brought in are released,
        Q-26); running handlers get ``grace_s`` to finish and their outcomes
        are flushed. A second signal skips what is left of the grace period.
        Database failures while claiming are logged and retried with a growing
        pause; a closed store ends the loop with
        :class:`~alkstore.errors.StoreClosed`.
        """
        if stop is not None and not isinstance(stop, Event):
            raise InvalidArgument(f"stop must be {_STOP_EVENT}, not {type(stop).__name__}")
        external = stop if stop is not None else Event()
        force = Event()
        mine = self._stop

        def stopping() -> bool:
            return external.is_set() or mine.is_set()

        with self._session(register=True) as session:
            session.watch_stop(external, mine)
            restore = self._install_signals(force)
            try:
                log.info(
                    "worker %s: started on %s with concurrency %d%s",
                    self.worker_id,
                    ", ".join(repr(q.name) for q in self._queues),
                    self.concurrency,
                    _STARTED_ON,
                )
                pause = 0.0
                while not stopping():
                    free = session.wait_for_free_slot(stopping)
                    if free == 0 or stopping():
                        continue
                    try:
                        jobs = self._claim(free, self._settings.claim_wait_s)
                    except StoreClosed:
                        log.error("worker %s: the store was closed; stopping", self.worker_id)
                        raise
                    except Exception as exc:
                        pause = min(max(pause * 2, 0.1), MAX_ERROR_PAUSE_S)
                        log.error(
                            "worker %s: claiming failed (%s); retrying in %.1f s",
                            self.worker_id,
                            error_text(exc),
                            pause,
                        )
                        _wait_unless(stopping, pause)
                        continue
                    pause = 0.0
                    if stopping():
                        session.give_back(jobs)  # never started, attempt not counted
                        break
                    for job in jobs:
                        session.start(job)
                log.info(
                    "worker %s: stopping; %d handler(s) running, grace %.1f s",
                    self.worker_id,
                    session.in_flight,
                    self._settings.grace_s,
                )
                session.drain(self._settings.grace_s, force)
            finally:
                restore()
                mine.clear()
        log.info("worker %s: stopped after %d job(s)", self.worker_id, session.finished)

    def run_until_empty(self) -> int:
        """Handle every job claimable now, including retries that become
        claimable while it runs, and return how many handler calls ran.

        Returns once no job is claimable, no handler is running and every
        outcome committed. With *rate_limit*, jobs start no faster than the
        limiter grants units, and a limiter without a unit this instant does
        not make the queue empty: it returns once no job is left to claim.
        Unlike :meth:`run`, a database failure is raised (after the running
        handlers finished) rather than retried.
        """
        with self._session() as session:
            while True:
                free = session.wait_for_free_slot(lambda: False)
                seen = session.changes
                jobs = self._claim(free, 0)
                if not jobs and self._rate_limit is not None:
                    past = self._claim_past_limiter(session)
                    if past is None:
                        continue
                    jobs = past
                for job in jobs:
                    session.start(job)
                if jobs:
                    continue
                if session.idle and session.changes == seen:
                    break
                # Nothing claimable now, but a running or flushing job may be
                # retried with no delay: look again when something changes.
                session.wait_for_change(seen)
            session.drain(math.inf, Event())
        return session.finished

    def _claim_past_limiter(self, session: _Session) -> list[Job] | None:
        """``run_until_empty`` with a limiter whose claim brought nothing: was
        the queue empty, or had the limiter no unit this instant (R-1)?

        One job is claimed without the limiter: none means the queue is empty
        (``[]``). One starts only once its unit is granted, so that jobs still
        start no faster than the limiter allows; a unit that does not come in
        half the claim's lease (a limiter shared with busy workers) sends the
        job back unstarted, its attempt not counted (Q-26), and ``None`` asks
        the loop to try again after a pause.
        """
        limiter = self._rate_limit
        assert limiter is not None
        jobs = self._claim(1, 0, paced=False)
        if not jobs:
            return []
        try:
            granted = limiter.acquire(1, wait_s=unit_wait_s(jobs[0]))
        except BaseException:
            session.give_back(jobs)
            raise
        if granted:
            return jobs
        session.give_back(jobs)
        sleep(unit_pause_s(limiter))
        return None

    # ------------------------------------------------------------- helpers

    def _session(self, register: bool = False) -> _Session:
        with self._running_lock:
            if self._running:
                raise RuntimeError("this Worker is already running")
            self._running = True
        session = _Session(self)
        if register and self._registers():
            session.register_every_s = self._register_every_s
        return session

    def _registers(self) -> bool:
        """Whether :meth:`run` keeps a row in the store's registry (O-5)."""
        store = self._store
        return (
            self._register_every_s is not None
            and store is not None
            and Capability.WORKERS in store.capabilities
            and hasattr(store, "report_worker")
        )

    def _info(self) -> WorkerInfo:
        """The worker as its registry row says (O-5)."""
        return WorkerInfo(
            self.worker_id,
            socket.gethostname() or "unknown",
            os.getpid(),
            tuple(q.name for q in self._queues),
            self.concurrency,
            datetime.now(timezone.utc),
            __version__,
        )

    def _release(self) -> None:
        with self._running_lock:
            self._running = False

    def _install_signals(self, force: Event) -> Callable[[], None]:
        """SIGINT/SIGTERM stop the loop; a second one skips the grace period.
        Only possible in the main thread; returns the undo."""
        if threading.current_thread() is not threading.main_thread():
            return _nothing
        previous: dict[signal.Signals, Any] = {}

        def on_signal(signum: int, frame: FrameType | None) -> None:
            name = signal.Signals(signum).name
            if self._stop.is_set():
                log.warning("worker %s: %s again; not waiting for handlers", self.worker_id, name)
                force.set()
            else:
                log.info("worker %s: %s received; stopping", self.worker_id, name)
                self._stop.set()

        try:
            for sig in _SIGNALS:
                previous[sig] = signal.signal(sig, on_signal)
        except (ValueError, OSError):  # pragma: no cover - e.g. embedded interpreters
            log.debug("worker %s: cannot install signal handlers", self.worker_id)

        def restore() -> None:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

        return restore


def _nothing() -> None:
    pass


def _one_queue(store: Store | None, queue: object, opts: QueueOpts | None) -> Queue:
    if isinstance(queue, str):
        if store is None:
            raise InvalidArgument("a queue name needs its store; or pass a queue handle")
        return store.queue(queue, opts)
    if queue is None or not hasattr(queue, "claim_batch"):
        raise InvalidArgument(
            f"queue must be a queue name, a queue handle or a list of them, not "
            f"{type(queue).__name__}"
        )
    if opts is not None:
        raise InvalidArgument("queue_opts goes with a queue name, not a queue handle")
    handle: Queue = queue  # type: ignore[assignment]
    return handle


def _store_of(handle: Queue) -> Store | None:
    """The store a queue handle came from, when it says (the kit's handles
    do), of the handle's face; else ``None`` (outcomes settle one by one)."""
    store = getattr(handle, "__alkstore_store__", None)
    if store is None or not hasattr(store, "ack_each") or not hasattr(store, "transaction"):
        return None
    try:
        check_face(store, _IS_ASYNC)
    except InvalidArgument:
        return None
    settler: Store = store
    return settler


def _wait_unless(stopping: Callable[[], bool], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not stopping():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return
        sleep(min(remaining, SLICE_S))


class _Session:
    """The helpers of one ``run`` / ``run_until_empty``.

    On the sync face they are daemon threads, so that a handler stuck past
    the grace period cannot keep the process alive after ``run`` returned:
    its claim lapses and the job is reclaimed (W-3). On the async face they
    are tasks of the caller's loop.
    """

    def __init__(self, worker: Worker) -> None:
        self._w = worker
        self._s = worker._settings
        self._wid = worker.worker_id
        self._store = worker._store
        self._settler = worker._settler
        self._hold = worker._hold_slots
        self._stopping = StopSignal()  # what should_stop sees (W-12)
        # One lock, three conditions, so that each change wakes only the
        # helpers it concerns: the claim loop and the drains (slots, changes),
        # the flusher (outcomes to settle), the heartbeats (a claim due sooner
        # than they sleep). One condition for all woke every thread of the
        # session for every job, and on 2 cores that cost more CPU than the
        # claim and ack themselves.
        lock = Lock()
        self._cond = Condition(lock)
        self._flush_cond = Condition(lock)
        self._beat_cond = Condition(lock)
        self._beat_wake = 0.0  # when the heartbeats wake next (monotonic)
        # The counters change under the lock; each read of one needs none.
        self._in_flight = 0  # handlers running: the slots in use
        self._unsettled = 0  # started jobs whose fate is not final yet
        self._finished = 0
        self._changes = 0
        self._active: dict[int, Running] = {}  # id(entry) -> entry, for heartbeats
        self._pending: list[Running] = []  # outcomes waiting for a flush
        self._flushing = False
        self._closing = False
        self._helpers: list[Spawned] = []
        # O-5: set by run() when the worker registers; finished jobs are
        # counted here by (minute, queue, outcome) between two refreshes.
        self.register_every_s: float | None = None
        self._counts: dict[tuple[int, str, str], int] = {}
        self._counts_lock = threading.Lock()
        self._reg_cond = Condition(lock)
        self._work: _queue_mod.SimpleQueue[Running | None] = _queue_mod.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._loop: HandlerLoop | None = None

    def __enter__(self) -> _Session:
        try:
            if self._w._is_async:
                self._loop = HandlerLoop()
            else:
                for i in range(self._s.concurrency):
                    self._threads.append(spawn(self._thread_loop, f"alkstore-worker-{i}"))
            self._helpers.append(spawn(self._heartbeat_loop, f"alkstore-hb-{self._wid}"))
            self._helpers.append(spawn(self._flush_loop, f"alkstore-flush-{self._wid}"))
            if self.register_every_s is not None:
                self._helpers.append(spawn(self._registry_loop, f"alkstore-reg-{self._wid}"))
        except BaseException:
            self._shutdown()
            raise
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        try:
            if exc is not None and self._in_flight:
                # Interrupted (KeyboardInterrupt, a failed claim): give running
                # handlers the grace period rather than dropping them.
                self.drain(self._s.grace_s, Event())
        finally:
            self._shutdown()

    # ------------------------------------------------------------ counters

    @property
    def in_flight(self) -> int:
        return self._in_flight

    @property
    def finished(self) -> int:
        return self._finished

    @property
    def changes(self) -> int:
        return self._changes

    @property
    def idle(self) -> bool:
        """No handler running and no outcome waiting for or inside a flush.
        (Both counts only fall unless the claim loop, the one that reads
        this, starts a job: two reads without the lock see a true state.)"""
        return self._unsettled == 0 and self._in_flight == 0

    def _changed(self) -> None:
        # Under the lock.
        self._changes += 1
        self._cond.notify_all()

    def wait_for_free_slot(self, stopping: Callable[[], bool]) -> int:
        """The number of free slots, waiting while there are none; 0 when
        *stopping* turned true meanwhile."""
        with self._cond:
            while self._in_flight >= self._s.concurrency:
                if stopping():
                    return 0
                cond_wait(self._cond, SLICE_S)
            return self._s.concurrency - self._in_flight

    def wait_for_change(self, seen: int) -> None:
        with self._cond:
            while self._changes == seen and (self._in_flight or self._unsettled):
                cond_wait(self._cond, SLICE_S)

    # --------------------------------------------------------------- start

    def watch_stop(self, *requests: Event) -> None:
        """W-12: handlers see these stop requests at once through ``should_stop``."""
        self._stopping.watch(*requests)

    def give_back(self, jobs: Sequence[Job]) -> None:
        for job in jobs:
            try:
                job.release()
            except Exception as exc:  # it lapses as usual
                log.warning("worker %s: could not release job %s: %s", self._wid, job.id, exc)

    def start(self, job: Job) -> None:
        """Hand a claimed job to a free slot now (W-3) and start its heartbeats (W-2)."""
        interval_s = heartbeat_interval(job, self._s.heartbeat_every_s)
        entry = Running(job, interval_s, self._stopping, _entry_lock())
        entry.view = HandlerJob(job, entry)
        _hooks.claimed(job)
        timeout_s = self._s.timeout_s
        with self._cond:
            self._in_flight += 1
            self._unsettled += 1
            self._active[id(entry)] = entry
            due = (
                entry.next_beat
                if timeout_s is None
                else min(entry.next_beat, entry.started + timeout_s)
            )
            if due < self._beat_wake:
                self._beat_cond.notify()
        if self._loop is not None:
            handler = self._w._handler
            entry.task = self._loop.submit(call_coroutine(handler, entry, self._handler_ended))
        else:
            self._work.put(entry)

    # ------------------------------------------------------- handler side

    def _thread_loop(self) -> None:
        while True:
            entry = self._work.get()
            if entry is None:
                return
            outcome: BaseException | None = None
            try:
                with _hooks.handler_span(entry.job):
                    result = self._w._handler(entry.view)
                    if inspect.isawaitable(result):
                        # W-8: a handler that returns an awaitable is awaited.
                        entry.task = self._loop_for_awaitables().submit(await_result(result))
                        result = entry.task.result()
            except BaseException as exc:
                outcome = exc
                result = None
            self._handler_ended(entry, outcome, result)

    def _loop_for_awaitables(self) -> HandlerLoop:
        with self._cond:
            if self._loop is None:
                self._loop = HandlerLoop()
            return self._loop

    def _handler_ended(self, entry: Running, exc: BaseException | None, value: Any = None) -> None:
        """The handler returned or raised: its slot frees now; its outcome waits
        for the next flush, heartbeated until it commits (W-6). A job stamped
        with ``result_ttl_s`` is acked with *value*, the handler's return
        value (RS-1); for any other job the return value is ignored."""
        keeps = exc is None and getattr(entry.job, "result_ttl_s", None) is not None
        if keeps:
            exc = _result_error(value)
        settle_now = False
        with entry.lock:
            entry.handled = True
            entry.ran_s = time.monotonic() - entry.started
            if entry.abandoned:
                log_dropped(self._wid, entry, "after the grace period; it will be reclaimed")
                settle_now = True
            elif entry.timed_out:
                log.debug("worker %s: %s ended after its timeout", self._wid, entry.ref())
            elif entry.settled:
                settle_now = True  # W-9: the handler settled its job itself
            elif entry.lost:
                log_dropped(self._wid, entry, "its claim was lost (heartbeat refused)")
                self._job_finished(entry.job, "lost", entry.ran_s)
                settle_now = True
            else:
                job = entry.job
                entry.done = True
                entry.outcome = outcome_of(exc, job.attempts, job.max_attempts)
                if keeps and exc is None:
                    entry.outcome.result = value
        with self._cond:
            self._finished += 1
            if entry.outcome is not None and not entry.timed_out:
                self._pending.append(entry)
                self._flush_cond.notify()
                if not self._hold:
                    self._free_slot(entry)
            else:
                if settle_now:
                    self._settle(entry)
                self._free_slot(entry)
            self._changed()

    def _settle(self, entry: Running) -> None:
        # Under the lock: the entry's fate is final.
        self._active.pop(id(entry), None)
        self._unsettled -= 1
        if entry.handled:
            self._free_slot(entry)

    def _free_slot(self, entry: Running) -> None:
        # Under the lock. W-6: a slot frees when its handler returns; a
        # worker that holds slots until the commit (the outbox) frees it then.
        if entry.slot:
            entry.slot = False
            self._in_flight -= 1

    # ---------------------------------------------------------- flushes

    def _flush_loop(self) -> None:
        """W-6: whatever finished while a flush was in flight goes out together
        in the next one; a flush starts at once when none is in flight."""
        while True:
            with self._cond:
                while not self._pending and not self._closing:
                    # Woken by each outcome; the timeout is only a bound, and
                    # an idle worker does not poll (W-4).
                    bound = self._s.flush_s if self._in_flight else SLICE_S
                    cond_wait(self._flush_cond, bound)
                if not self._pending:
                    return
                batch, self._pending = self._pending, []
                self._flushing = True
            try:
                self._flush(batch)
            finally:
                with self._cond:
                    self._flushing = False
                    for entry in batch:
                        self._settle(entry)
                    self._changed()

    def _flush(self, batch: list[Running]) -> None:
        live = []
        for entry in batch:
            with entry.lock:  # after a heartbeat in progress: a refusal wins (W-2)
                if entry.lost or entry.abandoned:
                    log_dropped(self._wid, entry, "its claim was lost before the flush")
                    self._job_finished(entry.job, "lost", None)
                    continue
                entry.flushing = True
                live.append(entry)
        if not live:
            return
        results: list[bool] | None = None
        for attempt in range(_FLUSH_TRIES):
            try:
                results = self._commit(live)
                break
            except TransientError as exc:
                log.warning(
                    "worker %s: settling %d job(s) failed (%s); retrying",
                    self._wid,
                    len(live),
                    exc,
                )
                sleep(min(0.05 * 2**attempt, 2.0))
            except Exception as exc:
                log.error(
                    "worker %s: settling %d job(s) failed (%s); their claims will lapse "
                    "and the jobs will be reclaimed",
                    self._wid,
                    len(live),
                    error_text(exc),
                )
                break
        if results is None:
            return
        for entry, landed in zip(live, results, strict=True):
            assert entry.outcome is not None
            log_outcome(self._wid, entry, entry.outcome, landed)
            self._job_finished(
                entry.job,
                entry.outcome.label if landed else "lost",
                entry.ran_s,
            )

    def _job_finished(self, job: Job, label: str, duration_s: float | None) -> None:
        """A job's outcome committed, or was refused (``lost``): to the
        metrics (O-1) and, for a registered worker, to the count of its
        minute (O-5), in memory until the next refresh: no write per job."""
        _hooks.finished(job, label, duration_s)
        if self.register_every_s is not None:
            key = (int(time.time() // 60), job.queue, label)
            with self._counts_lock:
                self._counts[key] = self._counts.get(key, 0) + 1

    # ---------------------------------------------------------- registry

    def _registry_loop(self) -> None:
        """O-5: register now, refresh every ``register_every_s`` with the
        counts since the last refresh, and at the end (after the last flush)
        delete the row with the last counts."""
        every = self.register_every_s
        assert every is not None
        info = self._w._info()
        due = time.monotonic()
        while True:
            with self._cond:
                while not self._closing:
                    wait_s = due - time.monotonic()
                    if wait_s <= 0:
                        break
                    cond_wait(self._reg_cond, wait_s)
                closing = self._closing
            self._report(info, gone=closing)
            if closing:
                return
            due = time.monotonic() + every

    def _report(self, info: WorkerInfo, gone: bool) -> None:
        store = self._store
        assert store is not None
        with self._counts_lock:
            counts, self._counts = self._counts, {}
        rows = [
            WorkerCount(datetime.fromtimestamp(m * 60, timezone.utc), info.id, q, o, n)
            for (m, q, o), n in counts.items()
        ]
        try:
            store.report_worker(info, rows, gone=gone)
        except Exception as exc:
            # Kept for the next refresh; the row goes stale meanwhile.
            with self._counts_lock:
                for key, n in counts.items():
                    self._counts[key] = self._counts.get(key, 0) + n
            log.warning(
                "worker %s: refreshing its registry row failed (%s)",
                self._wid,
                error_text(exc),
            )

    def _commit(self, live: list[Running]) -> list[bool]:
        """One transaction for the whole group (W-6): the acks of the store's
        own handles in one ``ack_each``, every other outcome beside them."""
        store = self._settler
        batch, rest = split_flush(live) if store is not None else ([], live)
        landed: dict[int, bool] = {}
        # RS-1: results= only when a job keeps one, so that a store wrapping
        # ack_each without knowing results still settles the other jobs.
        kept = _kept_results(batch)
        more: dict[str, Any] = {} if kept is None else {"results": kept}
        if store is not None and len(rest) == 0:
            acked = store.ack_each([e.job for e in batch], **more)
            for entry, ok in zip(batch, acked, strict=True):
                landed[id(entry)] = ok
        elif store is not None and (len(rest) > 1 or batch):
            with store.transaction() as tx:
                if batch:
                    acked = store.ack_each([e.job for e in batch], tx=tx, **more)
                    for entry, ok in zip(batch, acked, strict=True):
                        landed[id(entry)] = ok
                for entry in rest:
                    op, args = apply_args(entry)
                    landed[id(entry)] = bool(getattr(entry.job, op)(*args, tx=tx))
        else:
            for entry in rest:
                op, args = apply_args(entry)
                landed[id(entry)] = bool(getattr(entry.job, op)(*args))
        return [landed[id(e)] for e in live]

    # --------------------------------------------------------- stopping

    def drain(self, grace_s: float, force: Event) -> None:
        """Wait up to *grace_s* for running handlers and their flushes; leave
        the rest to lapse (W-3). *force* set skips what is left of the wait."""
        self._stopping.set()
        deadline = time.monotonic() + grace_s
        with self._cond:
            while self._in_flight and not force.is_set():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                cond_wait(self._cond, min(remaining, SLICE_S))
            left = [e for e in self._active.values() if not e.handled]
        for entry in left:
            with entry.lock:
                if entry.handled:
                    continue
                entry.abandoned = True
            if entry.task is not None:
                entry.task.cancel()
            log.warning(
                "worker %s: %s did not finish within the grace period; its claim is left "
                "to lapse and the job will be reclaimed",
                self._wid,
                entry.ref(),
            )
        # Outcomes already in hand are flushed before the worker returns.
        with self._cond:
            while (self._pending or self._flushing) and not force.is_set():
                cond_wait(self._cond, SLICE_S)

    def _shutdown(self) -> None:
        self._stopping.set()
        for _ in self._threads:
            self._work.put(None)
        with self._cond:
            self._closing = True
            self._cond.notify_all()
            self._flush_cond.notify_all()
            self._beat_cond.notify_all()
            self._reg_cond.notify_all()
        try:
            for helper in self._helpers:
                join(helper, 10)
        finally:
            if self._loop is not None:
                self._loop.stop()
            self._w._release()

    # -------------------------------------------------------- heartbeats

    def _heartbeat_loop(self) -> None:
        """W-2: extend every claim when its interval comes round; W-11: time
        out handlers that run too long."""
        timeout_s = self._s.timeout_s
        while True:
            with self._cond:
                while True:
                    if self._closing:
                        return
                    now = time.monotonic()
                    entries = list(self._active.values())
                    due = [e for e in entries if e.beating and e.next_beat <= now]
                    late = []
                    if timeout_s is not None:
                        late = [
                            e
                            for e in entries
                            if not e.handled and not e.timed_out and now - e.started >= timeout_s
                        ]
                    if due or late:
                        break
                    soonest = min((e.next_beat for e in entries if e.beating), default=now + 1)
                    if timeout_s is not None:
                        soonest = min(
                            soonest,
                            *(e.started + timeout_s for e in entries if not e.handled),
                            now + 1,
                        )
                    wait_s = max(min(soonest - now, SLICE_S * 4), 0.001)
                    self._beat_wake = now + wait_s
                    cond_wait(self._beat_cond, wait_s)
            for entry in late:
                self._time_out(entry)
            for entry in due:
                self._beat(entry)

    def _time_out(self, entry: Running) -> None:
        timeout_s = self._s.timeout_s
        assert timeout_s is not None
        with entry.lock:
            if entry.handled or entry.timed_out or entry.abandoned or entry.settled:
                return
            entry.timed_out = True
            job = entry.job
            entry.outcome = timeout_outcome(timeout_s, job.attempts, job.max_attempts)
        if entry.task is not None:
            entry.task.cancel()  # a coroutine handler is cancelled; a thread keeps its slot
        with self._cond:
            self._pending.append(entry)
            self._flush_cond.notify()

    def _beat(self, entry: Running) -> None:
        job = entry.job
        with entry.lock:
            if not entry.beating:
                return
            try:
                extended = job.heartbeat()
            except Exception as exc:
                # The claim may still be valid: try again soon, inside the margin.
                entry.next_beat = time.monotonic() + entry.interval_s / 2
                log.error(
                    "worker %s: heartbeat of %s failed (%s); retrying",
                    self._wid,
                    entry.ref(),
                    error_text(exc),
                )
                return
            if extended:
                entry.next_beat = time.monotonic() + entry.interval_s
                return
            if not entry.beat_refused():
                return
        log.warning(
            "worker %s: heartbeat of %s was refused (the claim lapsed or the job was "
            "cancelled); its handler's result will be dropped",
            self._wid,
            entry.ref(),
        )
