# Async source of _drive.py (scripts/async_to_sync.py makes it: edit this file).
"""The driver of plans (docs/adr/0008): the one piece of the engine that is
written for a face, here the async one; :mod:`._drive` is made from it."""

from __future__ import annotations

from typing import Any, TypeVar

import psycopg
from psycopg.pq import TransactionStatus
from psycopg.rows import tuple_row

from ._plan import ALL, ONE, ROWCOUNT, Plan, Progress, Q

__all__ = ["drive_async"]

T = TypeVar("T")


def _mark(progress: Progress | None, conn: psycopg.AsyncConnection[Any], step: Q) -> None:
    """Before *step* is sent: it may change the database if it commits, or
    if it is a statement sent on an autocommit connection outside a
    transaction block (it commits on its own)."""
    if progress is None or progress.unsafe or step.kind == "control":
        return
    if step.kind == "commit" or (
        conn.autocommit and conn.info.transaction_status == TransactionStatus.IDLE
    ):
        progress.unsafe = True


async def drive_async(
    conn: psycopg.AsyncConnection[Any],
    plan: Plan[T],
    *,
    prepare: bool | None,
    progress: Progress | None = None,
) -> T:
    """Run *plan* on *conn*, step by step; driver errors go back into it.
    *progress* (for writes) records whether a change may have been sent."""
    cur = conn.cursor(row_factory=tuple_row)
    value: Any = None
    error: psycopg.Error | None = None
    try:
        while True:
            try:
                step = plan.throw(error) if error is not None else plan.send(value)
            except StopIteration as done:
                result: T = done.value
                return result
            value, error = None, None
            _mark(progress, conn, step)
            try:
                await cur.execute(step.text, step.params, prepare=prepare)
                if step.fetch == ONE:
                    value = await cur.fetchone()
                elif step.fetch == ALL:
                    value = await cur.fetchall()
                elif step.fetch == ROWCOUNT:
                    value = cur.rowcount
            except psycopg.Error as exc:
                error = exc
    finally:
        plan.close()
        await cur.close()
