"""Test doubles of the worker suite: thin wrappers that watch the worker
from the outside without touching the engine.

:class:`CountingQueue` records every ``claim_batch`` call and
:class:`RecordingJob` every operation on a claim; ``RecordingJob``
deliberately hides the engine's ``visibility_timeout_s`` attribute, so the
worker's fallback (a third of ``deadline - now`` at claim time) is exercised
too. :class:`SettleStore` and its :class:`SettleQueue`/:class:`SettleJob`
record how the worker settles jobs (one by one or in batches).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, cast

from alkstore import Job, Queue, QueueOpts, RateLimit, Store, protocols

__all__ = [
    "AnyCall",
    "ClaimCall",
    "CountingQueue",
    "Op",
    "RecordingJob",
    "Settle",
    "SettleJob",
    "SettleQueue",
    "SettleStore",
]


def _members(protocol: type) -> frozenset[str]:
    """The public members of a contract protocol: what a double passes on."""
    return frozenset(name for name in vars(protocol) if not name.startswith("_"))


_JOB_MEMBERS = _members(protocols.Job)
_QUEUE_MEMBERS = _members(protocols.Queue)


@dataclass
class Op:
    """One operation the worker made on a claim: when the call began
    (``started``) and when it returned (``at``)."""

    name: str
    result: bool
    started: float
    at: float = field(default_factory=time.monotonic)


class RecordingJob:
    """A :class:`~alkstore.Job` that records what the worker does with it.

    *before_heartbeat* runs before each heartbeat is passed on (to stall one).
    It has no ``visibility_timeout_s``: the worker must fall back to the claim's
    deadline.
    """

    def __init__(self, job: Job, before_heartbeat: Callable[[int], None] | None = None) -> None:
        self.inner = job
        self.ops: list[Op] = []
        self.claimed_at = time.monotonic()
        self._before_heartbeat = before_heartbeat
        self._lock = threading.Lock()

    def _record(self, name: str, call: Callable[[], bool]) -> bool:
        started = time.monotonic()
        result = call()
        with self._lock:
            self.ops.append(Op(name, result, started))
        return result

    def names(self) -> list[str]:
        with self._lock:
            return [op.name for op in self.ops]

    def beats(self) -> list[Op]:
        with self._lock:
            return [op for op in self.ops if op.name == "heartbeat"]

    def __getattr__(self, name: str) -> Any:
        # The contract's members only: the engine's others (its
        # visibility_timeout_s, __alkstore_job__) stay hidden.
        if name in _JOB_MEMBERS:
            return getattr(self.inner, name)
        raise AttributeError(name)

    def ack(self, tx: object | None = None, *, result: Any = None) -> bool:
        return self._record("ack", lambda: self.inner.ack(tx, result=result))

    def retry(self, error: str, delay_s: float | None = None, tx: object | None = None) -> bool:
        return self._record("retry", lambda: self.inner.retry(error, delay_s, tx))

    def fail(self, error: str, tx: object | None = None) -> bool:
        return self._record("fail", lambda: self.inner.fail(error, tx))

    def heartbeat(self, extend_s: float | None = None) -> bool:
        def call() -> bool:
            if self._before_heartbeat is not None:
                self._before_heartbeat(len(self.beats()))
            return self.inner.heartbeat(extend_s)

        return self._record("heartbeat", call)

    def release(self) -> bool:
        return self._record("release", self.inner.release)


@dataclass
class ClaimCall:
    """One ``claim_batch`` call: what was asked and how many jobs came back."""

    n: int
    wait_s: float
    got: int
    started: float
    ended: float


class CountingQueue:
    """A :class:`~alkstore.Queue` that records ``claim_batch`` calls and wraps
    the claimed jobs in :class:`RecordingJob`. *on_claim* runs before each
    call with the number of jobs asked for."""

    def __init__(
        self,
        inner: Queue,
        *,
        before_heartbeat: Callable[[int], None] | None = None,
        on_claim: Callable[[int], None] | None = None,
    ) -> None:
        self.inner = inner
        self.calls: list[ClaimCall] = []
        self.jobs: list[RecordingJob] = []
        self._before_heartbeat = before_heartbeat
        self._on_claim = on_claim
        self._lock = threading.Lock()

    def job(self, job_id: int) -> RecordingJob:
        with self._lock:
            matches = [j for j in self.jobs if j.id == job_id]
        assert matches, f"job {job_id} was never claimed through the wrapper"
        return matches[-1]

    def call_count(self) -> int:
        with self._lock:
            return len(self.calls)

    def __getattr__(self, name: str) -> Any:
        if name in _QUEUE_MEMBERS:  # the contract's members, passed on as they are
            return getattr(self.inner, name)
        raise AttributeError(name)

    def claim(
        self, worker_id: str, wait_s: float = 0, rate_limit: RateLimit | None = None
    ) -> Job | None:
        jobs = self.claim_batch(worker_id, 1, wait_s, rate_limit)
        return jobs[0] if jobs else None

    def claim_batch(
        self, worker_id: str, n: int, wait_s: float = 0, rate_limit: RateLimit | None = None
    ) -> list[Job]:
        if self._on_claim is not None:
            self._on_claim(n)
        started = time.monotonic()
        got = self.inner.claim_batch(worker_id, n, wait_s, rate_limit)
        wrapped = [RecordingJob(j, self._before_heartbeat) for j in got]
        with self._lock:
            self.calls.append(ClaimCall(n, wait_s, len(got), started, time.monotonic()))
            self.jobs.extend(wrapped)
        return list(wrapped)

    def ack_batch(self, jobs: Sequence[Job], *, results: Sequence[Any] | None = None) -> int:
        inner = [j.inner if isinstance(j, RecordingJob) else j for j in jobs]
        return self.inner.ack_batch(inner, results=results)


@dataclass
class Settle:
    """One settle transaction a worker made: what kind, which jobs, whether
    each landed, and when it had committed (``time.time()``, comparable with
    log records)."""

    kind: str
    job_ids: list[int]
    landed: list[bool]
    committed_at: float


class SettleJob:
    """A claimed job seen through :class:`SettleStore`; forwards everything
    (``__alkstore_job__`` too, so the store's batch calls accept it) and
    reports its own ``ack``/``retry``/``fail`` to the store."""

    def __init__(self, inner: Job, owner: SettleStore) -> None:
        self.inner = inner
        self._owner = owner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    @property
    def __alkstore_job__(self) -> Any:
        return getattr(self.inner, "__alkstore_job__", self.inner)

    def ack(self, tx: object | None = None) -> bool:
        return self._owner._op(self.inner.id, tx, lambda: self.inner.ack(tx))

    def retry(self, error: str, delay_s: float | None = None, tx: object | None = None) -> bool:
        return self._owner._op(self.inner.id, tx, lambda: self.inner.retry(error, delay_s, tx))

    def fail(self, error: str, tx: object | None = None) -> bool:
        return self._owner._op(self.inner.id, tx, lambda: self.inner.fail(error, tx))


class SettleQueue:
    """A queue of :class:`SettleStore`: claims come back as :class:`SettleJob`."""

    def __init__(self, inner: Queue, owner: SettleStore) -> None:
        self.inner = inner
        self._owner = owner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def claim_batch(self, worker_id: str, n: int, wait_s: float = 0, **extra: Any) -> list[Any]:
        return [SettleJob(j, self._owner) for j in self.inner.claim_batch(worker_id, n, wait_s)]


@dataclass
class AnyCall:
    """One ``claim_any`` call of a several-queue worker."""

    queues: list[str]
    n: int
    wait_s: float
    got: int


class SettleStore:
    """A :class:`~alkstore.Store` that counts the transactions a worker
    settles its jobs in (W-6): each ``ack_each`` without ``tx=`` is one, each
    ``transaction()`` block is one whatever it holds, and each job operation
    without ``tx=`` is one. *before_settle* runs before each of them (to
    stall one). ``claim_any`` calls are recorded too (W-10)."""

    def __init__(self, inner: Store, before_settle: Callable[[], None] | None = None) -> None:
        self.inner = inner
        self.settles: list[Settle] = []
        self.any_calls: list[AnyCall] = []
        self._before = before_settle
        self._lock = threading.Lock()
        self._open = threading.local()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def queue(self, name: str, opts: QueueOpts | None = None) -> Any:
        return SettleQueue(self.inner.queue(name, opts), self)

    def _record(self, kind: str, ids: list[int], landed: list[bool]) -> None:
        with self._lock:
            self.settles.append(Settle(kind, ids, landed, time.time()))

    def _stall(self) -> None:
        if self._before is not None:
            self._before()

    def _op(self, job_id: int, tx: object | None, call: Callable[[], bool]) -> bool:
        if tx is not None:
            ok = call()
            getattr(self._open, "ids", []).append(job_id)
            getattr(self._open, "landed", []).append(ok)
            return ok
        self._stall()
        ok = call()
        self._record("op", [job_id], [ok])
        return ok

    def ack_each(self, jobs: Sequence[Any], tx: object | None = None) -> list[bool]:
        ids = [j.id for j in jobs]
        if tx is not None:
            landed = self.inner.ack_each(jobs, tx=tx)
            getattr(self._open, "ids", []).extend(ids)
            getattr(self._open, "landed", []).extend(landed)
            return landed
        self._stall()
        landed = self.inner.ack_each(jobs)
        self._record("ack_each", ids, landed)
        return landed

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        self._stall()
        self._open.ids, self._open.landed = [], []
        with self.inner.transaction() as tx:
            yield tx
        self._record("transaction", self._open.ids, self._open.landed)
        self._open.ids, self._open.landed = [], []

    def claim_any(
        self, queues: Sequence[Any], worker_id: str, n: int = 1, wait_s: float = 0, **extra: Any
    ) -> list[Any]:
        inner = [q.inner if isinstance(q, SettleQueue) else q for q in queues]
        call = AnyCall([q if isinstance(q, str) else q.name for q in inner], n, wait_s, 0)
        with self._lock:  # recorded as it starts: a blocked call counts too
            self.any_calls.append(call)
        got = self.inner.claim_any(inner, worker_id, n, wait_s, **extra)
        call.got = len(got)
        return [SettleJob(j, self) for j in got]

    def as_store(self) -> Store:
        """This wrapper, typed as the store it stands in for."""
        return cast(Store, self)

    def settled_ids(self) -> list[int]:
        with self._lock:
            return [i for s in self.settles for i in s.job_ids]
