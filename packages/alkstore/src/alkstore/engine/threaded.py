"""An async face for any synchronous engine: each operation runs in a thread.

:class:`ThreadedAsyncExecutor` turns an :class:`~alkstore.engine.seam.Executor`
into an :class:`~alkstore.engine.seam.AsyncExecutor`. The event loop never
waits on I/O (A-2): every call hops to a small pool of threads owned by the
store, and blocked claims, stream waits and listeners wait on the loop itself
(wakes reach it through ``call_soon_threadsafe``). The SQLite engine's async
face is this adapter (docs/adr/0010 gives its measured cost); a third-party
engine gets an async face from it for free.

Each call runs in a copy of the caller's context, so what the kit marks in
context variables (the open transactions of a task, E-5) follows the task
into the thread.

A caller's connection that belongs to a thread of its own (aiosqlite runs
each connection on a dedicated thread, and ``sqlite3`` refuses use from any
other) cannot be used from the store's threads: the engine's ``resolve_tx``
hook then also says how to run a call on that connection's thread, and every
write given that ``tx`` runs there (A-3).

``await tx.execute(...)`` returns a :class:`ThreadedAsyncCursor`: the sync
driver's cursor with awaited fetches and ``async for``, the same shape as
``psycopg.AsyncCursor`` (A-6), each fetch running in the store's threads
under the transaction's lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import queue
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from contextlib import asynccontextmanager
from typing import Any, Concatenate, NamedTuple, ParamSpec, TypeVar

from alkstore.errors import StoreClosed
from alkstore.protocols import AsyncTx, Capability, CursorLike, Tx

from .seam import Executor
from .wakes import WakeBoard

__all__ = [
    "Runner",
    "ThreadedAsyncCursor",
    "ThreadedAsyncExecutor",
    "ThreadedAsyncTx",
    "ThreadedTxRef",
    "TxResolver",
]

T = TypeVar("T")
P = ParamSpec("P")

#: Runs a call (no arguments) on the thread that owns a caller's connection.
Runner = Callable[[Callable[[], Any]], Awaitable[Any]]

#: An engine's hook for what an async caller passes as ``tx`` and the sync
#: engine would not take as is: the object to hand the sync engine instead,
#: and a :data:`Runner` when that connection must be used on its own thread.
TxResolver = Callable[[object], tuple[object, Runner | None]]

#: Threads per store: enough for concurrent reads and one writer at a time.
DEFAULT_THREADS = 16

#: Rows an ``async for`` over a cursor fetches per trip to a thread.
ITER_BATCH = 100


def _settle(future: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if future.cancelled():
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)


class _IOThreads:
    """The store's I/O threads: started with the store, stopped by close()."""

    def __init__(self, count: int, name: str) -> None:
        self._work: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._threads = [
            threading.Thread(target=self._serve, name=f"{name}-{i}", daemon=True)
            for i in range(count)
        ]
        for thread in self._threads:
            thread.start()

    def submit(
        self, loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any], fn: Callable[[], Any]
    ) -> None:
        self._work.put((loop, future, fn))

    def _serve(self) -> None:
        while True:
            item = self._work.get()
            if item is None:
                return
            loop, future, fn = item
            try:
                value, ok = fn(), True
            except BaseException as exc:  # handed to the awaiting task
                value, ok = exc, False
            with contextlib.suppress(RuntimeError):  # the caller's loop is closed
                loop.call_soon_threadsafe(_settle, future, ok, value)

    def shutdown(self) -> None:
        for _ in self._threads:
            self._work.put(None)


class ThreadedTxRef(NamedTuple):
    """A caller's ``tx=`` on the threaded face: what the sync engine resolves
    (in the thread that runs the operation), the :data:`Runner` of the thread
    that owns its connection if any, and the lock of this face's open
    transaction it belongs to if any."""

    inner: object
    runner: Runner | None
    lock: threading.Lock | None


def _locked(lock: threading.Lock, work: Callable[[], T]) -> T:
    with lock:
        return work()


def _in_threads(
    op: Callable[Concatenate[Executor[Any], P], T], *, takes_tx: bool = False
) -> Callable[Concatenate[ThreadedAsyncExecutor, P], Coroutine[Any, Any, T]]:
    """The async operation that runs the sync executor's *op* in the store's
    threads; with *takes_tx* (its first argument is the caller's ``tx``, as
    :meth:`ThreadedAsyncExecutor.resolve_tx` made it), where
    :meth:`ThreadedAsyncExecutor.call_tx` says."""
    name = op.__name__

    async def method(self: ThreadedAsyncExecutor, /, *args: P.args, **kwargs: P.kwargs) -> T:
        fn = getattr(self.sync, name)
        if not takes_tx:
            return await self.call(_with(fn, kwargs), *args)
        rest: dict[str, Any] = dict(kwargs)
        given: tuple[Any, ...] = args
        tx, given = (rest.pop("tx"), given) if "tx" in rest else (given[0], given[1:])
        assert tx is None or isinstance(tx, ThreadedTxRef)
        return await self.call_tx(_with(fn, rest), tx, *given)

    method.__name__ = name
    method.__qualname__ = f"ThreadedAsyncExecutor.{name}"
    method.__doc__ = op.__doc__
    return method


def _with(fn: Callable[..., T], kwargs: dict[str, Any]) -> Callable[..., T]:
    return functools.partial(fn, **kwargs) if kwargs else fn


class ThreadedAsyncTx:
    """The async face of a synchronous engine's transaction (T-2)."""

    def __init__(self, sync_tx: Tx, owner: ThreadedAsyncExecutor) -> None:
        self.sync_tx = sync_tx
        self._owner = owner
        #: Held in the thread around each piece of this transaction's work
        #: and around its end: an operation whose task was cancelled still
        #: runs in its thread, and must not overlap the rollback or run
        #: after it, outside the transaction (A-4).
        self.lock = threading.Lock()

    def __repr__(self) -> str:
        return f"ThreadedAsyncTx({self.sync_tx!r})"

    @property
    def connection(self) -> Any:
        return self.sync_tx.connection

    async def execute(
        self, sql: str, params: Sequence[Any] | dict[str, Any] = ()
    ) -> ThreadedAsyncCursor:
        """Run the caller's SQL in this transaction (in a thread) and return
        its cursor, whose fetches are awaited (T-2, A-6)."""
        cursor = await self._owner.call(self.sync_tx.execute, sql, params, _lock=self.lock)
        return ThreadedAsyncCursor(cursor, self._owner, self.lock)


class ThreadedAsyncCursor:
    """The async face of a sync driver's cursor (A-6).

    The shape of ``psycopg.AsyncCursor``: ``fetchone()``, ``fetchmany(n)``,
    ``fetchall()`` and ``close()`` are awaited, ``async for`` yields the rows,
    ``rowcount`` and ``description`` are read as they are. Each fetch runs in
    the store's threads under the lock of the transaction that made the
    cursor, so it never overlaps that transaction's other work or its end,
    and the loop never waits on the driver (A-2).
    """

    __slots__ = ("_lock", "_owner", "sync_cursor")

    def __init__(
        self, cursor: CursorLike, owner: ThreadedAsyncExecutor, lock: threading.Lock
    ) -> None:
        #: The driver's own cursor (for what only that driver has, such as
        #: ``lastrowid``); fetch through this object, not through it.
        self.sync_cursor = cursor
        self._owner = owner
        self._lock = lock

    def __repr__(self) -> str:
        return f"ThreadedAsyncCursor({self.sync_cursor!r})"

    @property
    def rowcount(self) -> int:
        """Rows the last statement changed (``-1`` when the driver cannot tell)."""
        return self.sync_cursor.rowcount

    @property
    def description(self) -> Sequence[Any] | None:
        """One entry per result column, its name first; ``None`` without rows."""
        return self.sync_cursor.description

    async def fetchone(self) -> Any:
        """The next row, or ``None`` when there is none left."""
        return await self._owner.call(self.sync_cursor.fetchone, _lock=self._lock)

    async def fetchmany(self, size: int = 0) -> list[Any]:
        """Up to *size* more rows; ``0`` (as in psycopg) means the driver's
        ``arraysize``."""
        if size:
            return await self._owner.call(self.sync_cursor.fetchmany, size, _lock=self._lock)
        return await self._owner.call(self.sync_cursor.fetchmany, _lock=self._lock)

    async def fetchall(self) -> list[Any]:
        """Every row left."""
        return await self._owner.call(self.sync_cursor.fetchall, _lock=self._lock)

    async def __aiter__(self) -> AsyncIterator[Any]:
        """``async for row in cursor``: the rows left, fetched a batch per
        trip to a thread."""
        while True:
            rows = await self.fetchmany(ITER_BATCH)
            if not rows:
                return
            for row in rows:
                yield row

    async def close(self) -> None:
        """Free the driver's cursor; rows not fetched are dropped."""
        await self._owner.call(self.sync_cursor.close, _lock=self._lock)


class ThreadedAsyncExecutor:
    """An :class:`~alkstore.engine.seam.AsyncExecutor` over a sync executor."""

    def __init__(
        self,
        sync: Executor[Any],
        *,
        threads: int = DEFAULT_THREADS,
        resolve_tx: TxResolver | None = None,
    ) -> None:
        self.sync = sync
        self._pool = _IOThreads(threads, "alkstore-async")
        self._resolve_extra = resolve_tx
        #: id(sync tx) -> the lock of its open async transaction.
        self._tx_locks: dict[int, threading.Lock] = {}

    # ------------------------------------------------------------ plumbing

    async def call(
        self, fn: Callable[..., T], *args: Any, _lock: threading.Lock | None = None
    ) -> T:
        """Run ``fn(*args)`` in the store's threads, in a copy of this context;
        work on an open transaction of this face runs under its lock."""
        if self.sync.closed and fn != self.sync.close:
            raise StoreClosed("the store was closed")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        ctx = contextvars.copy_context()
        lock = _lock
        work = functools.partial(ctx.run, fn, *args)
        if lock is not None:
            work = functools.partial(_locked, lock, work)
        self._pool.submit(loop, future, work)
        return await future

    def resolve_tx(self, tx: object) -> ThreadedTxRef:
        """What this face's operations take for a caller's *tx*: the object
        the sync engine is to resolve, in the thread where it will be used
        (a connection may belong to one thread), and how to get there."""
        if self.sync.closed:
            raise StoreClosed("the store was closed")
        if isinstance(tx, ThreadedAsyncTx):
            return ThreadedTxRef(tx.sync_tx, None, self._tx_locks.get(id(tx.sync_tx)))
        if self._resolve_extra is not None:
            inner, runner = self._resolve_extra(tx)
            return ThreadedTxRef(inner, runner, None)
        return ThreadedTxRef(tx, None, None)

    async def call_tx(self, fn: Callable[..., T], tx: ThreadedTxRef | None, *args: Any) -> T:
        """Run ``fn(sync_tx, *args)``, where *sync_tx* is the sync engine's
        resolution of *tx*: in the store's threads (under the lock of an open
        transaction of this face), or on the thread that owns the caller's
        connection when the engine says it has one."""
        if tx is None:
            return await self.call(fn, None, *args)
        sync = self.sync

        def work() -> T:
            return fn(sync.resolve_tx(tx.inner), *args)

        if tx.runner is None:
            return await self.call(work, _lock=tx.lock)
        if sync.closed:
            raise StoreClosed("the store was closed")
        ctx = contextvars.copy_context()
        result: T = await tx.runner(functools.partial(ctx.run, work))
        return result

    # ------------------------------------------------------------ the store

    @property
    def url(self) -> str:
        return self.sync.url

    @property
    def capabilities(self) -> frozenset[Capability]:
        return self.sync.capabilities

    @property
    def closed(self) -> bool:
        return self.sync.closed

    @property
    def store_id(self) -> str:
        return self.sync.store_id

    @property
    def wakes(self) -> WakeBoard:
        return self.sync.wakes

    async def start_wakes(self) -> None:
        await self.call(self.sync.start_wakes)

    def fallback_s(self) -> float | None:
        return self.sync.fallback_s()

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncTx]:
        manager = self.sync.transaction()
        entering = asyncio.ensure_future(self.call(manager.__enter__))
        try:
            tx = await asyncio.shield(entering)
        except asyncio.CancelledError:
            # cancelled while the transaction was being opened. The
            # thread opens it anyway (holding the write lock); close it again,
            # rolled back, before the cancellation goes on.
            with contextlib.suppress(BaseException):
                await asyncio.shield(entering)
            if entering.done() and not entering.cancelled() and entering.exception() is None:
                error = asyncio.CancelledError()
                await asyncio.shield(self.call(manager.__exit__, type(error), error, None))
            raise
        atx = ThreadedAsyncTx(tx, self)
        self._tx_locks[id(tx)] = atx.lock
        try:
            yield atx
        except BaseException as exc:
            # Rolled back even when the task was cancelled: shielded.
            swallow = await asyncio.shield(
                self.call(manager.__exit__, type(exc), exc, exc.__traceback__, _lock=atx.lock)
            )
            if not swallow:
                raise
        else:
            await asyncio.shield(self.call(manager.__exit__, None, None, None, _lock=atx.lock))
        finally:
            self._tx_locks.pop(id(tx), None)

    async def close(self) -> None:
        try:
            await self.call(self.sync.close)
        finally:
            self._pool.shutdown()

    # ---------------------------------------------------- the operations
    # Each runs the sync executor's operation of the same name in the
    # store's threads; one that takes a tx, where that tx's connection lives.

    insert_jobs = _in_threads(Executor.insert_jobs, takes_tx=True)
    claim = _in_threads(Executor.claim)
    next_ready = _in_threads(Executor.next_ready)
    ack = _in_threads(Executor.ack, takes_tx=True)
    retry = _in_threads(Executor.retry, takes_tx=True)
    fail = _in_threads(Executor.fail, takes_tx=True)
    release = _in_threads(Executor.release)
    heartbeat = _in_threads(Executor.heartbeat)
    progress = _in_threads(Executor.progress, takes_tx=True)
    cancel = _in_threads(Executor.cancel, takes_tx=True)
    set_paused = _in_threads(Executor.set_paused, takes_tx=True)
    is_paused = _in_threads(Executor.is_paused)
    run_now = _in_threads(Executor.run_now, takes_tx=True)
    get_job = _in_threads(Executor.get_job)
    get_result = _in_threads(Executor.get_result, takes_tx=True)
    parent_results = _in_threads(Executor.parent_results, takes_tx=True)
    list_jobs = _in_threads(Executor.list_jobs)
    queue_stats = _in_threads(Executor.queue_stats)
    sweep = _in_threads(Executor.sweep)
    redrive = _in_threads(Executor.redrive, takes_tx=True)
    purge_dead = _in_threads(Executor.purge_dead, takes_tx=True)

    publish = _in_threads(Executor.publish, takes_tx=True)
    read_events = _in_threads(Executor.read_events)
    has_event_after = _in_threads(Executor.has_event_after)
    commit_offset = _in_threads(Executor.commit_offset)
    get_offset = _in_threads(Executor.get_offset)
    trim = _in_threads(Executor.trim)
    stream_stats = _in_threads(Executor.stream_stats)

    acquire_lock = _in_threads(Executor.acquire_lock)
    renew_lock = _in_threads(Executor.renew_lock)
    release_lock = _in_threads(Executor.release_lock)
    held_locks = _in_threads(Executor.held_locks)
    report_worker = _in_threads(Executor.report_worker)
    list_workers = _in_threads(Executor.list_workers)
    worker_counts = _in_threads(Executor.worker_counts)
    acquire_rate = _in_threads(Executor.acquire_rate)

    notify = _in_threads(Executor.notify, takes_tx=True)
    subscribe = _in_threads(Executor.subscribe)
    unsubscribe = _in_threads(Executor.unsubscribe)

    clock = _in_threads(Executor.clock)
    upsert_schedule = _in_threads(Executor.upsert_schedule)
    delete_schedule = _in_threads(Executor.delete_schedule)
    list_schedules = _in_threads(Executor.list_schedules)
    due_schedules = _in_threads(Executor.due_schedules)
    fire_schedule = _in_threads(Executor.fire_schedule)
    seconds_to_next_fire = _in_threads(Executor.seconds_to_next_fire)
