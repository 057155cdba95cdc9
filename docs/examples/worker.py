"""The Worker beyond the basics: several queues in strict order, a time budget
per handler, a handler that stops early when asked, a coroutine handler, and
a handler that writes its result row and acks in one transaction.

Run it from any directory: it opens the store at $ALKSTORE_URL, or the
embedded default (sqlite:///alkstore.db in the current directory).
"""

from __future__ import annotations

import asyncio
import time

import alkstore
from alkstore import Job, QueueOpts, Retry, Worker

store = alkstore.open()  # $ALKSTORE_URL, else sqlite:///alkstore.db
# The placeholder of the engine's driver, for the result row below.
P = "%s" if store.url.startswith("postgresql") else "?"
with store.transaction() as tx:
    tx.execute("CREATE TABLE IF NOT EXISTS totals (order_id INTEGER NOT NULL, total INTEGER)")
    tx.execute("DELETE FROM totals")  # the example runs again from scratch

urgent = store.queue("urgent")
bulk = store.queue("bulk", QueueOpts(max_attempts=1))  # a timeout is final here
urgent.enqueue({"kind": "total", "order": 1, "lines": [300, 450]})
bulk.enqueue({"kind": "report", "pages": 3})
bulk.enqueue({"kind": "long", "seconds": 5})
bulk.enqueue({"kind": "notify", "to": "ada"})

ran: list[str] = []


def total(job: Job) -> None:
    """Settle the job itself: the result row and the ack commit together, so
    the result exists exactly when the job is done. The worker does nothing
    more for a job its handler settled."""
    amount = sum(job.payload["lines"])
    with store.transaction() as tx:
        tx.execute(
            f"INSERT INTO totals (order_id, total) VALUES ({P}, {P})",
            (job.payload["order"], amount),
        )
        job.ack(tx=tx)
    ran.append("total")


def long_task(job: Job) -> None:
    """Check should_stop() between steps: it turns true when the worker
    stops, when the time budget (timeout_s) is spent, or when the claim was
    lost. Leave the job for later with Retry(delay_s=0)."""
    deadline = time.monotonic() + job.payload["seconds"]
    while time.monotonic() < deadline:
        if job.should_stop():
            ran.append("long stopped early")
            raise Retry(delay_s=0)
        time.sleep(0.02)
    ran.append("long finished")


async def notify(job: Job) -> None:
    """A coroutine handler: the worker runs it on its own event loop."""
    await asyncio.sleep(0.01)
    ran.append(f"notified {job.payload['to']}")


def handle(job: Job) -> object:
    kind = job.payload["kind"]
    if kind == "total":
        total(job)
    elif kind == "long":
        long_task(job)
    elif kind == "notify":
        return notify(job)  # an awaitable: the worker awaits it, then acks
    else:
        ran.append(f"report of {job.payload['pages']} pages")
    return None


# "urgent" first, "bulk" only while "urgent" has nothing claimable (with
# concurrency 1 the order of the runs shows it). Each handler gets at most
# 0.5 s; one that runs longer is retried by the curve with last_error
# "timeout after 0.5 s", or dead-lettered with it at its last attempt.
worker = Worker(store, ["urgent", "bulk"], handle, concurrency=1, timeout_s=0.5)
worker.run_until_empty()  # in production: worker.run() until SIGTERM

print("ran:", ran)
with store.transaction() as tx:
    print("totals:", tx.execute("SELECT order_id, total FROM totals").fetchall())
dead = bulk.list_jobs(alkstore.JobState.DEAD)
print("dead:", [(j.payload["kind"], j.last_error) for j in dead])

assert ran[0] == "total", "urgent is served first"
assert ran.count("long stopped early") == 1
assert "notified ada" in ran and "report of 3 pages" in ran
assert [j.last_error for j in dead] == ["timeout after 0.5 s"]
bulk.purge_dead()  # so that the example runs again from a clean queue
store.close()
