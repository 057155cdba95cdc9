"""``SQLiteStore``: the SQLite engine's store (SPEC §3, §11), and its async face."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

from alkstore.engine import (
    AsyncKitStore,
    KitStore,
    ThreadedAsyncExecutor,
    check_bool_option,
    unwrap,
)
from alkstore.engine.threaded import Runner
from alkstore.errors import AlkstoreError, InvalidArgument
from alkstore.types import check_duration, check_int

from ._core import Core
from ._executor import SQLiteExecutor
from ._url import OPTION_TYPES, parse_url

__all__ = ["AsyncSQLiteStore", "SQLiteStore", "open_async_store", "open_store", "parse_url"]


def _executor(
    path: str,
    *,
    busy_timeout_s: float = 5.0,
    synchronous: str = "full",
    poll_interval_s: float = 0.002,
    notifications_cap: int = 10_000,
    migrate: bool = True,
    url: str | None = None,
) -> SQLiteExecutor:
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
    return SQLiteExecutor(
        Core(
            path,
            url=url or f"sqlite:///{path}",
            busy_timeout_s=busy,
            synchronous=synchronous,
            poll_interval_s=min(poll, 1.0),
            notifications_cap=cap,
            migrate=check_bool_option("migrate", migrate),
        )
    )


class SQLiteStore(KitStore):
    """An alkstore store in a SQLite file (tables ``__alkstore_*``).

    Engine options:

    - ``busy_timeout_s`` (5.0): how long a write waits for the write lock —
      first in this process's write queue (W-7), then in SQLite's busy
      handler for other processes — before it fails with ``TransientError``.
    - ``synchronous`` (``"full"``): ``"full"`` makes every commit durable
      across power loss; ``"normal"`` (WAL) is about 3x faster per commit and
      can lose the last commits, never corrupt the file, on power loss.
    - ``poll_interval_s`` (0.002): how often the wake watcher reads
      ``PRAGMA data_version``; the bound on wake latency.
    - ``notifications_cap`` (10,000): notification rows kept: the table is
      pruned to it at open (N-3) and kept within a tenth above it by the
      notifying writes (EN-1).
    - ``migrate`` (``True``): create or upgrade the schema at open (ST-1).
      ``False`` opens only an existing, up-to-date file and writes nothing at
      open: a missing file or schema is a :class:`SchemaVersionError`. The
      read-only CLI commands open stores this way.
    """

    def __init__(self, path: str, **options: Any) -> None:
        super().__init__(_executor(path, **options))

    @property
    def path(self) -> str:
        """The database file."""
        return self._sqlite.path

    @property
    def _sqlite(self) -> SQLiteExecutor:
        ex = self.executor
        assert isinstance(ex, SQLiteExecutor)
        return ex

    def __repr__(self) -> str:
        return f"SQLiteStore({self.path!r})"


def _options(url: str, opts: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    path, url_opts = parse_url(url)
    unknown = set(opts) - set(OPTION_TYPES)
    if unknown:
        raise InvalidArgument(f"unknown SQLite engine options: {', '.join(sorted(unknown))}")
    return path, {**url_opts, **opts}


def open_store(url: str, **opts: Any) -> SQLiteStore:
    """The ``alkstore.engines`` entry point for ``sqlite://`` URLs."""
    path, options = _options(url, opts)
    return SQLiteStore(path, url=url, **options)


def _aiosqlite_runner(conn: Any) -> Runner:
    """Runs a call on the aiosqlite connection's own thread: ``sqlite3``
    refuses a connection's use from any thread but the one that opened it
    (unless opened with ``check_same_thread=False``), and aiosqlite's queue
    keeps our statements in order with the caller's."""
    execute = getattr(conn, "_execute", None)
    if not callable(execute):
        raise InvalidArgument(
            "this aiosqlite version gives no way to run a call on its connection's thread; "
            "pass a store.transaction() instead"
        )

    async def run(fn: Callable[[], Any]) -> Any:
        try:
            return await execute(fn)
        except AlkstoreError:
            raise
        except ValueError as exc:  # aiosqlite: "Connection closed", before fn ran
            raise InvalidArgument("tx is an aiosqlite connection that is not open") from exc

    return run


def _async_tx(tx: object) -> tuple[object, Runner | None]:
    """``tx=`` of the async face (A-3): an ``aiosqlite.Connection`` (also
    inside a SQLAlchemy ``sqlite+aiosqlite`` pool proxy) stands for the
    ``sqlite3`` connection it runs, and the write runs on its thread."""
    native = unwrap(tx)  # SQLAlchemy's and Django's objects, refusals
    if type(native).__module__.startswith("aiosqlite"):
        inner = getattr(native, "_connection", None)  # None once closed
        if not isinstance(inner, sqlite3.Connection):
            raise InvalidArgument("tx is an aiosqlite connection that is not open")
        return inner, _aiosqlite_runner(native)
    return native, None


class AsyncSQLiteStore(AsyncKitStore):
    """The async face of a SQLite store (SPEC §14): the sync engine behind a
    pool of I/O threads, so the event loop never waits on SQLite."""

    def __init__(self, executor: ThreadedAsyncExecutor, path: str) -> None:
        super().__init__(executor)
        self._path = path

    @property
    def path(self) -> str:
        """The database file (for the application's own connections, e.g.
        ``aiosqlite.connect(store.path)``)."""
        return self._path

    def __repr__(self) -> str:
        return f"AsyncSQLiteStore({self.path!r})"


async def open_async_store(url: str, **opts: Any) -> AsyncSQLiteStore:
    """The ``alkstore.async_engines`` entry point for ``sqlite://`` URLs: the
    sync engine behind a thread pool, so the loop never waits on SQLite
    (A-2, docs/adr/0010)."""
    import asyncio

    path, options = _options(url, opts)
    sync = await asyncio.to_thread(_executor, path, url=url, **options)
    return AsyncSQLiteStore(ThreadedAsyncExecutor(sync, resolve_tx=_async_tx), sync.path)
