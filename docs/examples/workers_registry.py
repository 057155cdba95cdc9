"""The workers' registry (O-5): a running Worker registers itself in the
store, refreshes its row with per-minute counts of the jobs it finished, and
removes its row when it stops; the counts stay for the dashboard's history.

Run it from any directory: it opens the store at $ALKSTORE_URL, or the
embedded default (sqlite:///alkstore.db in the current directory).
"""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta, timezone

import alkstore
from alkstore import Fail, Job, QueueOpts, Worker

store = alkstore.open()  # $ALKSTORE_URL, else sqlite:///alkstore.db
thumbs = store.queue("thumbnails", QueueOpts(max_attempts=1))
thumbs.enqueue_many([{"image": f"cat-{i}.jpg"} for i in range(5)] + [{"image": ""}])


def make_thumbnail(job: Job) -> None:
    if not job.payload["image"]:
        raise Fail("no image")  # counted as "failed"


# register_every_s: 10 s by default; shorter here so that the example is quick.
worker = Worker(store, thumbs, make_thumbnail, worker_id="thumbnailer-1", register_every_s=0.2)
stop = threading.Event()
running = threading.Thread(target=worker.run, args=(stop,))
running.start()

# Another process (the dashboard, `alkstore workers`) sees the worker while it runs.
with alkstore.open(store.url) as other:
    while not any(w.id == "thumbnailer-1" for w in other.workers()):
        time.sleep(0.05)
    (me,) = [w for w in other.workers() if w.id == "thumbnailer-1"]
    print(f"registered: {me.id} on {me.host}, pid {me.pid}, queues {list(me.queues)}")
    print(f"  concurrency {me.concurrency}, alkstore {me.version}, last seen {me.last_seen:%X}")

while thumbs.stats().pending or thumbs.stats().processing:
    time.sleep(0.05)
stop.set()
running.join()

# A clean stop removed the row; the counts it flushed stay (seven days).
assert not any(w.id == "thumbnailer-1" for w in store.workers())
since = datetime.now(timezone.utc) - timedelta(minutes=5)
for c in store.worker_counts(since=since):
    if c.worker_id == "thumbnailer-1":
        print(f"{c.minute:%H:%M} {c.queue}: {c.n} {c.outcome}")
store.close()
