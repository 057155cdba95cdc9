"""Creating and upgrading the engine's schema (ST-1, ST-2, EN-2), as one plan
for both faces.

Everything lives in one engine-owned PostgreSQL schema (default
``alkstore``). ``meta`` records the schema version and the store's identity;
migration *n* brings it from *n - 1* to *n* (:data:`._sql.MIGRATIONS`).
"""

from __future__ import annotations

import contextlib
import uuid

import psycopg

from alkstore.errors import InvalidArgument, SchemaVersionError

from . import _sql
from ._ops import advisory_key
from ._plan import ONE, Plan, Q

__all__ = ["SCHEMA_VERSION", "open_plan"]

SCHEMA_VERSION = _sql.SCHEMA_VERSION
#: The partition width of a schema created or upgraded without the option.
DEFAULT_PARTITION_WIDTH_S = 3600

# Privilege errors of a role that may use the schema but not change it.
_NOT_ALLOWED = (psycopg.errors.InsufficientPrivilege,)


def _stored_version(st: _sql.Statements, schema: str) -> Plan[int]:
    """The schema version recorded in *schema*, 0 when there is none."""
    if (yield Q(_sql.META_EXISTS, {"schema": schema}, ONE)) is None:
        return 0
    row = yield Q(st.get_version, {}, ONE)
    return int(row[0]) if row is not None else 0


def _store_id(st: _sql.Statements) -> Plan[str]:
    row = yield Q(st.get_store_id, {}, ONE)
    if row is None:  # pragma: no cover - written by migration 2
        raise SchemaVersionError(SCHEMA_VERSION, SCHEMA_VERSION, "the schema has no store_id")
    return str(row[0])


def _older(schema: str, found: int, why: str) -> SchemaVersionError:
    """The error for a schema older than this engine that we may not upgrade,
    naming the migrations it needs."""
    needed = ", ".join(
        f"{v} ({_sql.MIGRATION_TITLES[v]})" for v in range(found + 1, SCHEMA_VERSION + 1)
    )
    what = "no alkstore schema" if found == 0 else f"alkstore schema version {found}"
    return SchemaVersionError(
        found,
        SCHEMA_VERSION,
        f"schema {schema!r} holds {what}; this engine needs version {SCHEMA_VERSION}: "
        f"migration {needed} must run first ({why}; run `alkstore migrate` as a role that "
        "owns the schema)",
    )


def _check_width(st: _sql.Statements, width: int | None) -> Plan[None]:
    """A partition width given to a schema that holds another one is refused:
    the width is the schema's, set when it is created or upgraded to
    version 7 (docs/adr/0026)."""
    if width is None:
        return
    row = yield Q(st.get_width, {}, ONE)
    held = int(row[0]) if row is not None else None
    if held != width:
        raise InvalidArgument(
            f"partition_width_s={width}, but the schema's partitions are {held} s wide; "
            "the width is set when the schema is created or upgraded to version 7"
        )


def open_plan(
    st: _sql.Statements, schema: str, migrate: bool, width: int | None = None
) -> Plan[tuple[str, int]]:
    """Check (and with *migrate*, create or upgrade) the schema; return the
    store id and the version the schema held before (0: none, re-read under
    the lock). Runs on a connection of its own, in autocommit.

    A current schema costs three reads and takes no lock, so the application
    role needs no DDL rights once the schema exists (EN-2). Otherwise one
    transaction takes an advisory lock keyed on the schema name, re-reads
    the version and runs the missing steps, so concurrent openers (threads,
    processes, hosts) each see either no schema or the finished one (ST-1).
    ``CREATE SCHEMA`` runs only when the schema is missing: a role that owns
    the schema but may not create schemas in the database still migrates.
    A newer version is refused before anything is written (ST-2).
    """
    found = yield from _stored_version(st, schema)
    if found == SCHEMA_VERSION:
        yield from _check_width(st, width)
        return (yield from _store_id(st)), found
    if found > SCHEMA_VERSION:
        raise SchemaVersionError(found, SCHEMA_VERSION)
    if not migrate:
        raise _older(schema, found, "opened with migrate=False")
    yield Q("BEGIN", None, kind="control")
    try:
        yield Q(_sql.MIGRATION_LOCK, {"key": advisory_key("migrate", schema)})
        found = yield from _stored_version(st, schema)
        if found > SCHEMA_VERSION:
            raise SchemaVersionError(found, SCHEMA_VERSION)
        if found < SCHEMA_VERSION:
            if (yield Q(_sql.SCHEMA_EXISTS, {"schema": schema}, ONE)) is None:
                yield Q(st.create_schema, {})
            params = {
                "store_id": str(uuid.uuid4()),
                "schema": schema,
                "width": str(width if width is not None else DEFAULT_PARTITION_WIDTH_S),
            }
            for version in range(found + 1, SCHEMA_VERSION + 1):
                for statement in st.migrations[version]:
                    yield Q(statement, params)
            yield Q(st.set_version, {"version": str(SCHEMA_VERSION)})
        else:
            yield from _check_width(st, width)
        store_id = yield from _store_id(st)
    except _NOT_ALLOWED as exc:
        yield Q("ROLLBACK", None, kind="control")
        raise _older(schema, found, f"this role may not: {exc.diag.message_primary}") from exc
    except Exception:
        with contextlib.suppress(Exception):
            yield Q("ROLLBACK", None, kind="control")
        raise
    yield Q("COMMIT", None, kind="commit")
    return store_id, found
