"""Creating and upgrading the engine's schema (ST-1, ST-2).

Everything lives in one engine-owned PostgreSQL schema (default
``alkstore``). ``meta`` records the schema version; migration *n* brings it
from *n - 1* to *n*.
"""

from __future__ import annotations

import hashlib
from typing import Any

import psycopg
from psycopg.rows import tuple_row

from alkstore.errors import SchemaVersionError

from . import _sql

__all__ = ["SCHEMA_VERSION", "migrate", "migration_lock_key", "stored_version"]

SCHEMA_VERSION = _sql.SCHEMA_VERSION


def migration_lock_key(schema: str) -> int:
    """The advisory-lock key that serializes migrations of *schema*: a signed
    64-bit number derived from its name, so that stores on other schemas of
    the same database do not wait for each other."""
    digest = hashlib.sha256(f"alkstore.migrate:{schema}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def stored_version(conn: psycopg.Connection[Any], stmts: _sql.Statements, schema: str) -> int:
    """The schema version recorded in *schema*, 0 when there is none."""
    cur = conn.cursor(row_factory=tuple_row)
    if cur.execute(_sql.META_EXISTS, {"schema": schema}).fetchone() is None:
        return 0
    row = cur.execute(stmts.get_version).fetchone()
    return int(row[0]) if row is not None else 0


def migrate(conn: psycopg.Connection[Any], stmts: _sql.Statements, schema: str) -> int:
    """Bring *schema* to :data:`SCHEMA_VERSION` and return it.

    A current schema costs two reads and takes no lock, so the application
    role needs no DDL rights once the schema exists. Otherwise one
    transaction takes an advisory lock keyed on the schema name, re-reads the
    version and runs the missing steps, so concurrent openers (threads,
    processes, hosts) each see either no schema or the finished one (ST-1).
    A newer version is refused before anything is written (ST-2).
    """
    found = stored_version(conn, stmts, schema)
    if found == SCHEMA_VERSION:
        return found
    if found > SCHEMA_VERSION:
        raise SchemaVersionError(found, SCHEMA_VERSION)
    with conn.transaction():
        cur = conn.cursor(row_factory=tuple_row)
        cur.execute(_sql.MIGRATION_LOCK, {"key": migration_lock_key(schema)})
        found = stored_version(conn, stmts, schema)
        if found > SCHEMA_VERSION:
            raise SchemaVersionError(found, SCHEMA_VERSION)
        if found == SCHEMA_VERSION:
            return found
        cur.execute(stmts.create_schema)
        for version in range(found + 1, SCHEMA_VERSION + 1):
            for statement in stmts.migrations[version]:
                cur.execute(statement)
        cur.execute(stmts.set_version, {"version": str(SCHEMA_VERSION)})
    return SCHEMA_VERSION
