"""Progress checkpoints: a long job that resumes where it stopped (SPEC Q-28).

A handler stores a checkpoint with ``job.progress(value)`` as it goes; when
the attempt ends early (an exception, a crash of its process, a lapsed
claim), the next attempt reads the last one as ``job.checkpoint`` and
resumes from there instead of starting over.

- ``job.progress(value)`` stores any JSON value up to 64 KiB, fenced like a
  heartbeat: ``False`` once the claim is lost; it does not extend the claim.
- The checkpoint survives retries, reclaims, death and redrive;
  ``JobInfo.progress`` (``get_job``, ``list_jobs``) shows it.

Run it from any directory: it opens the store at $ALKSTORE_URL, or the
embedded default (sqlite:///alkstore.db in the current directory).
"""

from __future__ import annotations

import alkstore
from alkstore import InvalidArgument, JobState, QueueOpts, Worker

store = alkstore.open()
imports = store.queue("imports", QueueOpts(max_attempts=3, backoff_base_s=0))

ROWS = 10_000
CHUNK = 1_000
imported: list[tuple[int, int]] = []  # (attempt, first row of a chunk): what ran


def import_file(job: alkstore.Job) -> None:
    """Import the rows of a file a chunk at a time, checkpointing after each."""
    start = 0 if job.checkpoint is None else job.checkpoint["next_row"]
    if start:
        print(f"attempt {job.attempts}: resuming at row {start}")
    for first in range(start, job.payload["rows"], CHUNK):
        if job.attempts == 1 and first == 4 * CHUNK:
            raise ConnectionError("the source went away")  # the first attempt fails
        imported.append((job.attempts, first))  # ... the chunk's real work ...
        if not job.progress({"next_row": first + CHUNK, "file": job.payload["file"]}):
            return  # the claim was lost: another attempt owns the job now


job_id = imports.enqueue({"file": "customers.csv", "rows": ROWS})
Worker(store, imports, import_file).run_until_empty()
first_attempt = [row for attempt, row in imported if attempt == 1]
second_attempt = [row for attempt, row in imported if attempt == 2]
assert first_attempt == [0, 1000, 2000, 3000] and second_attempt[0] == 4000
assert len(imported) == ROWS // CHUNK  # no chunk ran twice
print(f"job {job_id}: {len(imported)} chunks, none twice")

# By hand: a checkpoint is fenced like a heartbeat, and kept by a dead job.
by_hand = imports.enqueue({"file": "orders.csv", "rows": 3 * CHUNK})
job = imports.claim("by-hand")
assert job is not None and job.checkpoint is None
assert job.progress({"next_row": CHUNK})
info = imports.get_job(by_hand)
assert info is not None and info.progress == {"next_row": CHUNK}
try:
    job.progress("x" * 70_000)  # over 64 KiB: refused, nothing written
except InvalidArgument as exc:
    print(f"refused: {exc}")
assert job.fail("bad row 1234")
assert job.progress({"next_row": 2 * CHUNK}) is False  # the claim has ended
dead = imports.list_jobs(JobState.DEAD)
print(f"dead job {dead[0].id}: {dead[0].last_error!r}, progress {dead[0].progress}")

# A redrive keeps the checkpoint: the fixed handler resumes at row 1000.
assert imports.redrive([by_hand]) == 1
again = imports.claim("by-hand")
assert again is not None and again.checkpoint == {"next_row": CHUNK}
print(f"redriven job {again.id} resumes at row {again.checkpoint['next_row']}")
assert again.ack()
store.close()
