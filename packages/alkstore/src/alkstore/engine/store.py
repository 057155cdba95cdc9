"""The store faces (SPEC §3, §14): :class:`KitStore` and :class:`AsyncKitStore`.

An engine builds one by handing the kit its executor; everything a caller
touches is here, once. See docs/adr/0010 for the seam.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import (
    AbstractAsyncContextManager,
    AbstractContextManager,
    asynccontextmanager,
    contextmanager,
)
from datetime import datetime
from types import TracebackType
from typing import Any

from alkstore.errors import InvalidArgument, StoreClosed
from alkstore.names import MAX_NOTIFICATION_BYTES, encode_payload, validate_name
from alkstore.protocols import AsyncJob, AsyncRateLimit, AsyncTx, Capability, Job, RateLimit, Tx
from alkstore.specs import ScheduleSpec
from alkstore.types import (
    EnqueueOpts,
    LockInfo,
    QueueOpts,
    QueueStats,
    Schedule,
    StreamStats,
    check_int,
)

from . import txowner
from .infos import schedule_of
from .jobs import handle_of
from .listener import AsyncQueueListener, QueueListener
from .locks import KitLock, KitRateLimit
from .locks_async import AsyncKitLock, AsyncKitRateLimit
from .outbox import OUTBOX_OPTS, AsyncKitOutbox, KitOutbox, outbox_queue_name
from .prepare import (
    MAX_CLAIM_BATCH,
    check_channels,
    check_lock_args,
    check_queue_opts,
    check_rate_args,
    check_schedule_args,
    check_wait,
    check_worker_id,
    encode_enqueue_opts,
)
from .queue import AsyncKitQueue, KitQueue, claim_async, claim_sync, rate_spec
from .rows import ScheduleRow
from .schedules import (
    SCHEDULER_LOCK,
    check_loop_args,
    due_fires,
    leader_plan,
    log_fire,
    run_leader,
    run_leader_async,
    schedule_job,
)
from .seam import AsyncExecutor, Executor
from .stream import AsyncKitStream, KitStream

__all__ = ["AsyncKitStore", "KitStore"]


def _queue_names(queues: object) -> tuple[str, ...]:
    """``claim_any``'s queues: names or handles, at least one, in order,
    each once (W-10)."""
    if isinstance(queues, (str, bytes)) or not isinstance(queues, Sequence) or not queues:
        raise InvalidArgument("queues must be a non-empty sequence of queue names or handles")
    names: list[str] = []
    for q in queues:
        if isinstance(q, str):
            # C-2: a name the caller spells may not be reserved; a handle
            # (an outbox's queue) may name the engine's own.
            name = validate_name(q, "queue")
        else:
            handle_name = getattr(q, "name", None)
            if handle_name is None or not hasattr(q, "claim_batch"):
                raise InvalidArgument(f"not a queue name or handle: {type(q).__name__}")
            name = validate_name(handle_name, "queue", allow_reserved=True)
        if name not in names:
            names.append(name)
    return tuple(names)


def _fences_of(jobs: object, store_id: str) -> tuple[list[Any], list[int]]:
    """The handles of *jobs* and the positions of those of this store (C-7)."""
    if isinstance(jobs, (str, bytes)) or not isinstance(jobs, Sequence):
        raise InvalidArgument("jobs must be a sequence of claimed jobs")
    handles = [handle_of(j) for j in jobs]
    mine = [i for i, h in enumerate(handles) if h._store_id == store_id]
    return handles, mine


def _schedule_parts(
    name: object, spec: object, queue: object, payload: Any, opts: object, tz: object
) -> tuple[ScheduleSpec, Callable[[datetime], ScheduleRow]]:
    """Checks ``store.schedule``'s arguments (SC-1); returns the parsed spec
    and how to build the row once the engine's clock gives the first fire."""
    sched_name, parsed, queue_name, zone = check_schedule_args(name, spec, queue, tz)
    text = encode_payload(payload)
    if opts is not None and not isinstance(opts, EnqueueOpts):
        raise InvalidArgument(f"opts must be EnqueueOpts, not {type(opts).__name__}")
    opts_text = encode_enqueue_opts(opts)
    spec_text = str(spec)

    def row_at(now: datetime) -> ScheduleRow:
        first = parsed.first_fire(now, zone)
        return ScheduleRow(sched_name, spec_text, queue_name, text, opts_text, zone, first)

    return parsed, row_at


class _StoreCommon:
    """What the sync and the async store share: what they say of their
    executor, and the argument checks of ``claim_any``."""

    _ex: Executor | AsyncExecutor

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._ex.url!r})"

    @property
    def url(self) -> str:
        return self._ex.url

    @property
    def capabilities(self) -> frozenset[Capability]:
        return self._ex.capabilities

    @property
    def closed(self) -> bool:
        return self._ex.closed

    def _check_open(self) -> None:
        if self._ex.closed:
            raise StoreClosed("the store was closed")

    def _claim_any_args(
        self, queues: object, worker_id: object, n: object, wait_s: object
    ) -> tuple[tuple[str, ...], str, int, float]:
        return (
            _queue_names(queues),
            check_worker_id(worker_id),
            check_int("n", n, 1, MAX_CLAIM_BATCH),
            check_wait(wait_s),
        )


class KitStore(_StoreCommon):
    """A :class:`~alkstore.protocols.Store` over an :class:`Executor`."""

    _ex: Executor

    def __init__(self, executor: Executor) -> None:
        self._ex = executor
        self._listeners: weakref.WeakSet[QueueListener] = weakref.WeakSet()

    @property
    def executor(self) -> Executor:
        """The engine's executor (for engine-specific extras and tests)."""
        return self._ex

    # ----------------------------------------------------------- handles

    def queue(self, name: str, opts: QueueOpts | None = None) -> KitQueue:
        """A handle on queue *name* that stamps *opts* on its enqueues (Q-1)."""
        self._check_open()
        return KitQueue(self._ex, validate_name(name, "queue"), check_queue_opts(opts))

    def outbox(self, name: str) -> KitOutbox:
        """The outbox *name*, backed by a reserved queue with fixed opts (Q-20)."""
        self._check_open()
        return KitOutbox(name, KitQueue(self._ex, outbox_queue_name(name), OUTBOX_OPTS))

    def stream(self, name: str) -> KitStream:
        """A handle on stream *name* (S-1..S-4)."""
        self._check_open()
        return KitStream(self._ex, validate_name(name, "stream"))

    def rate_limit(self, name: str, rate: float, per_s: float, burst: int = 1) -> KitRateLimit:
        """A handle on limiter *name*: *rate* units per *per_s* s, *burst* at once (R-1)."""
        self._check_open()
        spec = check_rate_args(name, rate, per_s, burst)
        return KitRateLimit(self._ex, spec, rate, spec.interval_s * rate, self._ex.store_id)

    def lock(self, name: str, ttl_s: float, owner: str | None = None) -> KitLock | None:
        """Acquire *name* for *ttl_s* seconds, or ``None`` while another owner
        holds it (L-1); the same owner re-acquires with the same token (L-2);
        every fresh acquisition gets a larger token (L-4)."""
        self._check_open()
        return self._acquire(*check_lock_args(name, ttl_s, owner))

    def _acquire(self, name: str, ttl_s: float, owner: str) -> KitLock | None:
        got = self._ex.acquire_lock(name, owner, ttl_s)
        if got is None:
            return None
        token, expires_at = got
        return KitLock(self._ex, name, owner, token, expires_at, ttl_s)

    # ------------------------------------------------------ queue-wide ops

    def ack_each(self, jobs: Sequence[Any], tx: object | None = None) -> list[bool]:
        """Ack handles of any queues of this store in one transaction; one
        result per handle, in order; another store's handles get ``False`` (Q-9)."""
        self._check_open()
        handles, mine = _fences_of(jobs, self._ex.store_id)
        results = [False] * len(handles)
        if mine:
            landed = self._ex.ack(tx, [handles[i]._fence for i in mine])
            for i, ok in zip(mine, landed, strict=True):
                results[i] = handles[i]._landed(ok)
        return results

    def claim_any(
        self,
        queues: Sequence[Any],
        worker_id: str,
        n: int = 1,
        wait_s: float = 0,
        rate_limit: RateLimit | None = None,
    ) -> list[Job]:
        """Up to *n* jobs from the first of *queues* that has claimable ones,
        then the next, blocking on wakes of any of them (W-10)."""
        self._check_open()
        names, wid, count, wait = self._claim_any_args(queues, worker_id, n, wait_s)
        rate = rate_spec(rate_limit, self._ex.store_id)
        return claim_sync(self._ex, names, wid, count, wait, rate)

    def queue_stats(self) -> list[QueueStats]:
        """Counts for every queue with live or dead rows, by name."""
        self._check_open()
        return self._ex.queue_stats(None)

    def stream_stats(self) -> list[StreamStats]:
        self._check_open()
        return self._ex.stream_stats()

    def held_locks(self) -> list[LockInfo]:
        self._check_open()
        return self._ex.held_locks()

    # ------------------------------------------------------ notifications

    def notify(self, channel: str, payload: Any, tx: object | None = None) -> None:
        """Send *payload* to *channel*'s listeners when the write commits
        (N-1, T-3); at most 7,900 bytes encoded (C-3)."""
        self._check_open()
        name = validate_name(channel, "channel")
        text = encode_payload(payload, limit=MAX_NOTIFICATION_BYTES, what="notification payload")
        self._ex.notify(tx, name, text)

    def listen(self, *channels: str) -> QueueListener:
        """A listener for *channels*, listening from this call on (N-2)."""
        self._check_open()
        listener = QueueListener(check_channels(channels), self._ex.unsubscribe)
        self._ex.subscribe(listener)
        self._listeners.add(listener)
        return listener

    # ---------------------------------------------------------- schedules

    def schedule(
        self,
        name: str,
        spec: str,
        queue: str,
        payload: Any = None,
        opts: EnqueueOpts | None = None,
        tz: str = "UTC",
    ) -> Schedule:
        """Create or update a schedule (SC-1); an unchanged spec and zone keep
        the stored next fire time (SC-2)."""
        self._check_open()
        _, row_at = _schedule_parts(name, spec, queue, payload, opts, tz)
        return schedule_of(self._ex.upsert_schedule(row_at(self._ex.clock())))

    def unschedule(self, name: str) -> bool:
        """Remove a schedule; ``False`` if there was none."""
        self._check_open()
        return self._ex.delete_schedule(validate_name(name, "schedule"))

    def schedules(self) -> list[Schedule]:
        """Every schedule, by name."""
        self._check_open()
        return [schedule_of(r) for r in self._ex.list_schedules()]

    def tick_schedules(self) -> int:
        """Enqueue every due fire exactly once (SC-3), one per schedule however
        many were missed (SC-4); return how many fired."""
        self._check_open()
        now, rows = self._ex.due_schedules()
        fired = 0
        for row, plan in due_fires(now, rows):
            job = schedule_job(row)
            if self._ex.fire_schedule(
                row.name, row.next_fire_at, plan.fire_at, plan.next_fire_at, row.queue, job
            ):
                fired += 1
                log_fire(row, plan)
        return fired

    def run_schedules(
        self,
        stop: threading.Event | None = None,
        owner: str | None = None,
        lock_ttl_s: float = 30,
    ) -> None:
        """The leader-elected scheduler loop, until *stop* is set (SC-5)."""
        self._check_open()
        if stop is not None and not isinstance(stop, threading.Event):
            raise InvalidArgument(f"stop must be a threading.Event, not {type(stop).__name__}")
        me, ttl = check_loop_args(owner, lock_ttl_s)
        self._ex.start_wakes()  # schedule changes wake the leader early
        run_leader(
            leader_plan(ttl, me),
            stop=stop if stop is not None else threading.Event(),
            is_closed=lambda: self._ex.closed,
            wakes=self._ex.wakes,
            acquire=lambda t, o: self._acquire(SCHEDULER_LOCK, t, o),
            tick=self.tick_schedules,
            next_fire=self._ex.seconds_to_next_fire,
        )

    # --------------------------------------------------------- lifecycle

    def transaction(self) -> AbstractContextManager[Tx]:
        """A transaction: committed on a normal exit, rolled back when the
        block raises (T-1..T-4)."""
        self._check_open()
        return self._transaction()

    @contextmanager
    def _transaction(self) -> Iterator[Tx]:
        _, token = txowner.enter()
        try:
            with self._ex.transaction() as tx:
                yield tx
        finally:
            txowner.leave(token)

    def close(self) -> None:
        """Close listeners, then the engine (ST-3)."""
        if self._ex.closed:
            return
        for listener in list(self._listeners):
            listener.close()
        self._ex.close()

    def __enter__(self) -> KitStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class AsyncKitStore(_StoreCommon):
    """An :class:`~alkstore.protocols.AsyncStore` over an :class:`AsyncExecutor`."""

    _ex: AsyncExecutor

    def __init__(self, executor: AsyncExecutor) -> None:
        self._ex = executor
        self._listeners: weakref.WeakSet[AsyncQueueListener] = weakref.WeakSet()

    @property
    def executor(self) -> AsyncExecutor:
        return self._ex

    def queue(self, name: str, opts: QueueOpts | None = None) -> AsyncKitQueue:
        self._check_open()
        return AsyncKitQueue(self._ex, validate_name(name, "queue"), check_queue_opts(opts))

    def outbox(self, name: str) -> AsyncKitOutbox:
        self._check_open()
        return AsyncKitOutbox(name, AsyncKitQueue(self._ex, outbox_queue_name(name), OUTBOX_OPTS))

    def stream(self, name: str) -> AsyncKitStream:
        self._check_open()
        return AsyncKitStream(self._ex, validate_name(name, "stream"))

    def rate_limit(self, name: str, rate: float, per_s: float, burst: int = 1) -> AsyncKitRateLimit:
        self._check_open()
        spec = check_rate_args(name, rate, per_s, burst)
        return AsyncKitRateLimit(self._ex, spec, rate, spec.interval_s * rate, self._ex.store_id)

    async def lock(self, name: str, ttl_s: float, owner: str | None = None) -> AsyncKitLock | None:
        self._check_open()
        return await self._acquire(*check_lock_args(name, ttl_s, owner))

    async def _acquire(self, name: str, ttl_s: float, owner: str) -> AsyncKitLock | None:
        got = await self._ex.acquire_lock(name, owner, ttl_s)
        if got is None:
            return None
        token, expires_at = got
        return AsyncKitLock(self._ex, name, owner, token, expires_at, ttl_s)

    async def ack_each(self, jobs: Sequence[Any], tx: object | None = None) -> list[bool]:
        self._check_open()
        handles, mine = _fences_of(jobs, self._ex.store_id)
        results = [False] * len(handles)
        if mine:
            landed = await self._ex.ack(tx, [handles[i]._fence for i in mine])
            for i, ok in zip(mine, landed, strict=True):
                results[i] = handles[i]._landed(ok)
        return results

    async def claim_any(
        self,
        queues: Sequence[Any],
        worker_id: str,
        n: int = 1,
        wait_s: float = 0,
        rate_limit: AsyncRateLimit | None = None,
    ) -> list[AsyncJob]:
        self._check_open()
        names, wid, count, wait = self._claim_any_args(queues, worker_id, n, wait_s)
        rate = rate_spec(rate_limit, self._ex.store_id)
        return await claim_async(self._ex, names, wid, count, wait, rate)

    async def queue_stats(self) -> list[QueueStats]:
        self._check_open()
        return await self._ex.queue_stats(None)

    async def stream_stats(self) -> list[StreamStats]:
        self._check_open()
        return await self._ex.stream_stats()

    async def held_locks(self) -> list[LockInfo]:
        self._check_open()
        return await self._ex.held_locks()

    async def notify(self, channel: str, payload: Any, tx: object | None = None) -> None:
        self._check_open()
        name = validate_name(channel, "channel")
        text = encode_payload(payload, limit=MAX_NOTIFICATION_BYTES, what="notification payload")
        await self._ex.notify(tx, name, text)

    def listen(self, *channels: str) -> AsyncQueueListener:
        """A listener; ``async with`` (or its first ``get``) starts it (N-1, N-2)."""
        self._check_open()
        listener = AsyncQueueListener(check_channels(channels), self._subscribe, self._unsubscribe)
        self._listeners.add(listener)
        return listener

    async def _subscribe(self, listener: AsyncQueueListener) -> None:
        self._check_open()
        await self._ex.subscribe(listener)

    async def _unsubscribe(self, listener: AsyncQueueListener) -> None:
        if not self._ex.closed:
            await self._ex.unsubscribe(listener)

    async def schedule(
        self,
        name: str,
        spec: str,
        queue: str,
        payload: Any = None,
        opts: EnqueueOpts | None = None,
        tz: str = "UTC",
    ) -> Schedule:
        self._check_open()
        _, row_at = _schedule_parts(name, spec, queue, payload, opts, tz)
        return schedule_of(await self._ex.upsert_schedule(row_at(await self._ex.clock())))

    async def unschedule(self, name: str) -> bool:
        self._check_open()
        return await self._ex.delete_schedule(validate_name(name, "schedule"))

    async def schedules(self) -> list[Schedule]:
        self._check_open()
        return [schedule_of(r) for r in await self._ex.list_schedules()]

    async def tick_schedules(self) -> int:
        self._check_open()
        now, rows = await self._ex.due_schedules()
        fired = 0
        for row, plan in due_fires(now, rows):
            job = schedule_job(row)
            if await self._ex.fire_schedule(
                row.name, row.next_fire_at, plan.fire_at, plan.next_fire_at, row.queue, job
            ):
                fired += 1
                log_fire(row, plan)
        return fired

    async def run_schedules(
        self,
        stop: asyncio.Event | None = None,
        owner: str | None = None,
        lock_ttl_s: float = 30,
    ) -> None:
        self._check_open()
        if stop is not None and not isinstance(stop, asyncio.Event):
            raise InvalidArgument(f"stop must be an asyncio.Event, not {type(stop).__name__}")
        me, ttl = check_loop_args(owner, lock_ttl_s)
        await self._ex.start_wakes()

        async def acquire(ttl_s: float, who: str) -> AsyncKitLock | None:
            return await self._acquire(SCHEDULER_LOCK, ttl_s, who)

        await run_leader_async(
            leader_plan(ttl, me),
            stop=stop if stop is not None else asyncio.Event(),
            is_closed=lambda: self._ex.closed,
            wakes=self._ex.wakes,
            acquire=acquire,
            tick=self.tick_schedules,
            next_fire=self._ex.seconds_to_next_fire,
        )

    def transaction(self) -> AbstractAsyncContextManager[AsyncTx]:
        """``async with store.transaction() as tx``: committed on a normal
        exit, rolled back when the block raises or the task is cancelled (A-4)."""
        self._check_open()
        return self._transaction()

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[AsyncTx]:
        _, token = txowner.enter()
        try:
            async with self._ex.transaction() as tx:
                yield tx
        finally:
            txowner.leave(token)

    async def close(self) -> None:
        if self._ex.closed:
            return
        for listener in list(self._listeners):
            listener._closed_by_store()
        await self._ex.close()

    async def __aenter__(self) -> AsyncKitStore:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
