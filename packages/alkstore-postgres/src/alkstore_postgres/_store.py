"""``PostgresStore``: the PostgreSQL engine's ``Store`` (SPEC §3, §11)."""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from types import TracebackType
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

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

from ._core import fetch_all
from ._lock import LockMixin
from ._notify import NotifyMixin
from ._queue import PostgresQueue
from ._scheduler import ScheduleMixin
from ._stream import PostgresStream

__all__ = ["ENGINE_OPTIONS", "PostgresStore", "open_store", "parse_url"]

#: Engine options, accepted as keywords or as URL query parameters.
ENGINE_OPTIONS: dict[str, type] = {
    "schema": str,
    "min_size": int,
    "max_size": int,
    "connect_timeout_s": float,
    "pool_timeout_s": float,
    "application_name": str,
}
_SCHEMES = ("postgresql", "postgres")
# PostgreSQL truncates longer identifiers, which could merge two schemas.
_MAX_IDENTIFIER_BYTES = 63


@dataclass(frozen=True)
class ParsedURL:
    """A store URL split into what libpq gets, what is shown, and the
    engine options found in its query string."""

    conninfo: str
    display: str
    options: dict[str, Any]


def parse_url(url: str) -> ParsedURL:
    """Split ``postgresql://user:pw@host/db?sslmode=require&schema=jobs``.

    Engine options (:data:`ENGINE_OPTIONS`) may appear in the query string
    and are removed before libpq sees it; other parameters go to libpq as
    they are. A libpq ``key=value`` string is accepted too. The display form
    drops the password.
    """
    if not isinstance(url, str) or not url.strip():
        raise InvalidArgument(f"a PostgreSQL URL is a non-empty str, got {url!r}")
    if "://" not in url:
        params = _conninfo_dict(url)
        params.pop("password", None)
        return ParsedURL(url, make_conninfo(**params), {})
    parts = urlsplit(url)
    if parts.scheme.lower() not in _SCHEMES:
        raise InvalidArgument(f"not a postgresql:// URL: {parts.scheme}://...")
    kept: list[str] = []
    shown: list[str] = []
    options: dict[str, Any] = {}
    for item in parts.query.split("&") if parts.query else []:
        key = unquote(item.partition("=")[0])
        if key in ENGINE_OPTIONS:
            options[key] = _convert(key, unquote(item.partition("=")[2]))
            shown.append(item)
        else:
            kept.append(item)
            if key != "password":
                shown.append(item)
    conninfo = urlunsplit(parts._replace(query="&".join(kept)))
    _conninfo_dict(conninfo)  # refuse a malformed URL here, with a clear error
    userinfo, at, hosts = parts.netloc.rpartition("@")
    netloc = f"{userinfo.partition(':')[0]}@{hosts}" if at else hosts
    display = urlunsplit(parts._replace(netloc=netloc, query="&".join(shown)))
    return ParsedURL(conninfo, display, options)


def _conninfo_dict(conninfo: str) -> dict[str, Any]:
    try:
        return conninfo_to_dict(conninfo)
    except psycopg.ProgrammingError as exc:
        raise InvalidArgument(f"not a valid PostgreSQL connection string: {exc}") from exc


def _convert(key: str, text: str) -> Any:
    kind = ENGINE_OPTIONS[key]
    try:
        value = kind(text)
    except ValueError as exc:
        raise InvalidArgument(f"bad value for engine option {key}: {text!r}") from exc
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidArgument(f"bad value for engine option {key}: {text!r}")
    return value


def check_schema(schema: object) -> str:
    """A schema name: 1..63 bytes, printable, not in PostgreSQL's ``pg_``
    namespace. Quoting is handled, so any other name works."""
    name = validate_name(schema, "schema", allow_reserved=True)
    if len(name.encode("utf-8")) > _MAX_IDENTIFIER_BYTES:
        raise InvalidArgument(f"schema name is longer than {_MAX_IDENTIFIER_BYTES} bytes")
    if name.lower().startswith("pg_"):
        raise InvalidArgument(f"schema names starting with 'pg_' belong to PostgreSQL: {name!r}")
    return name


class PostgresStore(LockMixin, NotifyMixin, ScheduleMixin):
    """An alkstore store in one schema of a PostgreSQL database.

    *url* is a ``postgresql://`` (or ``postgres://``) URL or a libpq
    ``key=value`` string. Engine options, as keywords or URL query parameters
    (keywords win):

    - ``schema`` (``"alkstore"``): the schema that holds every engine table;
      created on first open. Stores on different schemas of one database
      never see each other (C-7).
    - ``min_size`` (1), ``max_size`` (10): bounds of the connection pool
      (``psycopg_pool``). The listener connection, opened on the first
      blocking call or ``listen()``, comes on top.
    - ``connect_timeout_s`` (10, or the URL's ``connect_timeout``): how long
      opening a connection may take.
    - ``pool_timeout_s`` (10): how long a call waits for a pooled connection
      before it fails with ``TransientError``.
    - ``application_name`` (``"alkstore"``, or the URL's): shown in
      ``pg_stat_activity``.

    Every call is thread-safe (ST-4) and wraps driver errors (E-1).
    """

    def __init__(
        self,
        url: str,
        *,
        schema: str | None = None,
        min_size: int | None = None,
        max_size: int | None = None,
        connect_timeout_s: float | None = None,
        pool_timeout_s: float | None = None,
        application_name: str | None = None,
    ) -> None:
        parsed = parse_url(url)
        given = {
            "schema": schema,
            "min_size": min_size,
            "max_size": max_size,
            "connect_timeout_s": connect_timeout_s,
            "pool_timeout_s": pool_timeout_s,
            "application_name": application_name,
        }
        opts: dict[str, Any] = {
            **parsed.options,
            **{k: v for k, v in given.items() if v is not None},
        }
        schema_name = check_schema(opts.get("schema", "alkstore"))
        low = check_int("min_size", opts.get("min_size", 1), 0, 1000)
        high = check_int("max_size", opts.get("max_size", 10), max(low, 1), 1000)
        pool_timeout = check_duration(
            "pool_timeout_s", opts.get("pool_timeout_s", 10.0), allow_zero=False
        )
        assert pool_timeout is not None
        libpq = _conninfo_dict(parsed.conninfo)
        connect_kwargs: dict[str, Any] = {}
        connect_timeout = check_duration(
            "connect_timeout_s", opts.get("connect_timeout_s"), allow_zero=False, allow_none=True
        )
        if connect_timeout is None and "connect_timeout" not in libpq:
            connect_timeout = 10.0
        if connect_timeout is not None:
            # libpq counts whole seconds and treats less than 2 as 2.
            connect_kwargs["connect_timeout"] = max(2, math.ceil(connect_timeout))
        app = opts.get("application_name")
        if app is not None or "application_name" not in libpq:
            connect_kwargs["application_name"] = validate_name(
                app if app is not None else "alkstore", "application_name", allow_reserved=True
            )
        super().__init__(
            parsed.conninfo,
            url=parsed.display,
            schema=schema_name,
            min_size=low,
            max_size=high,
            connect_kwargs=connect_kwargs,
            pool_timeout_s=pool_timeout,
            listen_timeout_s=float(connect_kwargs.get("connect_timeout", 10)) + 5.0,
        )

    def __repr__(self) -> str:
        return f"PostgresStore({self._url!r}, schema={self._schema!r})"

    def __enter__(self) -> PostgresStore:
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
        return PostgresQueue(self, validate_name(name, "queue"), check_queue_opts(opts))

    def outbox(self, name: str) -> Outbox:
        """The outbox *name*, backed by a reserved queue with fixed opts (Q-20)."""
        self._check_open()
        return QueueOutbox(name, PostgresQueue(self, outbox_queue_name(name), OUTBOX_OPTS))

    def stream(self, name: str) -> Stream:
        """A handle on stream *name* (S-1..S-4)."""
        self._check_open()
        return PostgresStream(self, validate_name(name, "stream"))

    def queue_stats(self) -> list[QueueStats]:
        """Counts for every queue with live or dead rows, by name."""
        self._check_open()
        with self._conn() as conn:
            rows = fetch_all(conn, self._sql.queue_stats, {})
        return [QueueStats(q, int(p), int(s), int(r), int(d)) for q, p, s, r, d in rows]

    def run_schedules(
        self,
        stop: threading.Event | None = None,
        owner: str | None = None,
        lock_ttl_s: float = 30,
    ) -> None:
        """The leader-elected scheduler loop, until *stop* is set (SC-5)."""
        self._check_open()
        self._ensure_listener()  # schedule changes wake the leader early
        run_scheduler_loop(self, stop, owner, lock_ttl_s)


def open_store(url: str, **opts: Any) -> PostgresStore:
    """The ``alkstore.engines`` entry point for ``postgresql://`` and
    ``postgres://`` URLs; *opts* are the engine options of
    :class:`PostgresStore`."""
    unknown = set(opts) - set(ENGINE_OPTIONS)
    if unknown:
        raise InvalidArgument(
            f"unknown PostgreSQL engine options: {', '.join(sorted(unknown))} "
            f"(known: {', '.join(ENGINE_OPTIONS)})"
        )
    return PostgresStore(url, **opts)
