"""``SQLiteStore``: the SQLite engine's ``Store`` (SPEC §3, §11)."""

from __future__ import annotations

import math
import threading
from types import TracebackType
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from alkstore.engine import (
    OUTBOX_OPTS,
    QueueOutbox,
    check_queue_opts,
    outbox_queue_name,
    run_scheduler_loop,
)
from alkstore.errors import InvalidArgument
from alkstore.names import validate_name
from alkstore.protocols import Outbox, Queue, Stream
from alkstore.types import QueueOpts, QueueStats, check_duration, check_int

from . import _sql
from ._lock import LockMixin
from ._notify import NotifyMixin
from ._queue import SQLiteQueue
from ._scheduler import ScheduleMixin
from ._stream import SQLiteStream
from ._time import now_us

__all__ = ["SQLiteStore", "open_store", "parse_url"]

_OPTION_TYPES = {
    "busy_timeout_s": float,
    "synchronous": str,
    "poll_interval_s": float,
    "notifications_cap": int,
}


class SQLiteStore(LockMixin, NotifyMixin, ScheduleMixin):
    """An alkstore store in a SQLite file (tables ``__alkstore_*``).

    Engine options:

    - ``busy_timeout_s`` (5.0): how long a write waits for SQLite's write lock
      before it fails with ``TransientError``.
    - ``synchronous`` (``"full"``): ``"full"`` makes every commit durable
      across power loss; ``"normal"`` (WAL) is about 3x faster per commit and
      can lose the last commits, never corrupt the file, on power loss.
    - ``poll_interval_s`` (0.002): how often the wake watcher reads
      ``PRAGMA data_version``; the bound on wake latency.
    - ``notifications_cap`` (10,000): notification rows kept when a store
      opens (N-3).
    """

    def __init__(
        self,
        path: str,
        *,
        busy_timeout_s: float = 5.0,
        synchronous: str = "full",
        poll_interval_s: float = 0.002,
        notifications_cap: int = 10_000,
        url: str | None = None,
    ) -> None:
        if not isinstance(path, str) or not path:
            raise InvalidArgument("the SQLite engine needs a file path")
        if path == ":memory:" or path.startswith("file::memory:") or "mode=memory" in path:
            raise InvalidArgument(
                "the SQLite engine needs a file: ':memory:' databases cannot be shared "
                "between connections, and wakes need a file"
            )
        busy = check_duration("busy_timeout_s", busy_timeout_s)
        poll = check_duration("poll_interval_s", poll_interval_s, allow_zero=False)
        assert busy is not None and poll is not None
        if synchronous not in ("full", "normal"):
            raise InvalidArgument(f"synchronous must be 'full' or 'normal', not {synchronous!r}")
        cap = check_int("notifications_cap", notifications_cap, 0, 2**62)
        super().__init__(
            path,
            url=url or f"sqlite:///{path}",
            busy_timeout_s=busy,
            synchronous=synchronous,
            poll_interval_s=min(poll, 1.0),
            notifications_cap=cap,
        )

    def __repr__(self) -> str:
        return f"SQLiteStore({self._path!r})"

    def __enter__(self) -> SQLiteStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # ------------------------------------------------------------ primitives

    def queue(self, name: str, opts: QueueOpts | None = None) -> Queue:
        """A handle on queue *name* that stamps *opts* on its enqueues (Q-1)."""
        self._check_open()
        return SQLiteQueue(self, validate_name(name, "queue"), check_queue_opts(opts))

    def outbox(self, name: str) -> Outbox:
        """The outbox *name*, backed by a reserved queue with fixed opts (Q-20)."""
        self._check_open()
        queue = SQLiteQueue(self, outbox_queue_name(name), OUTBOX_OPTS)
        return QueueOutbox(name, queue)

    def stream(self, name: str) -> Stream:
        """A handle on stream *name* (S-1..S-4)."""
        self._check_open()
        return SQLiteStream(self, validate_name(name, "stream"))

    def queue_stats(self) -> list[QueueStats]:
        """Counts for every queue with live or dead rows, by name."""
        self._check_open()
        with self._read() as conn:
            rows = conn.execute(_sql.QUEUE_STATS, {"now": now_us()}).fetchall()
        return [QueueStats(q, int(p), int(s), int(r), int(d)) for q, p, s, r, d in rows]

    def run_schedules(
        self,
        stop: threading.Event | None = None,
        owner: str | None = None,
        lock_ttl_s: float = 30,
    ) -> None:
        """The leader-elected scheduler loop, until *stop* is set (SC-5)."""
        self._check_open()
        self._ensure_watcher()  # schedule changes wake the leader early
        run_scheduler_loop(self, stop, owner, lock_ttl_s)


def parse_url(url: str) -> tuple[str, dict[str, Any]]:
    """``sqlite:///relative.db``, ``sqlite:////absolute.db`` -> (path, options).

    Query parameters are engine options (``?synchronous=normal``).
    """
    parts = urlsplit(url)
    if parts.scheme.lower() != "sqlite":
        raise InvalidArgument(f"not a sqlite:// URL: {url!r}")
    if parts.netloc not in ("", "localhost"):
        raise InvalidArgument(f"a sqlite URL has no host: use sqlite:///path, not {url!r}")
    path = unquote(parts.path)
    path = path[1:] if path.startswith("/") else path
    if not path:
        raise InvalidArgument(f"the sqlite URL names no file: {url!r}")
    opts: dict[str, Any] = {}
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        kind = _OPTION_TYPES.get(key)
        if kind is None:
            raise InvalidArgument(f"unknown SQLite engine option {key!r} in {url!r}")
        try:
            converted = kind(value)
        except ValueError as exc:
            raise InvalidArgument(f"bad value for {key}: {value!r}") from exc
        if isinstance(converted, float) and not math.isfinite(converted):
            raise InvalidArgument(f"bad value for {key}: {value!r}")
        opts[key] = converted
    return path, opts


def open_store(url: str, **opts: Any) -> SQLiteStore:
    """The ``alkstore.engines`` entry point for ``sqlite://`` URLs."""
    path, url_opts = parse_url(url)
    unknown = set(opts) - set(_OPTION_TYPES)
    if unknown:
        raise InvalidArgument(f"unknown SQLite engine options: {', '.join(sorted(unknown))}")
    return SQLiteStore(path, url=url, **{**url_opts, **opts})
