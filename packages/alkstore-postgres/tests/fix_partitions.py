"""The partitions of a store's ``dead`` or ``results`` table, listed and
made by hand (the upgrade and edge tests of docs/adr/0026 and 0018)."""

from __future__ import annotations

from typing import Any

from psycopg import sql


def partitions(admin: Any, schema: str, table: str) -> set[str]:
    """The names of *table*'s partitions in *schema*."""
    rows = admin.execute(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
        "JOIN pg_class p ON p.oid = i.inhparent JOIN pg_namespace n ON n.oid = p.relnamespace "
        "WHERE n.nspname = %s AND p.relname = %s",
        (schema, table),
    ).fetchall()
    return {str(r[0]) for r in rows}


def past_partition(admin: Any, schema: str, lo: int, hi: int, table: str) -> str:
    """A partition of *table* for [lo, hi) (epoch seconds), named as the
    engine names them; the sweep only ever makes later ones."""
    name = f"{table}_p{lo}_{hi}"
    admin.execute(
        sql.SQL(
            "CREATE TABLE {} PARTITION OF {} "
            "FOR VALUES FROM (to_timestamp({})) TO (to_timestamp({}))"
        ).format(
            sql.Identifier(schema, name),
            sql.Identifier(schema, table),
            sql.Literal(lo),
            sql.Literal(hi),
        )
    )
    return name
