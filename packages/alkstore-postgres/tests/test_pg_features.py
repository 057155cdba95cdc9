"""This round's job-control operations on PostgreSQL (SPEC §15, §16, Q-26,
W-10, O-4), ahead of their conformance tests: unique keys, bounded queues,
redrive and purge, release, several queues, rate limits, stats."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from alkstore import EnqueueOpts, InvalidArgument, JobState, QueueFull, QueueOpts
from alkstore_postgres import PostgresStore

Opener = Callable[..., PostgresStore]


# ------------------------------------------------------------ unique keys


def test_a_unique_key_is_held_while_its_job_lives(store: PostgresStore) -> None:
    q = store.queue("u")
    first = q.enqueue_unique("k", 1)
    again = q.enqueue_unique("k", 2)
    assert first.created and not again.created and again.id == first.id
    job = q.claim("w")
    assert job is not None and job.payload == 1
    assert not q.enqueue_unique("k", 3).created  # processing still holds it
    assert job.ack()
    freed = q.enqueue_unique("k", 4)
    assert freed.created and freed.id != first.id
    info = q.get_job(freed.id)
    assert info is not None and info.unique_key == "k"


def test_a_batch_with_a_key_twice_writes_it_once(store: PostgresStore) -> None:
    q = store.queue("u")
    held = q.enqueue_unique("held", 0)
    out = q.enqueue_many_unique([("a", 1), ("held", 2), ("a", 3), ("b", 4)])
    assert [o.created for o in out] == [True, False, False, True]
    assert out[1].id == held.id and out[2].id == out[0].id
    assert q.stats().pending == 3


def test_a_holder_that_can_never_run_again_gives_up_its_key(store: PostgresStore) -> None:
    q = store.queue("u")
    old = q.enqueue_unique("k", "old", EnqueueOpts(expires_s=0.05))
    time.sleep(0.1)
    new = q.enqueue_unique("k", "new")
    assert new.created and new.id != old.id
    dead = q.get_job(old.id)
    assert dead is not None and (dead.state, dead.last_error) == (JobState.DEAD, "expired")


@pytest.mark.parametrize("commit", [True, False])
def test_an_uncommitted_holder_is_waited_for(store: PostgresStore, commit: bool) -> None:
    q = store.queue("u")
    result: list[object] = []
    with pytest.raises(RuntimeError) if not commit else _nothing():
        with store.transaction() as tx:
            mine = q.enqueue_unique("k", "in tx", tx=tx)
            other = threading.Thread(target=lambda: result.append(q.enqueue_unique("k", "late")))
            other.start()
            time.sleep(0.3)
            assert result == []  # waiting for the holder's transaction
            if not commit:
                raise RuntimeError("roll back")
    other.join(10)
    (late,) = result
    assert late.created is (not commit)  # type: ignore[attr-defined]
    if commit:
        assert late.id == mine.id  # type: ignore[attr-defined]


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


# ------------------------------------------------------- bounded queues


def test_a_bounded_queue_refuses_past_its_depth_and_writes_nothing(store: PostgresStore) -> None:
    q = store.queue("b", QueueOpts(max_depth=3))
    q.enqueue_many([1, 2])
    with pytest.raises(QueueFull) as info:
        q.enqueue_many([3, 4])
    assert (info.value.queue, info.value.max_depth) == ("b", 3)
    assert q.stats().pending == 2
    q.enqueue(3)
    with pytest.raises(QueueFull):
        q.enqueue(4)
    job = q.claim("w")
    assert job is not None
    with pytest.raises(QueueFull):
        q.enqueue(4)  # processing counts
    assert job.ack()
    q.enqueue(4)


def test_a_full_queue_leaves_the_callers_transaction_usable(store: PostgresStore) -> None:
    q = store.queue("b", QueueOpts(max_depth=1))
    with store.transaction() as tx:
        q.enqueue(1, tx=tx)
        with pytest.raises(QueueFull):
            q.enqueue(2, tx=tx)
        tx.execute("SELECT 1")
    assert q.stats().pending == 1


def test_rows_that_can_never_run_do_not_count(store: PostgresStore) -> None:
    q = store.queue("b", QueueOpts(max_depth=1))
    q.enqueue(1, EnqueueOpts(expires_s=0.05))
    time.sleep(0.1)
    q.enqueue(2)
    assert q.stats().dead == 1


def test_concurrent_bounded_enqueues_stop_exactly_at_the_depth(open_store: Opener) -> None:
    stores = [open_store() for _ in range(4)]
    landed: list[int] = []
    full: list[int] = []
    lock = threading.Lock()

    def fill(store: PostgresStore) -> None:
        q = store.queue("b", QueueOpts(max_depth=25))
        for i in range(20):
            try:
                q.enqueue(i)
                with lock:
                    landed.append(i)
            except QueueFull:
                with lock:
                    full.append(i)

    threads = [threading.Thread(target=fill, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(landed) == 25 and len(full) == 55
    assert stores[0].queue("b").stats().pending == 25


def test_wait_s_with_tx_is_refused(store: PostgresStore) -> None:
    q = store.queue("b", QueueOpts(max_depth=1))
    with store.transaction() as tx, pytest.raises(InvalidArgument):
        q.enqueue(1, tx=tx, wait_s=1)


# ----------------------------------------------------- redrive, purge


def test_redrive_brings_dead_jobs_back_with_their_ids(store: PostgresStore) -> None:
    q = store.queue("r", QueueOpts(max_attempts=1))
    job_id = q.enqueue({"p": 1}, EnqueueOpts(priority=3, expires_s=3600))
    job = q.claim("w")
    assert job is not None and job.fail("boom")
    assert q.redrive() == 1
    info = q.get_job(job_id)
    assert info is not None
    assert (info.state, info.attempts, info.priority, info.payload) == (
        JobState.PENDING,
        0,
        3,
        {"p": 1},
    )
    assert (info.expires_at, info.last_error, info.died_at, info.claimed_at) == (
        None,
        None,
        None,
        None,
    )
    again = q.claim("w")
    assert again is not None and again.id == job_id and again.attempts == 1
    assert not job.ack()  # the old claim stays refused: claim numbers never repeat
    assert again.ack()


def test_redrive_leaves_a_job_whose_key_a_live_job_holds(store: PostgresStore) -> None:
    q = store.queue("r", QueueOpts(max_attempts=1))
    first = q.enqueue_unique("k", 1)
    job = q.claim("w")
    assert job is not None and job.fail("boom")
    q.enqueue_unique("k", 2)
    assert q.redrive([first.id]) == 0
    assert q.redrive([]) == 0
    info = q.get_job(first.id)
    assert info is not None and info.state is JobState.DEAD


def test_purge_by_ids_by_age_and_all(store: PostgresStore) -> None:
    q = store.queue("p", QueueOpts(max_attempts=1))
    ids = q.enqueue_many([1, 2, 3, 4])
    for job in q.claim_batch("w", 4):
        assert job.fail("x")
    assert q.purge_dead([ids[0], ids[0], 999_999]) == 1
    assert q.purge_dead(older_than_s=3600) == 0
    time.sleep(0.05)
    assert q.purge_dead([ids[1]], older_than_s=0.01) == 1
    assert q.purge_dead() == 2
    assert q.stats().dead == 0


# --------------------------------------------------- release, several queues


def test_release_gives_the_claim_back_uncounted(store: PostgresStore) -> None:
    q = store.queue("rel")
    job_id = q.enqueue(1)
    job = q.claim("w")
    assert job is not None and job.release()
    info = q.get_job(job_id)
    assert info is not None and (info.state, info.attempts) == (JobState.PENDING, 0)
    assert not job.ack() and not job.release()
    again = q.claim("w")
    assert again is not None and again.attempts == 1


def test_claim_any_serves_queues_in_order(store: PostgresStore) -> None:
    a, b = store.queue("a"), store.queue("b")
    b.enqueue_many(["b1", "b2"])
    a.enqueue("a1")
    jobs = store.claim_any(["a", "b"], "w", n=2)
    assert [j.payload for j in jobs] == ["a1", "b1"]
    assert store.ack_each(jobs) == [True, True]
    assert store.ack_each(jobs) == [False, False]


def test_a_blocked_claim_any_wakes_for_any_of_its_queues(store: PostgresStore) -> None:
    got: list[object] = []
    t = threading.Thread(target=lambda: got.extend(store.claim_any(["x", "y"], "w", wait_s=10)))
    started = time.monotonic()
    t.start()
    time.sleep(0.3)
    store.queue("y").enqueue("late")
    t.join(10)
    assert [j.payload for j in got] == ["late"]  # type: ignore[attr-defined]
    assert time.monotonic() - started < 4


# ----------------------------------------------------------- rate limits


def test_acquire_grants_the_burst_then_refuses(store: PostgresStore) -> None:
    # One unit per 30 s: a slow machine cannot earn a unit back mid-test.
    limit = store.rate_limit("api", rate=2, per_s=60, burst=3)
    assert [limit.acquire() for _ in range(4)] == [True, True, True, False]
    assert not limit.acquire(wait_s=0.05)
    fast = store.rate_limit("fast", rate=10, per_s=1, burst=1)
    assert fast.acquire()
    assert fast.acquire(wait_s=0.5)  # the next unit comes within 100 ms


def test_a_claim_takes_one_unit_per_job(store: PostgresStore) -> None:
    q = store.queue("rl")
    q.enqueue_many(list(range(10)))
    limit = store.rate_limit("claims", rate=1, per_s=60, burst=4)
    assert len(q.claim_batch("w", 10, rate_limit=limit)) == 4
    assert q.claim_batch("w", 10, rate_limit=limit) == []
    assert not limit.acquire()


# --------------------------------------------------------------- stats (O-1, O-4)


def test_stats_show_the_oldest_ready_job(store: PostgresStore) -> None:
    q = store.queue("s")
    assert q.stats().oldest_ready_at is None
    first = q.enqueue(1)
    q.enqueue(2, EnqueueOpts(delay_s=3600))
    info = q.get_job(first)
    assert info is not None
    assert q.stats().oldest_ready_at == info.run_at
    (row,) = [s for s in store.queue_stats() if s.queue == "s"]
    assert (row.pending, row.scheduled, row.oldest_ready_at) == (1, 1, info.run_at)


def test_stream_stats_and_held_locks(store: PostgresStore) -> None:
    s = store.stream("orders")
    for i in range(3):
        s.publish(i)
    assert s.commit("billing", 2)
    (stats,) = store.stream_stats()
    assert (stats.stream, stats.last_offset, stats.events) == ("orders", 3, 3)
    assert [(c.consumer, c.offset, c.lag) for c in stats.consumers] == [("billing", 2, 1)]
    lock = store.lock("backup", 30, owner="me")
    assert lock is not None
    assert [(h.name, h.owner, h.token) for h in store.held_locks()] == [("backup", "me", 1)]
    assert lock.release()
    assert store.held_locks() == []
