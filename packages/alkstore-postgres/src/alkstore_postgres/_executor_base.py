"""What the PostgreSQL executors of both faces share (docs/adr/0008): their
state, the rules of connections and retries (E-2), and the non-I/O members
of the seam; :mod:`._executor_async` is the I/O.
"""

from __future__ import annotations

import logging
import select
import weakref
from typing import Any, TypeVar

import psycopg

from alkstore.engine import ALL_CAPABILITIES, FALLBACK_POLL_S, WakeBoard
from alkstore.errors import StoreClosed, TransientError, UnsupportedOperation
from alkstore.protocols import Capability

from ._listen_base import KEEPALIVES, WatchedWakeBoard
from ._ops import OpBook
from ._options import Config
from ._plan import Op, Plan, Progress, begin_with_lock_timeout, caller_scope, pooled_scope

__all__ = [
    "DEGRADED_POLL_S",
    "OUTAGE_POOL_WAIT_S",
    "POKE_WAIT_S",
    "SOFT_POOL_WAIT_S",
    "ExecutorBase",
    "notifications_refused",
    "readable",
]

log = logging.getLogger("alkstore.postgres")

T = TypeVar("T")

#: Longest wait for a pooled connection while the database is known to be
#: out of reach.
OUTAGE_POOL_WAIT_S = 0.5
#: Longest wait for a pooled connection of a blocked call's re-attempt.
SOFT_POOL_WAIT_S = 0.5
#: Poll interval of blocked calls while the wake source is down.
DEGRADED_POLL_S = 1.0
#: A poke only saves the listener its idle wait: never wait long for it.
POKE_WAIT_S = 1.0


def notifications_refused() -> UnsupportedOperation:
    return UnsupportedOperation(
        "notifications need a LISTEN connection: behind a transaction pooler, give "
        "listen_url= (a direct or session-mode DSN)"
    )


def readable(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> bool | None:
    """Whether an idle connection has something to read (``None``: it is
    closed). An idle connection of ours should have nothing: what arrives
    is most often the server saying goodbye."""
    if conn.closed or conn.broken:
        return None
    try:
        ready, _, _ = select.select([conn.fileno()], [], [], 0)
    except (OSError, ValueError):
        return None
    return bool(ready)


class ExecutorBase:
    """The state and the rules of both faces' executors, and the non-I/O
    members of the seam."""

    def __init__(self, cfg: Config) -> None:
        self._cfg = cfg
        self._ops = OpBook(cfg.schema)
        self._closed = False
        self._store_id = ""
        #: The schema version the open found (0: none) and the one it holds
        #: now: what ``alkstore migrate`` reports. Set by ``open``.
        self.schema_migration = (0, 0)
        self._outage = False
        self._errors_seen = 0
        # Connections our pool configured (their lock timeout is set).
        self._ours: weakref.WeakSet[Any] = weakref.WeakSet()
        self._polling = not cfg.can_listen
        self._wakeboard: WakeBoard = WatchedWakeBoard() if self._polling else WakeBoard()
        self._caps = (
            ALL_CAPABILITIES if cfg.can_listen else ALL_CAPABILITIES - {Capability.NOTIFICATIONS}
        )

    # ------------------------------------------------------------ the store

    @property
    def url(self) -> str:
        return self._cfg.display

    @property
    def config(self) -> Config:
        return self._cfg

    @property
    def schema(self) -> str:
        return self._cfg.schema

    @property
    def capabilities(self) -> frozenset[Capability]:
        return self._caps

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def store_id(self) -> str:
        """The random id migration 2 wrote into the schema's ``meta``: equal
        for every store on this schema, different for any other (C-7)."""
        return self._store_id

    @property
    def wakes(self) -> WakeBoard:
        return self._wakeboard

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosed("the store was closed")

    def _pool_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"autocommit": True, **self._cfg.connect_kwargs}
        if self._cfg.pooler:
            kwargs["prepare_threshold"] = None  # EN-4: nothing prepared
        return kwargs

    def _pool_options(self, name: str) -> dict[str, Any]:
        """What the sync and the async pool are both made with (each adds
        its own ``configure``)."""
        cfg = self._cfg
        return {
            "min_size": cfg.min_size,
            "max_size": cfg.max_size,
            "kwargs": self._pool_kwargs(),
            "timeout": cfg.pool_timeout_s,
            "reconnect_timeout": max(5.0, cfg.connect_timeout_s),
            "name": f"{name}:{cfg.schema}",
        }

    def _listen_kwargs(self) -> dict[str, Any]:
        return {**KEEPALIVES, **self._cfg.connect_kwargs, "autocommit": True}

    def _set_lock_timeout(self) -> str | None:
        """The session ``SET`` of our pooled connections; none behind a
        pooler, where every write sets it for its own transaction."""
        if self._cfg.pooler:
            return None
        return f"SET lock_timeout = '{self._cfg.lock_timeout_ms}ms'"

    def _begin(self) -> str:
        if self._cfg.pooler:
            return begin_with_lock_timeout(self._cfg.lock_timeout_ms)
        return "BEGIN"

    def _pool_wait(self, soft: bool = False) -> float:
        wait = self._cfg.pool_timeout_s
        if soft:
            wait = min(wait, SOFT_POOL_WAIT_S)
        if self._outage:
            wait = min(wait, OUTAGE_POOL_WAIT_S)
        return wait

    def _scope(self, op: Op[T]) -> Plan[T]:
        return pooled_scope(op, pooler=self._cfg.pooler, lock_timeout_ms=self._cfg.lock_timeout_ms)

    def _on_caller(self, op: Op[T], conn: Any, ours: bool) -> Plan[T]:
        ours = ours or (not self._cfg.pooler and conn in self._ours)
        return caller_scope(op, conn, ours=ours, lock_timeout_ms=self._cfg.lock_timeout_ms)

    def _note_connection_errors(self, errors: int) -> None:
        """After a pool timeout: an outage if connection attempts failed."""
        if errors > self._errors_seen:
            self._outage = True
        self._errors_seen = errors

    def _after_failure(
        self, exc: TransientError, conn: Any, progress: Progress | None, retried: bool
    ) -> bool:
        """Whether to retry once on a fresh connection (E-2)."""
        lost = conn is not None and (conn.closed or conn.broken)
        if lost:
            self._outage = True
        return (
            lost
            and not retried
            and not self._closed
            and not (progress is not None and progress.unsafe)
        )

    def _listener_state(self, up: bool) -> None:
        if not up:
            self._outage = True

    def _degraded(self, started: bool, healthy: bool) -> float:
        return DEGRADED_POLL_S if (started and not healthy) or self._outage else FALLBACK_POLL_S
