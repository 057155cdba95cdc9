"""PostgreSQL faults on a throwaway cluster (E-2): backends terminated under
load, a server restart, an outage. Only ``TransientError`` comes out,
nothing committed is lost, and the pool and the listener recover by
themselves."""

from __future__ import annotations

import contextlib
import functools
import itertools
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest
from fix_cluster import Cluster, cluster
from fix_server import blocked_claim, once_back

from alkstore import AlkstoreError, Job, QueueOpts, TransientError
from alkstore_postgres import PostgresStore

__all__ = ["cluster"]

T = TypeVar("T")


@pytest.fixture
def app() -> str:
    return f"alkstore-faults-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def store(cluster: Cluster, app: str) -> Iterator[PostgresStore]:
    cluster.wait_ready()
    opened = PostgresStore(
        cluster.url,
        schema=f"faults_{uuid.uuid4().hex[:8]}",
        application_name=app,
        min_size=2,
        max_size=4,
        connect_timeout_s=2,
        pool_timeout_s=3,
    )
    try:
        yield opened
    finally:
        opened.close()


class Errors:
    """Every exception seen by the load threads, by type."""

    def __init__(self) -> None:
        self.seen: Counter[str] = Counter()
        self.raw: list[BaseException] = []
        self._lock = threading.Lock()

    def retry(self, call: Callable[[], T], stop: threading.Event | None = None) -> T:
        """Call until it works; count TransientErrors; keep anything else."""
        while True:
            try:
                return call()
            except TransientError:
                with self._lock:
                    self.seen["TransientError"] += 1
                time.sleep(0.02)
            except Exception as exc:
                with self._lock:
                    self.seen[f"{type(exc).__name__}"] += 1
                    self.raw.append(exc)
                raise


def test_backends_terminated_during_enqueue_claim_and_ack_lose_nothing(
    store: PostgresStore, cluster: Cluster, app: str
) -> None:
    q = store.queue("load", QueueOpts(visibility_timeout_s=2, max_attempts=1000))
    errors = Errors()
    enqueued: set[int] = set()
    acked: Counter[int] = Counter()
    stop = threading.Event()
    kills = Counter[str]()

    def produce() -> None:
        for n in itertools.count():
            if stop.is_set():
                return
            enqueued.add(errors.retry(functools.partial(q.enqueue, {"n": n})))

    def consume() -> None:
        while not stop.is_set() or q.stats().live:
            jobs: list[Job] = errors.retry(lambda: q.claim_batch("w", 20, wait_s=0.2))
            for job in jobs:
                if errors.retry(job.ack):
                    acked[job.id] += 1

    def kill() -> None:
        while not stop.is_set():
            kills["terminated"] += cluster.terminate_backends(app)
            time.sleep(0.3)

    threads = [threading.Thread(target=f, daemon=True) for f in (produce, consume, kill)]
    for t in threads:
        t.start()
    time.sleep(4.0)
    stop.set()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads), "a load thread hung"
    assert errors.raw == [], f"non-transient errors: {errors.raw[:5]}"
    assert kills["terminated"] > 5, "the test never terminated a backend"
    assert errors.seen["TransientError"] > 0, "no call met a terminated backend"
    # Nothing committed was lost: every job whose enqueue returned was acked,
    # none twice, and the queue is empty. (An enqueue whose reply was lost
    # may have committed a job its caller never saw: it was drained too.)
    assert set(acked) >= enqueued
    assert max(acked.values()) == 1
    stats = store.queue("load").stats()
    assert (stats.pending, stats.processing, stats.dead) == (0, 0, 0)


def test_the_listener_recovers_after_its_backend_is_terminated(
    store: PostgresStore, cluster: Cluster, app: str
) -> None:
    with store.listen("ch") as listener:
        for _ in range(3):
            cluster.terminate_backends()  # the listener connection too
            time.sleep(0.2)
        deadline = time.monotonic() + 15
        got = None
        while got is None and time.monotonic() < deadline:
            with contextlib.suppress(TransientError):
                store.notify("ch", "back")
            got = listener.get(0.5)
        assert got is not None and got.payload == "back"
    # And wakes: a blocked claim returns soon after an enqueue.
    q = store.queue("wakes")
    woken = blocked_claim(q, lambda: Errors().retry(lambda: q.enqueue("x")), wait_s=10, pause_s=0.5)
    assert woken.result is not None
    assert woken.from_meanwhile < 2.0


def test_calls_after_the_pools_backends_were_terminated_just_work(
    store: PostgresStore, cluster: Cluster, app: str
) -> None:
    q = store.queue("replaced")
    for _ in range(4):
        q.stats()  # the pool's connections exist
    assert cluster.terminate_backends(app) >= 1
    time.sleep(0.2)
    for n in range(8):  # more calls than the pool has connections
        q.enqueue({"n": n})
    assert q.stats().pending == 8


def test_a_server_restart_loses_nothing_and_the_store_recovers(
    store: PostgresStore, cluster: Cluster
) -> None:
    q = store.queue("restart", QueueOpts(visibility_timeout_s=300))
    ids = q.enqueue_many(list(range(200)))
    claimed = q.claim_batch("w", 50)
    s = store.stream("restart")
    for i in range(10):
        s.publish(i)
    cluster.restart("fast")
    errors = Errors()
    deadline = time.monotonic() + 20
    while True:
        try:
            stats = q.stats()
            break
        except TransientError:
            assert time.monotonic() < deadline, "the store did not recover after the restart"
            time.sleep(0.1)
    assert (stats.pending, stats.processing) == (150, 50)
    assert errors.retry(lambda: sum(1 for j in claimed if j.ack())) == 50
    rest = errors.retry(lambda: q.claim_batch("w", 200))
    assert sorted(j.id for j in rest + claimed) == sorted(ids)
    assert [e.payload for e in errors.retry(s.read)] == list(range(10))


def test_an_outage_raises_only_transient_errors_and_the_store_recovers(
    cluster: Cluster, app: str
) -> None:
    cluster.wait_ready()
    store = PostgresStore(
        cluster.url, schema=f"outage_{uuid.uuid4().hex[:8]}", pool_timeout_s=1, connect_timeout_s=2
    )
    q = store.queue("outage")
    q.enqueue("before")
    cluster.stop("fast")
    try:
        for call in (
            lambda: q.enqueue("during"),
            lambda: q.claim("w"),
            lambda: store.stream("s").publish(1),
            lambda: store.notify("c", 1),
        ):
            with pytest.raises(AlkstoreError) as info:
                call()
            assert isinstance(info.value, TransientError), repr(info.value)
    finally:
        cluster.start()
    job = once_back(lambda: q.claim("w"), 20)
    assert job is not None and job.payload == "before" and job.ack()
    store.close()


def test_a_blocked_claim_during_an_outage_returns_within_wait_s_and_a_small_bound(
    cluster: Cluster, app: str
) -> None:
    """Two ways into an outage: a claim blocked while the server stops under
    it, and a claim started while the server is down and the pool holds no
    connection. Each returns (or raises TransientError) within its ``wait_s``
    and a small bound, whatever the pool timeout (4 s here, to keep the
    test short; the default is 10 s)."""
    cluster.wait_ready()
    store = PostgresStore(cluster.url, schema=f"outage_{uuid.uuid4().hex[:8]}", pool_timeout_s=4)
    try:
        q = store.queue("blocked")
        q.stats()
        outcome: list[Any] = []

        def claim() -> None:
            started = time.monotonic()
            try:
                outcome.append(q.claim("w", wait_s=1))
            except TransientError as exc:
                outcome.append(exc)
            outcome.append(time.monotonic() - started)

        claimer = threading.Thread(target=claim, daemon=True)
        claimer.start()
        time.sleep(0.5)
        cluster.stop("fast")
        try:
            claimer.join(30)
            with contextlib.suppress(TransientError):
                q.stats()  # the pool finds its connection dead and drops it
            claim()
        finally:
            cluster.start()
        assert len(outcome) == 4, f"a claim did not return: {outcome}"
        for result, elapsed in (outcome[0:2], outcome[2:4]):
            assert result is None or isinstance(result, TransientError)
            assert elapsed < 1 + 1.5, f"claim(wait_s=1) took {elapsed:.1f} s in an outage"
    finally:
        store.close()
