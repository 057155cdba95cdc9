"""Operating live work: pause and resume a queue, run a job now (SPEC §21).

- ``q.pause()`` stops every claim of the queue, in every process (Q-27):
  workers keep running and hand out nothing; enqueues, and the jobs already
  claimed, go on. ``q.resume()`` wakes the waiting workers at once.
- ``q.run_now(job_id)`` makes a scheduled job ready now (O-6).

Run it from any directory: it opens the store at $ALKSTORE_URL, or the
embedded default (sqlite:///alkstore.db in the current directory).
"""

from __future__ import annotations

import threading
import time

import alkstore
from alkstore import EnqueueOpts, Worker

store = alkstore.open()
emails = store.queue("emails-pause-demo")

# 1. Pause: a worker serving the queue takes nothing until the resume.
emails.pause()
handled: list[object] = []
worker = Worker(store, emails, lambda job: handled.append(job.payload), claim_wait_s=30)
thread = threading.Thread(target=worker.run)
thread.start()
emails.enqueue_many([{"to": "ann@example.com"}, {"to": "bob@example.com"}])
time.sleep(0.5)
stats = emails.stats()
print(f"paused: {stats.paused}, pending: {stats.pending}, handled: {len(handled)}")
assert stats.paused and handled == []

# 2. Resume: the worker's blocked claim wakes and takes the jobs.
emails.resume()
deadline = time.monotonic() + 30
while len(handled) < 2 and time.monotonic() < deadline:
    time.sleep(0.05)
print(f"resumed: handled {len(handled)} job(s)")
assert len(handled) == 2

# 3. Run now: a job scheduled for tomorrow runs at once.
tomorrow = emails.enqueue({"to": "cat@example.com"}, EnqueueOpts(delay_s=86_400))
assert emails.stats().scheduled == 1
assert emails.run_now(tomorrow)
while len(handled) < 3 and time.monotonic() < deadline:
    time.sleep(0.05)
print(f"run now: job {tomorrow} handled, {len(handled)} in all")
assert len(handled) == 3

worker.stop()
thread.join()
store.close()
