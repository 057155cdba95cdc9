"""A lone ack is one statement in autocommit when no child waits on the job
(docs/adr/0029); a job with waiting children, a kept result or a group
still acks in one transaction with what must commit with it (WF-2, RS-1,
Q-25)."""

from __future__ import annotations

from fix_trace import Traced

from alkstore import EnqueueOpts, QueueOpts
from alkstore_sqlite import SQLiteStore


def _ran(traced: Traced) -> list[str]:
    return [s.lstrip().split(None, 1)[0].upper() for s in traced.seen() if "data_version" not in s]


def test_a_lone_ack_is_one_delete_without_begin(db_path: str, traced: Traced) -> None:
    with SQLiteStore(db_path) as store:
        q = store.queue("q")
        q.enqueue("a")
        job = q.claim("w")
        assert job is not None
        traced.clear()
        assert job.ack()
        ran = _ran(traced)
        assert q.get_job(job.id) is None
    assert ran == ["DELETE"], ran


def test_a_refused_lone_ack_answers_false_and_changes_nothing(db_path: str, traced: Traced) -> None:
    with SQLiteStore(db_path) as store:
        q = store.queue("q", QueueOpts(visibility_timeout_s=60))
        q.enqueue("a")
        job = q.claim("w")
        assert job is not None and job.ack()
        assert not job.ack()  # already acked: the fast path deletes nothing
        q.enqueue("b")
        older = q.claim("w")
        assert older is not None and older.release()
        newer = q.claim("w")
        assert newer is not None and newer.id == older.id
        assert not older.ack()  # an older claim of a job claimed again
        assert q.stats().processing == 1
        assert newer.ack()


def test_the_ack_of_a_parent_still_releases_its_child_in_its_transaction(
    db_path: str, traced: Traced
) -> None:
    with SQLiteStore(db_path) as store:
        q = store.queue("q")
        parent = q.enqueue("p")
        child = q.enqueue("c", EnqueueOpts(after=(parent,)))
        job = q.claim("w")
        assert job is not None and job.id == parent
        traced.clear()
        assert job.ack()
        ran = _ran(traced)
        released = q.claim("w")
        assert released is not None and released.id == child
    # The one-statement try deletes nothing (a child waits); then the ack,
    # the child's release and the commit, together.
    assert ran[0] == "DELETE" and ran[1] == "BEGIN" and ran[-1] == "COMMIT", ran
    assert "INSERT" in ran, ran
