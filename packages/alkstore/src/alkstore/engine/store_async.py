# Async source of store.py (scripts/async_to_sync.py makes it: edit this file).
# mypy: warn-unreachable=False
"""The store (SPEC §3, §14): what an engine's ``open`` returns.

An engine builds one by handing the kit its executor; everything a caller
touches is here, once. See docs/adr/0010 for the seam and docs/adr/0017 for
the two faces.
"""

from __future__ import annotations

import weakref
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import datetime
from typing import Any

from alkstore._acompat import AEvent, aoffload
from alkstore._sizes import surely_small
from alkstore.errors import InvalidArgument
from alkstore.names import MAX_NOTIFICATION_BYTES, encode_payload, validate_name
from alkstore.protocols import AsyncJob, AsyncRateLimit, AsyncTx, Capability
from alkstore.types import (
    EnqueueOpts,
    LockInfo,
    QueueOpts,
    QueueStats,
    Schedule,
    StreamStats,
    WorkerCount,
    WorkerInfo,
)

from . import txowner
from .capabilities import require
from .infos import schedule_of
from .listener_async import AsyncQueueListener
from .locks_async import AsyncKitLock, AsyncKitRateLimit
from .native import resolve_async
from .outbox_async import AsyncKitOutbox
from .outbox_base import OUTBOX_OPTS, outbox_queue_name
from .prepare import check_channels, check_lock_args, check_queue_opts, check_rate_args
from .queue_async import AsyncKitQueue, claim_async
from .queue_base import rate_spec
from .results import ack_results
from .rows import Fire
from .runners_async import run_leader_async
from .schedules import (
    SCHEDULER_LOCK,
    check_loop_args,
    due_fires,
    leader_plan,
    log_fire,
    schedule_job,
)
from .seam_async import AsyncExecutor
from .store_base import StoreBase, fences_of, schedule_parts
from .stream_async import AsyncKitStream
from .workers import (
    WORKERS_FORGOTTEN_S,
    check_since,
    check_worker_report,
)

__all__ = ["AsyncKitStore"]


class AsyncKitStore(StoreBase):
    """A :class:`~alkstore.protocols.AsyncStore` over an executor."""

    _ex: AsyncExecutor[Any]

    def __init__(self, executor: AsyncExecutor[Any]) -> None:
        self._ex = executor
        self._listeners: weakref.WeakSet[AsyncQueueListener] = weakref.WeakSet()

    @property
    def executor(self) -> AsyncExecutor[Any]:
        """The engine's executor (for engine-specific extras and tests)."""
        return self._ex

    # ----------------------------------------------------------- handles

    def queue(self, name: str, opts: QueueOpts | None = None) -> AsyncKitQueue:
        """A handle on queue *name* that stamps *opts* on its enqueues (Q-1)."""
        self._check_open()
        return AsyncKitQueue(self._ex, validate_name(name, "queue"), check_queue_opts(opts), self)

    def outbox(self, name: str) -> AsyncKitOutbox:
        """The outbox *name*, backed by a reserved queue with fixed opts (Q-20)."""
        self._check_open()
        backing = AsyncKitQueue(self._ex, outbox_queue_name(name), OUTBOX_OPTS, self)
        return AsyncKitOutbox(name, backing)

    def stream(self, name: str) -> AsyncKitStream:
        """A handle on stream *name* (S-1..S-4)."""
        self._check_open()
        return AsyncKitStream(self._ex, validate_name(name, "stream"))

    def rate_limit(self, name: str, rate: float, per_s: float, burst: int = 1) -> AsyncKitRateLimit:
        """A handle on limiter *name*: *rate* units per *per_s* s, *burst* at once (R-1)."""
        self._check_open()
        spec = check_rate_args(name, rate, per_s, burst)
        return AsyncKitRateLimit(self._ex, spec, rate, spec.interval_s * rate, self._ex.store_id)

    async def lock(self, name: str, ttl_s: float, owner: str | None = None) -> AsyncKitLock | None:
        """Acquire *name* for *ttl_s* seconds, or ``None`` while another owner
        holds it (L-1); the same owner re-acquires with the same token (L-2);
        every fresh acquisition gets a larger token (L-4)."""
        self._check_open()
        return await self._acquire(*check_lock_args(name, ttl_s, owner))

    async def _acquire(self, name: str, ttl_s: float, owner: str) -> AsyncKitLock | None:
        got = await self._ex.acquire_lock(name, owner, ttl_s)
        if got is None:
            return None
        token, expires_at = got
        return AsyncKitLock(self._ex, name, owner, token, expires_at, ttl_s)

    # ------------------------------------------------------ queue-wide ops

    async def ack_each(
        self,
        jobs: Sequence[Any],
        tx: object | None = None,
        *,
        results: Sequence[Any] | None = None,
    ) -> list[bool]:
        """Ack handles of any queues of this store in one transaction; one
        result per handle, in order; another store's handles get ``False`` (Q-9).
        *results*, one per job, are kept for the jobs stamped with
        ``result_ttl_s`` (RS-1); a result for a job without the stamp is
        refused and nothing is acked."""
        self._check_open()
        handles, mine = fences_of(jobs, self._ex.store_id, self._async_face)
        out = [False] * len(handles)
        if not mine:
            return out
        given = None
        if results is not None:
            if isinstance(results, (str, bytes)) or not isinstance(results, Sequence):
                raise InvalidArgument("results must be a sequence with one result per job")
            if len(results) != len(handles):
                raise InvalidArgument(
                    f"results must hold one result per job: {len(results)} for {len(handles)} jobs"
                )
            given = [results[i] for i in mine]
        ours = [handles[i] for i in mine]
        if True:  # ASYNC
            if given is not None and not all(surely_small(v) for v in given):
                encoded = await aoffload(ack_results, ours, given)
            else:
                encoded = ack_results(ours, given)
        else:
            encoded = ack_results(ours, given)
        fences = [h._fence for h in ours]
        native = await resolve_async(tx, self._ex)
        if encoded is None:
            landed = await self._ex.ack(native, fences)
        else:
            require(self._ex.capabilities, Capability.RESULTS)
            landed = await self._ex.ack(native, fences, encoded)
        for i, ok in zip(mine, landed, strict=True):
            out[i] = handles[i]._landed(ok)
        return out

    async def claim_any(
        self,
        queues: Sequence[Any],
        worker_id: str,
        n: int = 1,
        wait_s: float = 0,
        rate_limit: AsyncRateLimit | None = None,
    ) -> list[AsyncJob]:
        """Up to *n* jobs from the first of *queues* that has claimable ones,
        then the next, blocking on wakes of any of them (W-10)."""
        self._check_open()
        names, wid, count, wait = self._claim_any_args(queues, worker_id, n, wait_s)
        rate = rate_spec(rate_limit, self._ex.store_id, self._async_face)
        return await claim_async(self._ex, names, wid, count, wait, rate)

    async def queue_stats(self) -> list[QueueStats]:
        """Counts for every queue with live or dead rows, by name."""
        self._check_open()
        return await self._ex.queue_stats(None)

    async def stream_stats(self) -> list[StreamStats]:
        """Events, offsets and consumers of every stream, by name."""
        self._check_open()
        return await self._ex.stream_stats()

    async def held_locks(self) -> list[LockInfo]:
        """Every unexpired lock, by name."""
        self._check_open()
        return await self._ex.held_locks()

    # ------------------------------------------------------ workers (O-5)

    async def workers(self) -> list[WorkerInfo]:
        """The registered workers seen within the last hour, by id (O-5)."""
        self._check_open()
        require(self._ex.capabilities, Capability.WORKERS)
        return await self._ex.list_workers(WORKERS_FORGOTTEN_S)

    async def worker_counts(self, since: datetime | None = None) -> list[WorkerCount]:
        """The per-minute counts of finished jobs from *since*'s minute on (by
        default the last hour), by minute, worker, queue, outcome (O-5)."""
        self._check_open()
        require(self._ex.capabilities, Capability.WORKERS)
        return await self._ex.worker_counts(check_since(since))

    async def report_worker(
        self,
        info: WorkerInfo,
        counts: Sequence[WorkerCount] = (),
        *,
        gone: bool = False,
        forget_after_s: float = WORKERS_FORGOTTEN_S,
        keep_counts_s: float = 604800.0,
    ) -> None:
        """A worker's refresh in one statement: its row, its counts, and the
        deletion of stale rows (O-5); *gone* deletes its row (a clean stop)."""
        self._check_open()
        require(self._ex.capabilities, Capability.WORKERS)
        if not isinstance(gone, bool):
            raise InvalidArgument(f"gone must be a bool, not {type(gone).__name__}")
        row, merged, forget, keep = check_worker_report(info, counts, forget_after_s, keep_counts_s)
        await self._ex.report_worker(row, merged, gone, forget, keep)

    # ------------------------------------------------------ notifications

    async def notify(self, channel: str, payload: Any, tx: object | None = None) -> None:
        """Send *payload* to *channel*'s listeners when the write commits
        (N-1, T-3); at most 7,900 bytes encoded (C-3)."""
        self._check_open()
        name = validate_name(channel, "channel")
        text = encode_payload(payload, limit=MAX_NOTIFICATION_BYTES, what="notification payload")
        await self._ex.notify(await resolve_async(tx, self._ex), name, text)

    def listen(self, *channels: str) -> AsyncQueueListener:
        """A listener for *channels* (N-2). The sync face listens from this
        call on; on the async face ``async with`` (or its first ``get``)
        starts it (N-1)."""
        self._check_open()
        listener = AsyncQueueListener(check_channels(channels), self._subscribe, self._unsubscribe)
        self._listeners.add(listener)
        if True:  # ASYNC
            pass
        else:
            listener.start()
        return listener

    async def _subscribe(self, listener: AsyncQueueListener) -> None:
        self._check_open()
        await self._ex.subscribe(listener)

    async def _unsubscribe(self, listener: AsyncQueueListener) -> None:
        if not self._ex.closed:
            await self._ex.unsubscribe(listener)

    # ---------------------------------------------------------- schedules

    async def schedule(
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
        _, row_at = schedule_parts(name, spec, queue, payload, opts, tz)
        return schedule_of(await self._ex.upsert_schedule(row_at(await self._ex.clock())))

    async def unschedule(self, name: str) -> bool:
        """Remove a schedule; ``False`` if there was none."""
        self._check_open()
        return await self._ex.delete_schedule(validate_name(name, "schedule"))

    async def schedules(self) -> list[Schedule]:
        """Every schedule, by name."""
        self._check_open()
        return [schedule_of(r) for r in await self._ex.list_schedules()]

    async def tick_schedules(self) -> int:
        """Enqueue every due fire exactly once (SC-3), one per schedule however
        many were missed (SC-4); return how many fired."""
        self._check_open()
        now, rows = await self._ex.due_schedules()
        fired = 0
        for row, plan in due_fires(now, rows):
            job = schedule_job(row)
            fire = Fire(row.name, row.next_fire_at, plan.fire_at, plan.next_fire_at, row.queue, job)
            if await self._ex.fire_schedule(fire):
                fired += 1
                log_fire(row, plan)
        return fired

    async def run_schedules(
        self,
        stop: AEvent | None = None,
        owner: str | None = None,
        lock_ttl_s: float = 30,
    ) -> None:
        """The leader-elected scheduler loop, until *stop* is set (SC-5)."""
        self._check_open()
        if stop is not None and not isinstance(stop, AEvent):
            if True:  # ASYNC
                raise InvalidArgument(f"stop must be an asyncio.Event, not {type(stop).__name__}")
            else:
                raise InvalidArgument(f"stop must be a threading.Event, not {type(stop).__name__}")
        me, ttl = check_loop_args(owner, lock_ttl_s)
        await self._ex.start_wakes()  # schedule changes wake the leader early

        async def acquire(ttl_s: float, who: str) -> AsyncKitLock | None:
            return await self._acquire(SCHEDULER_LOCK, ttl_s, who)

        await run_leader_async(
            leader_plan(ttl, me),
            stop=stop if stop is not None else AEvent(),
            is_closed=lambda: self._ex.closed,
            wakes=self._ex.wakes,
            acquire=acquire,
            tick=self.tick_schedules,
            next_fire=self._ex.seconds_to_next_fire,
        )

    # --------------------------------------------------------- lifecycle

    def transaction(self) -> AbstractAsyncContextManager[AsyncTx]:
        """A transaction: committed on a normal exit, rolled back when the
        block raises (T-1..T-4) or, on the async face, when the task is
        cancelled (A-4)."""
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
        """Close listeners, then the engine (ST-3)."""
        if self._ex.closed:
            return
        for listener in list(self._listeners):
            listener.end()
        await self._ex.close()

    async def __aenter__(self) -> AsyncKitStore:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
