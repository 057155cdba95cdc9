"""The wake watcher: one thread per store polling ``PRAGMA data_version``.

``data_version`` changes whenever another connection, in this process or any
other, commits to the file; it never changes for a rolled-back or still-open
transaction. So the watcher turns commits into wakes (Q-19, T-3) without
reading a single table: an idle store runs no queue SELECT. It is delivery,
not maintenance (Q-18). See docs/adr/0003.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable

__all__ = ["Watcher"]

log = logging.getLogger("alkstore.sqlite")


class Watcher:
    """Calls *on_commit* from its own thread after every commit to the file."""

    def __init__(
        self,
        connect: Callable[[], sqlite3.Connection],
        interval_s: float,
        on_commit: Callable[[], None],
    ) -> None:
        self._connect = connect
        self._interval_s = interval_s
        self._on_commit = on_commit
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name="alkstore-sqlite-watcher", daemon=True
        )

    def start(self) -> None:
        """Start, and return once the baseline ``data_version`` is read: every
        commit after this call produces a wake."""
        self._thread.start()
        self._ready.wait()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()

    def _run(self) -> None:
        conn: sqlite3.Connection | None = None
        try:
            conn = self._connect()
            last = conn.execute("PRAGMA data_version").fetchone()[0]
            self._ready.set()
            while not self._stop.wait(self._interval_s):
                version = conn.execute("PRAGMA data_version").fetchone()[0]
                if version != last:
                    last = version
                    self._on_commit()
        except Exception:
            # A broken watcher must not take the process down; blocked calls
            # still wake at their own deadlines and next-ready times.
            log.exception("the SQLite wake watcher stopped")
        finally:
            self._ready.set()
            if conn is not None:
                conn.close()
