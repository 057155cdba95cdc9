"""The project's tasks."""

from __future__ import annotations

import asyncio
from typing import Any

from django.db import connection

try:
    from django.tasks import task  # Django 6 and later
except ImportError:
    from django_tasks import task


@task(queue_name="emails")  # type: ignore[untyped-decorator]
def send_receipt(order_id: int) -> dict[str, Any]:
    """Record a receipt for the order; the return value is the task's result."""
    with connection.cursor() as cur:
        cur.execute("SELECT item FROM shop_order WHERE id = %s", [order_id])
        (item,) = cur.fetchone()
        cur.execute("INSERT INTO shop_log (entry) VALUES (%s)", [f"receipt {item}"])
    return {"order": order_id, "item": item}


@task(takes_context=True)  # type: ignore[untyped-decorator]
def log(context: Any, entry: str) -> int:
    """Append *entry* to the log; returns the attempt the framework reports."""
    with connection.cursor() as cur:
        cur.execute("INSERT INTO shop_log (entry) VALUES (%s)", [entry])
    return int(context.attempt)


@task()  # type: ignore[untyped-decorator]
def explode(message: str) -> None:
    raise ValueError(message)


@task()  # type: ignore[untyped-decorator]
async def double(n: int) -> int:
    """A coroutine task: the worker runs it to its end."""
    await asyncio.sleep(0)
    return n * 2
