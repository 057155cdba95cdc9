"""The application under test: an order confirmation sent by a job.

A small shop puts a job on the "confirmations" queue for each order; the
handler sends the mail through ``MAILER``. A full mailbox is a reason to try
again later (``Retry``), an order without an address can never succeed
(``Fail``), and anything else that goes wrong is retried by the queue's
backoff curve, as the alkstore worker does with every handler.
"""

from __future__ import annotations

from typing import Any

from alkstore import Fail, QueueOpts, Retry

QUEUE = "confirmations"
OPTS = QueueOpts(max_attempts=4, backoff_base_s=30)


class Mailer:
    """Stands in for a mail server: records what was sent, and can be told
    to be busy for the next few sends."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.busy_for = 0

    def send(self, to: str, text: str) -> None:
        if self.busy_for > 0:
            self.busy_for -= 1
            raise ConnectionError("mailbox full")
        self.sent.append(f"{to}: {text}")


MAILER = Mailer()


def place_order(store: Any, order_id: int, email: str | None) -> int:
    """Queue the confirmation of an order; returns the job's id."""
    return store.queue(QUEUE, OPTS).enqueue({"order": order_id, "to": email})


def send_confirmation(job: Any) -> None:
    """The handler a ``Worker(store, QUEUE, send_confirmation)`` runs."""
    to = job.payload["to"]
    if not to:
        raise Fail("order has no e-mail address")
    if job.payload["order"] < 0:
        raise Retry(delay_s=3600, reason="order not paid yet")
    MAILER.send(to, f"order {job.payload['order']} confirmed")


async def place_order_async(store: Any, order_id: int, email: str | None) -> int:
    """``place_order`` for an asyncio application."""
    return await store.queue(QUEUE, OPTS).enqueue({"order": order_id, "to": email})


async def send_confirmation_async(job: Any) -> None:
    """The handler an ``AsyncWorker`` runs: the same rules, awaited."""
    send_confirmation(job)
