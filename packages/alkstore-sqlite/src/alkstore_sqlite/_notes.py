"""Notifications of the SQLite executor (SPEC §10, docs/adr/0005).

A notification is a row inserted in the writer's transaction, so it exists
only after commit (T-3); after each commit the wake watcher sees, the rows
newer than what each listener saw go to the listeners of their channel
(N-1).
"""

from __future__ import annotations

import sqlite3
import threading

from alkstore.engine import NoteSink
from alkstore.errors import StoreClosed

from . import _sql
from ._core import Core
from ._time import now_us

__all__ = ["NoteOps"]


class NoteOps:
    """``notify`` and the delivery to listeners."""

    def __init__(self, core: Core) -> None:
        self._core = core
        self._read = core.read
        self._write = core.write
        self._sinks: dict[NoteSink, int] = {}
        self._sinks_lock = threading.Lock()
        cap = core.notifications_cap
        # EN-1: pruning rides every tenth of the cap's notifying writes.
        self._prune_every = max(cap // 10, 1)
        self._keep = max(cap, self._prune_every)

    def notify(self, tx: sqlite3.Connection | None, channel: str, payload: str) -> None:
        every = self._prune_every
        keep = self._keep

        def run(conn: sqlite3.Connection) -> None:
            params = {"channel": channel, "payload": payload, "now": now_us()}
            note_id = int(conn.execute(_sql.NOTIFY, params).fetchall()[0][0])
            # EN-1: the notifying writes keep the table within cap + cap/10.
            if note_id % every == 0 and note_id > keep:
                conn.execute(_sql.PRUNE_NOTIFICATIONS_BELOW, {"below": note_id - keep})

        self._write(tx, run)

    def subscribe(self, sink: NoteSink) -> None:
        self._core.start_wakes()
        # Registered under the sinks lock with the newest id as baseline: a
        # notification committed after this point has a larger id (SQLite has
        # one writer and ids never repeat), so it is delivered (N-1).
        with self._sinks_lock, self._read() as conn:
            self._sinks[sink] = int(conn.execute(_sql.LAST_NOTIFICATION).fetchone()[0])

    def unsubscribe(self, sink: NoteSink) -> None:
        with self._sinks_lock:
            self._sinks.pop(sink, None)

    def clear(self) -> None:
        """Forget every listener (the store closed)."""
        with self._sinks_lock:
            self._sinks.clear()

    def on_commit(self) -> None:
        """After a commit: hand new notifications to their listeners."""
        with self._sinks_lock:
            if not self._sinks:
                return
            after = min(self._sinks.values())
        self._dispatch(after)

    def _dispatch(self, after: int) -> None:
        try:
            with self._read() as conn:
                rows = conn.execute(_sql.NOTIFICATIONS_AFTER, {"after": after}).fetchall()
        except StoreClosed:
            return
        if not rows:
            return
        with self._sinks_lock:
            for sink, seen in list(self._sinks.items()):
                for note_id, channel, payload in rows:
                    if note_id > seen and channel in sink.channels:
                        sink.deliver(channel, payload)
                self._sinks[sink] = max(seen, rows[-1][0])
