"""Creating and upgrading the engine's tables (ST-1, ST-2)."""

from __future__ import annotations

import sqlite3

from alkstore.errors import SchemaVersionError

from . import _sql

__all__ = ["migrate", "stored_version"]


def stored_version(conn: sqlite3.Connection) -> int:
    """The schema version recorded in the file, 0 for a file without one."""
    if conn.execute(_sql.META_TABLE_EXISTS).fetchone() is None:
        return 0
    row = conn.execute(_sql.GET_VERSION).fetchone()
    return int(row[0]) if row is not None else 0


def migrate(conn: sqlite3.Connection) -> tuple[int, int]:
    """Bring the file to :data:`_sql.SCHEMA_VERSION`; return the version it
    held (0: none, re-read under the lock) and the one it holds now.

    Runs under ``BEGIN IMMEDIATE``: concurrent openers (threads or processes)
    serialize on SQLite's write lock, and each re-reads the version inside the
    transaction, so every step runs once (ST-1). A newer version is refused
    before anything is written (ST-2).
    """
    # Cheap path, no write lock: already current.
    found = stored_version(conn)
    if found == _sql.SCHEMA_VERSION:
        return found, found
    if found > _sql.SCHEMA_VERSION:
        raise SchemaVersionError(found, _sql.SCHEMA_VERSION)
    conn.execute("BEGIN IMMEDIATE")
    try:
        found = stored_version(conn)
        if found > _sql.SCHEMA_VERSION:
            raise SchemaVersionError(found, _sql.SCHEMA_VERSION)
        for version in range(found + 1, _sql.SCHEMA_VERSION + 1):
            for statement in _sql.MIGRATIONS[version]:
                conn.execute(statement)
        conn.execute(_sql.SET_VERSION, {"version": str(_sql.SCHEMA_VERSION)})
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return found, _sql.SCHEMA_VERSION
