"""``PostgresStore`` and its async face (SPEC §3, §11, §14): the kit's
stores over this engine's executors."""

from __future__ import annotations

from typing import Any

from alkstore.engine import AsyncKitStore, KitStore

from ._executor import PgExecutor
from ._executor_async import AsyncPgExecutor
from ._executor_base import ExecutorBase
from ._options import parse_options
from ._url import ENGINE_OPTIONS, parse_url

__all__ = [
    "ENGINE_OPTIONS",
    "AsyncPostgresStore",
    "PostgresStore",
    "open_async_store",
    "open_store",
    "parse_url",
]


class _PgFacts:
    """What both faces of the store tell about their database."""

    _base: ExecutorBase

    @property
    def schema(self) -> str:
        """The PostgreSQL schema holding the engine's tables."""
        return self._base.schema

    @property
    def dsn(self) -> str:
        """The libpq connection string of this store, engine options removed
        and password kept, for the application's own connections (EN-3):
        ``psycopg.connect(store.dsn)``, or ``psycopg.AsyncConnection.connect``
        for the async store. Never log it."""
        return self._base.config.conninfo

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._base.url!r}, schema={self.schema!r})"


class PostgresStore(_PgFacts, KitStore):
    """An alkstore store in one schema of a PostgreSQL database.

    *url* is a ``postgresql://`` (or ``postgres://``) URL or a libpq
    ``key=value`` string. Engine options come as keywords or as URL query
    parameters (the same option both ways is refused); the package README
    lists them: ``schema``, ``min_size``, ``max_size``,
    ``connect_timeout_s``, ``pool_timeout_s``, ``lock_timeout_s``,
    ``application_name``, ``migrate``, ``pooler``, ``poll_s``,
    ``listen_url``, ``partition_width_s``.

    Every call is thread-safe (ST-4) and wraps driver errors (E-1).
    """

    def __init__(self, url: str, **options: Any) -> None:
        self._base = executor = PgExecutor(parse_options(url, options))
        super().__init__(executor)

    def __enter__(self) -> PostgresStore:
        return self


class AsyncPostgresStore(_PgFacts, AsyncKitStore):
    """The async face of :class:`PostgresStore` (SPEC §14): psycopg's async
    connections, pool and LISTEN, on the caller's event loop."""

    def __init__(self, executor: AsyncPgExecutor) -> None:
        self._base = executor
        super().__init__(executor)

    async def __aenter__(self) -> AsyncPostgresStore:
        return self


def open_store(url: str, **opts: Any) -> PostgresStore:
    """The ``alkstore.engines`` entry point for ``postgresql://`` and
    ``postgres://`` URLs; *opts* are the engine options."""
    return PostgresStore(url, **opts)


async def open_async_store(url: str, **opts: Any) -> AsyncPostgresStore:
    """The ``alkstore.async_engines`` entry point: the native async store."""
    executor = AsyncPgExecutor(parse_options(url, opts))
    try:
        await executor.open()
    except BaseException:
        await executor.close()
        raise
    return AsyncPostgresStore(executor)
