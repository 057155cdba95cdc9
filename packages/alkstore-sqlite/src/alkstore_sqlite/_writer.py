"""One queue for SQLite's write lock per database file per process (W-7, E-5).

SQLite lets one connection write at a time. Threads of one process that each
``BEGIN IMMEDIATE`` on their own connection collide and sleep in SQLite's
busy handler (1, 2, 5, 10 ms steps). Instead, every store of a process on one
file shares a :class:`WriteQueue`: a writer waits in it, in order, at most
the busy timeout (then ``TransientError``), and only the writer at its head
talks to SQLite's lock. Other processes still meet SQLite's busy handler.

Group commit: writes that arrive while another is running queue up, and the
next writer to run takes every queued write with it — each in its own
savepoint, so one failing write leaves the others whole (C-6) — and commits
them together. Nobody returns before the commit that made their write
durable; ``synchronous=FULL`` holds for each of them, at a fraction of the
fsyncs. A ``store.transaction()`` holds the queue exclusively for its life.

E-5: a write without ``tx=`` from code that holds an open
``store.transaction()`` of the same file could never get the lock; it is
refused at once with ``InvalidArgument``.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any, TypeVar

from alkstore.engine import txowner
from alkstore.engine.groupcommit import WAITING, Turn, Turns
from alkstore.errors import AlkstoreError, InvalidArgument, TransientError

from ._conn import ConnectionPool
from ._errors import DRIVER_ERRORS, translate, translate_errors

__all__ = ["WriteQueue", "queue_for"]

T = TypeVar("T")

#: Most writes one commit carries.
MAX_GROUP = 256

#: A write: runs on a connection inside the write transaction.
WriteFn = Callable[[sqlite3.Connection], Any]


class _Request(Turn):
    __slots__ = ("error", "exclusive", "fn", "result", "single")

    def __init__(self, fn: WriteFn | None, single: bool, exclusive: bool) -> None:
        self.state = WAITING  # Turn's fields, set here: one call less per write
        self.event = None
        self.fn = fn
        self.single = single
        self.exclusive = exclusive
        self.result: Any = None
        self.error: BaseException | None = None


def _alone(req: _Request) -> bool:
    return req.exclusive


_E5 = (
    "a write without tx= while this thread (or task) holds an open store.transaction() "
    "of the same SQLite file can never get the write lock; pass tx= to join the transaction"
)


class WriteQueue:
    """The write lock of one database file, as seen by one process: the
    kit's leader/follower :class:`~alkstore.engine.groupcommit.Turns`."""

    def __init__(self) -> None:
        self._turns: Turns[_Request] = Turns()
        self._holder: object | None = None  # the marker of an open store.transaction()

    # ------------------------------------------------------------ entering

    def _join(self, req: _Request, timeout_s: float) -> bool:
        """Queue *req*; return ``True`` when it leads (runs its own turn) and
        ``False`` when another writer already ran it."""
        holder = self._holder  # set and cleared only by the holding thread (or task)
        if holder is not None and holder in txowner.open_here():
            raise InvalidArgument(_E5)
        if self._turns.enter(lambda: req) is None:
            return True
        led = self._turns.wait(req, timeout_s)
        if led is None:
            raise TransientError(
                f"SQLite is busy: no write lock within {timeout_s:g} s "
                "(another writer of this process held it)"
            )
        return led

    # ------------------------------------------------------------- writing

    def write(
        self,
        pool: ConnectionPool,
        fn: WriteFn,
        *,
        timeout_s: float,
        single: bool = False,
    ) -> Any:
        """Run ``fn(conn)`` in a write transaction and return its result once
        committed. *single* says *fn* is one statement, which a group of one
        runs in autocommit (no BEGIN/COMMIT round trip)."""
        req = _Request(fn, single, False)
        if not self._join(req, timeout_s):
            if req.error is not None:
                raise req.error
            return req.result
        try:
            group = self._turns.take(req, MAX_GROUP, stop=_alone)
            self._run_group(pool, group)
        finally:
            self._turns.hand_over()
        if req.error is not None:
            raise req.error
        return req.result

    @staticmethod
    def _run_group(pool: ConnectionPool, group: list[_Request]) -> None:
        try:
            conn = pool.get()
            try:
                if len(group) == 1 and group[0].single:
                    req = group[0]
                    try:
                        req.result = req.fn(conn)  # type: ignore[misc]
                    except DRIVER_ERRORS as exc:
                        req.error = translate(exc)
                        req.error.__cause__ = exc
                    except BaseException as exc:
                        req.error = exc
                    return
                _run_in_transaction(conn, group)
            finally:
                pool.put(conn)
        except BaseException as exc:  # the connection itself failed
            failure = translate(exc) if isinstance(exc, DRIVER_ERRORS) else exc
            for req in group:
                if req.error is None:
                    req.error = failure
                    req.result = None
        finally:
            Turns.finish(group[1:])

    @contextmanager
    def exclusive(self, conn: sqlite3.Connection, timeout_s: float) -> Iterator[None]:
        """Hold the lock for a ``store.transaction()``: ``BEGIN IMMEDIATE``
        on *conn*, committed (or rolled back) by the caller before the block
        ends; nobody else of this process writes meanwhile."""
        req = _Request(None, False, True)
        self._join(req, timeout_s)
        self._holder = txowner.innermost()
        try:
            yield
        finally:
            self._holder = None
            self._turns.hand_over()


def _run_in_transaction(conn: sqlite3.Connection, group: list[_Request]) -> None:
    """One ``BEGIN IMMEDIATE .. COMMIT`` for the whole group; each write in a
    savepoint when there are several, so a failing one is undone alone."""
    with translate_errors():
        conn.execute("BEGIN IMMEDIATE")
    try:
        if len(group) == 1:
            req = group[0]
            try:
                with translate_errors():
                    req.result = req.fn(conn)  # type: ignore[misc]
            except BaseException as exc:
                req.error = exc
                with translate_errors():
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                return
        else:
            for req in group:
                try:
                    with translate_errors():
                        conn.execute("SAVEPOINT alkstore_w")
                        req.result = req.fn(conn)  # type: ignore[misc]
                        conn.execute("RELEASE alkstore_w")
                except BaseException as exc:
                    req.error = exc
                    req.result = None
                    with translate_errors():
                        conn.execute("ROLLBACK TO alkstore_w")
                        conn.execute("RELEASE alkstore_w")
        with translate_errors():
            conn.execute("COMMIT")
    except BaseException as exc:
        if conn.in_transaction:
            with suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
        for req in group:
            req.result = None
            if req.error is None or not isinstance(req.error, AlkstoreError):
                req.error = exc
        raise


_QUEUES: weakref.WeakValueDictionary[str, WriteQueue] = weakref.WeakValueDictionary()
_QUEUES_LOCK = threading.Lock()


def queue_for(path: str) -> WriteQueue:
    """The process's write queue of the file at *path* (W-7: shared by every
    store on it)."""
    key = os.path.realpath(path)
    with _QUEUES_LOCK:
        found = _QUEUES.get(key)
        if found is None:
            found = WriteQueue()
            _QUEUES[key] = found
        return found
