"""The SQLite engine's executor: the I/O behind every contract call (docs/adr/0010).

The kit (:mod:`alkstore.engine`) implements the public API above
:class:`SQLiteExecutor`. The executor is one object holding one component
per area over a shared :class:`~._core.Core` (connections, the write queue,
transactions, wakes): :class:`~._queues.QueueOps` (SPEC §5, §15, §16, rate
limits), :class:`~._streams.StreamOps` (§7), :class:`~._locks.LockOps` (§8),
:class:`~._schedules.ScheduleOps` (§9) and :class:`~._notes.NoteOps` (§10).
Their SQL is in :mod:`._sql`.

Each :class:`~alkstore.engine.Executor` operation is the component's bound
method, stored on the executor when it is built: a call costs what a method
call costs, with no forwarding in between.
"""

from __future__ import annotations

from alkstore.engine import WakeBoard
from alkstore.protocols import Capability

from ._core import Core
from ._locks import LockOps
from ._notes import NoteOps
from ._queues import QueueOps
from ._schedules import ScheduleOps
from ._streams import StreamOps
from ._workers import WorkerOps

__all__ = ["SQLiteExecutor"]


class SQLiteExecutor:
    """The whole :class:`~alkstore.engine.seam.Executor` of the SQLite engine,
    made of the areas over one :class:`~._core.Core`."""

    def __init__(self, core: Core) -> None:
        self.core = core
        self.path = core.path
        self.url = core.url
        self.store_id = core.store_id
        self.schema_migration = core.schema_migration
        self.capabilities: frozenset[Capability] = core.capabilities
        self.wakes: WakeBoard = core.wakes
        self.start_wakes = core.start_wakes
        self.fallback_s = core.fallback_s
        self.transaction = core.transaction
        self.resolve_tx = core.resolve_tx

        queues = QueueOps(core)
        self.insert_jobs = queues.insert_jobs
        self.claim = queues.claim
        self.next_ready = queues.next_ready
        self.ack = queues.ack
        self.retry = queues.retry
        self.fail = queues.fail
        self.release = queues.release
        self.heartbeat = queues.heartbeat
        self.progress = queues.progress
        self.cancel = queues.cancel
        self.set_paused = queues.set_paused
        self.is_paused = queues.is_paused
        self.run_now = queues.run_now
        self.get_job = queues.get_job
        self.get_result = queues.get_result
        self.parent_results = queues.parent_results
        self.list_jobs = queues.list_jobs
        self.queue_stats = queues.queue_stats
        self.sweep = queues.sweep
        self.redrive = queues.redrive
        self.purge_dead = queues.purge_dead
        self.acquire_rate = queues.acquire_rate

        streams = StreamOps(core)
        self.publish = streams.publish
        self.read_events = streams.read_events
        self.has_event_after = streams.has_event_after
        self.commit_offset = streams.commit_offset
        self.get_offset = streams.get_offset
        self.trim = streams.trim
        self.stream_stats = streams.stream_stats

        locks = LockOps(core)
        self.acquire_lock = locks.acquire_lock
        self.renew_lock = locks.renew_lock
        self.release_lock = locks.release_lock
        self.held_locks = locks.held_locks

        workers = WorkerOps(core)  # O-5
        self.report_worker = workers.report_worker
        self.list_workers = workers.list_workers
        self.worker_counts = workers.worker_counts

        notes = NoteOps(core)
        self._notes = notes
        core.after_commit = notes.on_commit
        self.notify = notes.notify
        self.subscribe = notes.subscribe
        self.unsubscribe = notes.unsubscribe

        schedules = ScheduleOps(core)
        self.clock = schedules.clock
        self.upsert_schedule = schedules.upsert_schedule
        self.delete_schedule = schedules.delete_schedule
        self.list_schedules = schedules.list_schedules
        self.due_schedules = schedules.due_schedules
        self.fire_schedule = schedules.fire_schedule
        self.seconds_to_next_fire = schedules.seconds_to_next_fire

    def __repr__(self) -> str:
        return f"SQLiteExecutor({self.path!r})"

    @property
    def closed(self) -> bool:
        return self.core.closed

    def close(self) -> None:
        """Stop the watcher, forget the listeners, close every connection (ST-3)."""
        self.core.close()
        self._notes.clear()
