"""Kept results: jobs whose answer you can read, or wait for (SPEC §20).

A queue handle stamped with ``result_ttl_s`` makes each ack keep the job's
result for that long; without the stamp an ack deletes the job, as always.

- ``job.ack(result=...)`` keeps a value; a ``Worker`` keeps what its handler
  returns (RS-1).
- ``q.get_job(id)`` shows the job ``done`` with its ``result``; ``q.result(id,
  wait_s=...)`` waits for it, woken by the ack's commit (RS-2).
- ``q.sweep_expired()`` removes results past their time (RS-3).

Run it from any directory: it opens the store at $ALKSTORE_URL, or the
embedded default (sqlite:///alkstore.db in the current directory).
"""

from __future__ import annotations

import threading

import alkstore
from alkstore import InvalidArgument, JobState, QueueOpts, Worker

store = alkstore.open()

# Results of this queue are kept for an hour after each ack.
thumbnails = store.queue("thumbnails", QueueOpts(result_ttl_s=3600))

# 1. By hand: claim, do the work, ack with the result.
job_id = thumbnails.enqueue({"image": "cat.png", "size": 128})
job = thumbnails.claim("by-hand")
assert job is not None and job.result_ttl_s == 3600
job.ack(result={"thumbnail": "cat-128.png", "bytes": 5120})
info = thumbnails.get_job(job_id)
assert info is not None and info.state is JobState.DONE
print(f"job {job_id}: {info.state}, result {info.result}, finished at {info.finished_at:%H:%M:%S}")


# 2. A worker keeps what its handler returns.
def make_thumbnail(job: alkstore.Job) -> dict[str, object]:
    name, size = job.payload["image"], job.payload["size"]
    return {"thumbnail": name.replace(".png", f"-{size}.png"), "bytes": size * 40}


ids = thumbnails.enqueue_many([{"image": f"dog{i}.png", "size": 64} for i in range(3)])
Worker(store, thumbnails, make_thumbnail, concurrency=2).run_until_empty()
for i in ids:
    got = thumbnails.result(i)
    assert got is not None and got.state is JobState.DONE
    print(f"job {i}: {got.value['thumbnail']}")

# 3. Waiting for a result, as a web request would: block up to 10 s, woken
#    by the commit of the ack (here from a worker thread; any process works).
waiting_for = thumbnails.enqueue({"image": "bird.png", "size": 256})
worker = threading.Thread(
    target=Worker(store, thumbnails, make_thumbnail).run_until_empty, daemon=True
)
worker.start()
answer = thumbnails.result(waiting_for, wait_s=10)
worker.join()
assert answer is not None and answer.value is not None
print(f"waited for job {waiting_for}: {answer.state}, {answer.value['thumbnail']}")

# A job that dies has a result too: state dead, with its error.
doomed = thumbnails.enqueue({"image": "broken.png", "size": 0})
claimed = thumbnails.claim("by-hand")
assert claimed is not None and claimed.fail("cannot read broken.png")
dead = thumbnails.result(doomed)
assert dead is not None and dead.state is JobState.DEAD
print(f"job {doomed}: {dead.state}, {dead.last_error}")

# Without the stamp nothing is kept, and a result is refused (nothing acked).
plain = store.queue("plain")
plain_id = plain.enqueue("x")
plain_job = plain.claim("by-hand")
assert plain_job is not None
try:
    plain_job.ack(result="no")
except InvalidArgument as exc:
    print(f"refused: {exc}")
assert plain_job.ack()
assert plain.get_job(plain_id) is None and plain.result(plain_id) is None

# Tidy up, so that the example can run again: the kept results stay an hour
# (a sweep removes them once their time is up); the dead one is purged.
thumbnails.purge_dead()
print(f"sweep: {thumbnails.sweep_expired()}")
store.close()
