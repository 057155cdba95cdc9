"""Quickstart: a business row and its job commit together; a worker runs it;
failures wait as dead letters to be redriven or purged.

Run it from any directory: it opens the store at $ALKSTORE_URL, or the
embedded default (sqlite:///alkstore.db in the current directory).
"""

from __future__ import annotations

import alkstore
from alkstore import EnqueueOpts, Fail, Job, JobState, QueueOpts, Retry, Worker

store = alkstore.open()
emails = store.queue("emails", QueueOpts(visibility_timeout_s=60, max_attempts=3))

# 1. The order and its confirmation email commit in ONE transaction: both or neither.
with store.transaction() as tx:
    tx.execute("CREATE TABLE IF NOT EXISTS orders (item TEXT NOT NULL)")
    tx.execute("INSERT INTO orders (item) VALUES ('a book')")
    emails.enqueue({"to": "ada@example.com", "template": "order-confirmed"}, tx=tx)

# Jobs can wait, carry a priority, or expire.
emails.enqueue({"to": "bob@example.com", "template": "newsletter"}, EnqueueOpts(priority=-1))
emails.enqueue({"to": "nobody@invalid", "template": "order-confirmed"})

# 2. A handler: return to ack, raise Retry to try again later, Fail to dead-letter.
sent: list[str] = []


def send_email(job: Job) -> None:
    to = job.payload["to"]
    if to.endswith("@invalid"):
        raise Fail(f"undeliverable address {to}")
    if job.payload["template"] == "newsletter" and job.attempts == 1:
        raise Retry(delay_s=0)  # a transient problem: try again right away
    sent.append(to)


worker = Worker(store, emails, send_email, concurrency=2)
worker.run_until_empty()  # in production: worker.run() until SIGTERM
print("sent to:", sorted(sent))

# 3. Nothing is lost: failures are dead letters you can inspect, then redrive
# (back to pending, same id, a fresh budget) once the cause is fixed, or purge.
dead = emails.list_jobs(JobState.DEAD)
for info in dead:
    print(f"dead job {info.id}: {info.last_error!r} after {info.attempts} attempt(s)")
print(emails.stats())
assert [info.payload["to"] for info in dead] == ["nobody@invalid"]

print("redriven:", emails.redrive([info.id for info in dead]))
worker.run_until_empty()  # the address is still invalid: back to the dead letters
print("purged:", emails.purge_dead())  # or purge_dead(older_than_s=7 * 86400)

assert sorted(sent) == ["ada@example.com", "bob@example.com"]
assert emails.stats().live == emails.stats().dead == 0
store.close()
