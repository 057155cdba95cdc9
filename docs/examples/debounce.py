"""Replace and debounce: one job for a burst of requests (Q-29).

A document is saved many times in a row; its search index should be rebuilt
once, after the saves stop, from the latest version:

- ``on_conflict="replace"``: a job already waiting for the key takes the
  newest payload and options instead of being left as it was;
- ``debounce_s=d``: the waiting job runs ``d`` seconds after the latest
  enqueue of its key, and ``max_wait_s`` caps that, counted from the first,
  so a key that never goes quiet still runs.

Run it from any directory: it opens the store at $ALKSTORE_URL, or the
embedded default (sqlite:///alkstore.db in the current directory). It leaves
its queues empty, so it can run again.
"""

from __future__ import annotations

import time

import alkstore
from alkstore import EnqueueOpts

store = alkstore.open()

# 1. Replace: the latest request wins while the job waits; the id stays.
digests = store.queue("digests")
first = digests.enqueue_unique("user-7", {"items": 1}, EnqueueOpts(delay_s=60))
newer = digests.enqueue_unique(
    "user-7", {"items": 3}, EnqueueOpts(priority=5, delay_s=60), on_conflict="replace"
)
info = digests.get_job(first.id)
assert info is not None and newer == alkstore.Enqueued(first.id, False)
print(f"digest job {first.id}: payload {info.payload}, priority {info.priority}")
assert info.payload == {"items": 3} and info.priority == 5
digests.cancel(first.id)

# 2. Debounce: ten saves 0.05 s apart; one rebuild, 0.3 s after the last save.
reindex = store.queue("reindex")
for version in range(1, 11):
    last_save = time.monotonic()
    got = reindex.enqueue_unique(
        "doc-42", {"doc": 42, "version": version}, debounce_s=0.3, on_conflict="replace"
    )
    time.sleep(0.05)
print(f"10 saves of doc 42 -> {reindex.stats().scheduled} job waiting (job {got.id})")
job = reindex.claim("indexer", wait_s=10)
assert job is not None and job.payload == {"doc": 42, "version": 10}
quiet = time.monotonic() - last_save
print(f"rebuilt doc 42 from version {job.payload['version']}, {quiet:.2f} s after the last save")
assert quiet >= 0.25
job.ack()
assert reindex.claim("indexer") is None  # one rebuild for the whole burst

# 3. max_wait_s: a key saved without pause still runs, 1 s after its first save.
started = time.monotonic()
job = None
while job is None:
    reindex.enqueue_unique("doc-7", {"doc": 7}, debounce_s=0.5, max_wait_s=1.0)
    job = reindex.claim("indexer", wait_s=0.1)
waited = time.monotonic() - started
print(f"doc 7 saved every 0.1 s: rebuilt {waited:.1f} s after its first save")
assert waited >= 0.9
job.ack()
store.close()
