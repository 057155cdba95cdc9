"""Workflows: jobs that wait for other jobs (SPEC §19).

``EnqueueOpts(after=(id, ...))`` makes a job wait until every job it names
has been acked; the ack of the last one releases it, in the same
transaction. This example builds

- a chain: download -> resize -> publish, each step after the one before;
- a fan-out with a fan-in: one job per page, then a summary that reads the
  pages' kept results with ``job.parent_results()`` (WF-4);
- a failure cascade: a dead parent takes its waiting jobs with it, and
  redriving the parent brings them back (WF-3).

Run it from any directory: it opens the store at $ALKSTORE_URL, or the
embedded default (sqlite:///alkstore.db in the current directory).
"""

from __future__ import annotations

import alkstore
from alkstore import EnqueueOpts, JobState, QueueOpts, Worker

store = alkstore.open()
# Results are kept for an hour, so that a fan-in can read them.
work = store.queue("workflow-demo", QueueOpts(result_ttl_s=3600))
ran: list[str] = []


def handle(job: alkstore.Job) -> object:
    step = job.payload["step"]
    ran.append(step)
    if step == "summary":
        pages = job.parent_results()  # {parent id: its kept result}
        return {"words": sum(r["words"] for r in pages.values()), "pages": len(pages)}
    if step.startswith("page"):
        return {"words": 100 * int(step[4:])}
    return {"done": step}


# 1. A chain: each step waits for the one before it.
download = work.enqueue({"step": "download"})
resize = work.enqueue({"step": "resize"}, EnqueueOpts(after=(download,)))
publish = work.enqueue({"step": "publish"}, EnqueueOpts(after=(resize,)))
info = work.get_job(publish)
assert info is not None and info.state is JobState.WAITING
print(f"publish waits on {info.waiting_on}; stats: {work.stats().waiting} waiting")

# 2. A fan-out of three pages and a fan-in after all of them.
pages = work.enqueue_many([{"step": f"page{n}"} for n in (1, 2, 3)])
summary = work.enqueue({"step": "summary"}, EnqueueOpts(after=tuple(pages)))

Worker(store, work, handle).run_until_empty()
print(f"ran in order: {ran}")
assert ran.index("download") < ran.index("resize") < ran.index("publish")
assert ran.index("summary") > max(ran.index(f"page{n}") for n in (1, 2, 3))
total = work.result(summary)
assert total is not None and total.value == {"words": 600, "pages": 3}
print(f"summary: {total.value}")

# 3. A failure cascade: the parent dies, its waiting job dies with it.
fetch = work.enqueue({"step": "fetch"})
parse = work.enqueue({"step": "parse"}, EnqueueOpts(after=(fetch,)))
claimed = work.claim("by-hand")
assert claimed is not None and claimed.id == fetch
claimed.fail("the server said 503")
dead = work.get_job(parse)
assert dead is not None and dead.state is JobState.DEAD
print(f"parse: {dead.state}, {dead.last_error}")

# Redriving the parent brings its cascade back, waiting again; then it runs.
work.redrive([fetch])
back = work.get_job(parse)
assert back is not None and back.state is JobState.WAITING
Worker(store, work, handle).run_until_empty()
assert ran[-2:] == ["fetch", "parse"]
print(f"after the redrive: {ran[-2:]}")

# Tidy up, so that the example can run again (kept results expire by sweep).
work.purge_dead()
store.close()
