"""The scheduler, and the maintenance recipe that keeps queues clean.

Schedules live in the database; `run_schedules` is leader-elected, so run it
in every process that may lead: exactly one fires each due time.
"""

from __future__ import annotations

import threading
import time

import alkstore
from alkstore import EnqueueOpts, Job, JobState, QueueOpts, Worker

store = alkstore.open()

# Cron (5 fields, or 6 with seconds first), nicknames, or @every.
store.schedule("daily-report", "0 9 * * MON-FRI", queue="reports", tz="Europe/Paris")
store.schedule("heartbeat", "@every 1h30m", queue="pings", payload={"ping": True})
for s in store.schedules():
    print(f"{s.name}: {s.spec!r} next at {s.next_fire_at:%Y-%m-%d %H:%M} UTC")

# The maintenance recipe (no ambient sweeper runs in alkstore): a schedule
# on a maintenance queue and a worker whose handler sweeps every queue.
store.schedule("sweep", "@every 1s", queue="maintenance")
jobs = store.queue("jobs", QueueOpts(dead_letter_retention_s=3600))
jobs.enqueue({"too": "late"}, EnqueueOpts(expires_s=0.5))


def sweep_all(job: Job) -> None:
    for stats in store.queue_stats():
        if stats.queue.startswith("__alkstore"):
            continue  # engine-owned; sweep an outbox with store.outbox(name).queue
        swept = store.queue(stats.queue).sweep_expired()
        if swept.expired or swept.purged:
            print(f"swept {stats.queue}: {swept}")


stop = threading.Event()
scheduler = threading.Thread(target=store.run_schedules, kwargs={"stop": stop})
scheduler.start()
maintenance = Worker(store, "maintenance", sweep_all, concurrency=1)
deadline = time.monotonic() + 10
while not jobs.list_jobs(JobState.DEAD) and time.monotonic() < deadline:
    maintenance.run_until_empty()
    time.sleep(0.2)
stop.set()
scheduler.join()

dead = jobs.list_jobs(JobState.DEAD)
print("expired job is now dead:", [(d.id, d.last_error) for d in dead])
assert [d.last_error for d in dead] == ["expired"]
store.close()
