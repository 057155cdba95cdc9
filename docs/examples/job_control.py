"""Job control: unique keys, bounded queues, groups and rate limits.

Each answers one question about the jobs you enqueue:

- a unique key: is this job already waiting? (enqueue it once)
- a bounded queue: is there room? (shed load instead of growing a backlog)
- a group: how many of these may run at once? (one tenant never hogs the workers)
- a rate limit: how fast may they run? (a partner API's quota, across every worker)

Run it from any directory: it opens the store at $ALKSTORE_URL, or the
embedded default (sqlite:///alkstore.db in the current directory). It leaves
its queues empty, so it can run again.
"""

from __future__ import annotations

import time

import alkstore
from alkstore import EnqueueOpts, QueueFull, QueueOpts, Worker

store = alkstore.open()

# 1. Unique keys: one "reindex user 7" job at a time, however often it is asked for.
reindex = store.queue("reindex")
first = reindex.enqueue_unique("user-7", {"user": 7})
again = reindex.enqueue_unique("user-7", {"user": 7, "asked": "again"})
print(f"reindex user 7: job {first.id} created={first.created}; again: created={again.created}")
assert again.id == first.id and not again.created  # nothing written the second time
Worker(store, reindex, lambda job: None).run_until_empty()
# Once its job has finished (acked, cancelled or dead), the key is free again.
fresh = reindex.enqueue_unique("user-7", {"user": 7})
print(f"after it ran: job {fresh.id} created={fresh.created}")
assert fresh.created
reindex.cancel(fresh.id)

# 2. A bounded queue: at most three thumbnails waiting; the fourth is shed.
thumbnails = store.queue("thumbnails", QueueOpts(max_depth=3))
for image in range(4):
    try:
        thumbnails.enqueue({"image": image})
    except QueueFull as full:
        print(f"queue {full.queue!r} is full ({full.max_depth} jobs): image {image} shed")
# enqueue(..., wait_s=...) waits for room instead of failing at once.
print("thumbnails made:", Worker(store, thumbnails, lambda job: None).run_until_empty())

# 3. Groups: each tenant's exports run one at a time; tenants run side by side.
exports = store.queue("exports", QueueOpts(group_limit=1))
for tenant in ("acme", "globex"):
    for n in range(3):
        exports.enqueue({"tenant": tenant, "n": n}, EnqueueOpts(group=tenant))
batch = exports.claim_batch("worker-1", 10)  # asks for ten, gets one per tenant
print("claimed together:", sorted(job.payload["tenant"] for job in batch))
assert len(batch) == 2
for job in batch:
    job.ack()
rest = Worker(store, exports, lambda job: None, concurrency=4).run_until_empty()
print("exports run:", len(batch) + rest)

# 4. Rate limits: at most five partner API calls a second, shared by every
# worker and process on this database (the limiter lives in it).
partner = store.queue("partner-calls")
partner.enqueue_many([{"call": n} for n in range(6)])
api = store.rate_limit("partner-api", rate=5, per_s=1.0, burst=1)
started = time.monotonic()
for _ in range(6):
    # A claim takes one unit per job it returns, in its own transaction; with
    # none left it returns nothing, or waits for the next unit (wait_s).
    job = partner.claim("worker-1", wait_s=5, rate_limit=api)
    assert job is not None
    job.ack()
print(f"6 partner calls in {time.monotonic() - started:.1f} s (five a second)")
# The same limiter guards any other code path: acquire() takes a unit or says no,
# and a worker passes it to every claim: Worker(store, partner, handler, rate_limit=api).
print("a call right now?", api.acquire())

for name in ("reindex", "thumbnails", "exports", "partner-calls"):
    assert store.queue(name).stats().live == 0
store.close()
