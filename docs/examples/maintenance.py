"""Maintenance as a unit: a schedule fires a job every five minutes, and a
worker on the "maintenance" queue sweeps every queue (expired jobs to the
dead letters, dead letters past their retention purged).

In production (docs/deployment.md), the schedule is registered once, the
leader-elected scheduler runs with `alkstore scheduler`, and the worker
with `alkstore worker maintenance:sweep_all --queue maintenance`. Run as a
script, it does one round of all three in-process.

Run it from any directory: it opens the store at $ALKSTORE_URL, or the
embedded default (sqlite:///alkstore.db in the current directory).
"""

from __future__ import annotations

import functools

import alkstore
from alkstore import Job


@functools.cache
def store() -> alkstore.Store:
    """The store the sweeps run on: $ALKSTORE_URL, like the worker's own."""
    return alkstore.open()


def sweep_all(job: Job) -> None:
    """The handler: one sweep of every queue; the engine's own queues (names
    starting with ``__alkstore``) are the engine's business."""
    for stats in store().queue_stats():
        if not stats.queue.startswith("__alkstore"):
            result = store().queue(stats.queue).sweep_expired()
            if result.expired or result.exhausted or result.purged:
                print(f"swept {stats.queue}: {result}")


if __name__ == "__main__":
    from alkstore import EnqueueOpts, Worker

    s = store()
    # Re-registering is safe: it never pushes the next fire back.
    s.schedule("maintenance", "@every 5m", queue="maintenance")
    print("schedules:", [(x.name, x.spec) for x in s.schedules()])

    # Something to sweep: a job that expired before anyone claimed it.
    s.queue("reports").enqueue({"report": "stale"}, EnqueueOpts(expires_s=0.001))

    # The scheduler would enqueue the job at the next fire; here, by hand.
    s.queue("maintenance").enqueue({"fired_by": "hand"})
    ran = Worker(s, "maintenance", sweep_all, concurrency=1).run_until_empty()
    print(f"ran {ran} maintenance job(s); reports: {s.queue('reports').stats()}")
    assert s.queue("reports").stats().dead == 1
    s.close()
