"""Conformance hooks of the SQLite engine (entry point ``alkstore_conformance.hooks``).

The suite uses them to give each test a fresh file and to provoke the
conditions it cannot reach through the contract alone. See
``alkstore_conformance.EngineHooks``.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from . import _sql
from ._store import SQLiteStore
from ._url import parse_url

__all__ = ["HOOKS", "SQLiteHooks"]


class SQLiteHooks:
    """The SQLite engine's :class:`alkstore_conformance.EngineHooks`."""

    @contextmanager
    def isolated(
        self, url: str, opts: Mapping[str, Any], key: str
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """A new file in a temporary directory beside the one *url* names."""
        path, url_opts = parse_url(url)
        parent = Path(path).resolve().parent
        parent.mkdir(parents=True, exist_ok=True)
        workdir = tempfile.mkdtemp(prefix=f"alkstore-{key}-", dir=parent)
        try:
            yield f"sqlite:///{Path(workdir) / Path(path).name}", {**url_opts, **opts}
        finally:
            shutil.rmtree(workdir, ignore_errors=True)

    @contextmanager
    def transient_failure(
        self, url: str, opts: Mapping[str, Any]
    ) -> Iterator[Callable[[], object]]:
        """Another connection holds the write lock; a store with a short busy
        timeout then tries to enqueue (E-2)."""
        path, url_opts = parse_url(url)
        settings = {**url_opts, **opts, "busy_timeout_s": 0.05}
        SQLiteStore(path, **settings).close()  # make sure the schema exists
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        store = SQLiteStore(path, **settings)
        try:
            yield lambda: store.queue("transient-probe").enqueue({"probe": True})
        finally:
            store.close()
            holder.execute("ROLLBACK")
            holder.close()

    @contextmanager
    def future_schema(self, url: str, opts: Mapping[str, Any]) -> Iterator[Callable[[], object]]:
        """A file whose recorded schema version is one past this engine's."""
        path, _ = parse_url(url)
        conn = sqlite3.connect(path, isolation_level=None)
        try:
            conn.execute(_sql.MIGRATIONS[1][0])  # the meta table
            conn.execute(_sql.SET_VERSION, {"version": str(_sql.SCHEMA_VERSION + 1)})

            def snapshot() -> object:
                tables = conn.execute(
                    "SELECT type, name, sql FROM sqlite_master ORDER BY name"
                ).fetchall()
                meta = conn.execute("SELECT key, value FROM __alkstore_meta").fetchall()
                mode = conn.execute("PRAGMA journal_mode").fetchone()
                return tables, meta, mode

            yield snapshot
        finally:
            conn.close()


HOOKS = SQLiteHooks()
