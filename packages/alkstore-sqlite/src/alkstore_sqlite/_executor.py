"""The SQLite engine's executor: the I/O behind every contract call (docs/adr/0010).

The kit (:mod:`alkstore.engine`) implements the public API above
:class:`SQLiteExecutor`. The executor is one object made of one part per
area over a shared :class:`~._core.Core` (connections, the write queue,
transactions, wakes): :class:`~._queues.QueueOps` (SPEC §5, §15, §16, rate
limits), :class:`~._streams.StreamOps` (§7), :class:`~._locks.LockOps` (§8),
:class:`~._notes.NoteOps` (§10) and :class:`~._schedules.ScheduleOps` (§9).
Their SQL is in :mod:`._sql`.

Each :class:`~alkstore.engine.Executor` operation is a method the executor
inherits from its part: a call costs what a method call costs, with no
forwarding in between. The parts share no names but the :class:`~._core.Part`
they build on.
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

__all__ = ["SQLiteExecutor"]


class SQLiteExecutor(QueueOps, StreamOps, LockOps, NoteOps, ScheduleOps):
    """The whole :class:`~alkstore.engine.seam.Executor` of the SQLite engine."""

    def __init__(self, core: Core) -> None:
        super().__init__(core)
        self.core = core
        self.path = core.path
        self.url = core.url
        self.store_id = core.store_id
        self.capabilities: frozenset[Capability] = core.capabilities
        self.wakes: WakeBoard = core.wakes
        self.start_wakes = core.start_wakes
        self.fallback_s = core.fallback_s
        self.transaction = core.transaction
        self.resolve_tx = core.resolve_tx
        core.after_commit = self.on_commit

    def __repr__(self) -> str:
        return f"SQLiteExecutor({self.path!r})"

    @property
    def closed(self) -> bool:
        return self.core.closed

    def close(self) -> None:
        """Stop the watcher, forget the listeners, close every connection (ST-3)."""
        self.core.close()
        self.clear()
