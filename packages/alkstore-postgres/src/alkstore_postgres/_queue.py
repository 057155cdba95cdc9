"""Queues on PostgreSQL (SPEC §5); the design is docs/adr/0002.

Every operation is one statement (see ``_sql``): the claim dead-letters the
queue's exhausted lapsed claims and claims up to *n* rows with ``FOR UPDATE
SKIP LOCKED`` in one round trip; handle operations are fenced by (id,
attempt) and the deadline (Q-4, Q-7).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from alkstore.engine import (
    ClaimedJob,
    NewJob,
    QueueBase,
    WakeBoard,
    check_limit,
    claimed_jobs,
    job_info_from_row,
    prepare_job,
)
from alkstore.errors import InvalidArgument
from alkstore.protocols import Job
from alkstore.types import (
    EnqueueOpts,
    JobInfo,
    JobState,
    QueueOpts,
    QueueStats,
    SweepResult,
    check_int,
)

from ._core import fetch_all, fetch_one, run, utc

if TYPE_CHECKING:
    from ._core import StoreCore

__all__ = ["PostgresQueue", "clean_text", "insert_params"]

_MIN_ID, _MAX_ID = -(2**63), 2**63 - 1


def clean_text(text: str) -> str:
    """*text* as PostgreSQL ``text`` can hold it: NUL and lone surrogates
    replaced (an exception message may hold either; a retry must not fail
    because of its error text)."""
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text


def insert_params(queue: str, job: NewJob, wake: str) -> dict[str, Any]:
    """Parameters of ``ENQUEUE`` (and, with ``payloads``, ``ENQUEUE_MANY``,
    and of the scheduler's ``FIRE_SCHEDULE``)."""
    return {
        "queue": queue,
        "payload": job.payload,
        "priority": job.priority,
        "run_at": job.run_at,
        "delay_s": job.delay_s,
        "max_attempts": job.max_attempts,
        "vt": job.visibility_timeout_s,
        "backoff": job.backoff_base_s,
        "retention": job.dead_letter_retention_s,
        "expires_s": job.expires_s,
        "wake": wake,
    }


class PostgresQueue(QueueBase):
    """A handle on one queue name with the opts it stamps on enqueues (Q-1)."""

    def __init__(self, store: StoreCore, name: str, opts: QueueOpts) -> None:
        super().__init__(name, opts)
        self._store = store
        self._sql = store._sql

    # ---------------------------------------------------------- QueueBase hooks

    def _check_open(self) -> None:
        self._store._check_open()

    def _is_closed(self) -> bool:
        return self._store.closed

    @property
    def _wakeboard(self) -> WakeBoard:
        return self._store._wakes

    def _start_wakes(self) -> None:
        self._store._ensure_listener()

    def _fallback_s(self) -> float | None:
        return self._store._fallback_s()

    # ------------------------------------------------------------------ enqueue

    def enqueue(
        self, payload: Any, opts: EnqueueOpts | None = None, tx: object | None = None
    ) -> int:
        """Insert one job, stamped with this handle's opts (Q-1), and wake the
        queue's sleepers at commit; joins *tx* (T-1, T-3)."""
        self._check_open()
        job = prepare_job(self._opts, payload, opts)
        params = insert_params(self._name, job, self._store._wake_channel)
        with self._store._conn(tx) as conn:
            row = fetch_one(conn, self._sql.enqueue, params)
        assert row is not None
        return int(row[0])

    def _insert_many(self, first: NewJob, payloads: list[str], tx: object | None) -> list[int]:
        # One statement and one wake for the whole batch.
        params = insert_params(self._name, first, self._store._wake_channel)
        params["payloads"] = payloads
        with self._store._conn(tx) as conn:
            return sorted(int(row[0]) for row in fetch_all(conn, self._sql.enqueue_many, params))

    # -------------------------------------------------------------------- claim

    def _claim_once(self, worker_id: str, n: int) -> list[Job]:
        params = {"queue": self._name, "worker": worker_id, "n": n}
        with self._store._conn() as conn:
            rows = fetch_all(conn, self._sql.claim, params)
            if rows and rows[0][-1]:
                # Rare: lapsed claims with no budget left.
                fetch_one(conn, self._sql.exhaust, {"queue": self._name})
        claimed = [row[:-1] for row in rows if row[0] is not None]
        return list(claimed_jobs(claimed, self._name, worker_id, self, utc))

    def _seconds_to_next_ready(self) -> float | None:
        with self._store._conn() as conn:
            row = fetch_one(conn, self._sql.next_ready, {"queue": self._name})
        if row is None or row[0] is None:
            return None
        return float(row[0])

    def ack_batch(self, jobs: Sequence[Job]) -> int:
        """Ack every still-valid claim of this queue in one statement; count
        those that landed (Q-9)."""
        self._check_open()
        handles = [j for j in jobs if isinstance(j, ClaimedJob)]
        if len(handles) != len(jobs):
            raise InvalidArgument("ack_batch takes jobs claimed from this store")
        mine = [j for j in handles if j.queue == self._name]
        if not mine:
            return 0
        params = {
            "queue": self._name,
            "ids": [j.id for j in mine],
            "attempts": [j.attempts for j in mine],
        }
        with self._store._conn() as conn:
            return run(conn, self._sql.ack_batch, params)

    # --------------------------------------------------------- JobOps (fenced)

    @staticmethod
    def _fence(job: ClaimedJob) -> dict[str, Any]:
        return {"id": job.id, "attempt": job.attempts}

    def _ack_job(self, job: ClaimedJob, tx: object | None) -> bool:
        self._check_open()
        with self._store._conn(tx) as conn:
            return run(conn, self._sql.ack, self._fence(job)) == 1

    def _heartbeat_job(self, job: ClaimedJob, extend_s: float) -> datetime | None:
        self._check_open()
        params = self._fence(job)
        params["extend_s"] = extend_s
        with self._store._conn() as conn:
            row = fetch_one(conn, self._sql.heartbeat, params)
        return None if row is None else utc(row[0])

    def _retry_job(self, job: ClaimedJob, error: str, delay_s: float, tx: object | None) -> bool:
        self._check_open()
        # max_attempts is stamped at enqueue and never changes, and the fence
        # pins attempts: the handle knows which way the retry goes.
        if job.attempts >= job.max_attempts:
            return self._fail_job(job, error, tx)
        params = self._fence(job)
        params["delay_s"] = delay_s
        params["wake"] = self._store._wake_channel
        with self._store._conn(tx) as conn:
            return run(conn, self._sql.retry_pending, params) == 1

    def _fail_job(self, job: ClaimedJob, error: str, tx: object | None) -> bool:
        self._check_open()
        params = self._fence(job)
        params["error"] = clean_text(error)
        with self._store._conn(tx) as conn:
            return run(conn, self._sql.fenced_to_dead, params) == 1

    # ----------------------------------------------------------------- operator

    def cancel(self, job_id: int, tx: object | None = None) -> bool:
        """Delete a pending or processing job of this queue, whoever holds it
        (Q-13, C-7); ``False`` for a dead, missing or foreign job."""
        self._check_open()
        check_int("job_id", job_id, _MIN_ID, _MAX_ID)
        with self._store._conn(tx) as conn:
            return run(conn, self._sql.cancel, {"id": job_id, "queue": self._name}) == 1

    def get_job(self, job_id: int) -> JobInfo | None:
        """The job in any state, or ``None`` (Q-14); scoped to this queue (C-7)."""
        self._check_open()
        check_int("job_id", job_id, _MIN_ID, _MAX_ID)
        with self._store._conn() as conn:
            row = fetch_one(conn, self._sql.get_job, {"id": job_id, "queue": self._name})
        return None if row is None else job_info_from_row(row, utc)

    def list_jobs(self, state: JobState, limit: int = 100, after_id: int = 0) -> list[JobInfo]:
        """Jobs in *state* with ``id > after_id``, ascending, at most *limit*."""
        self._check_open()
        try:
            wanted = JobState(state)
        except ValueError as exc:
            raise InvalidArgument(f"unknown job state {state!r}") from exc
        params = {
            "queue": self._name,
            "state": wanted.value,
            "after": check_int("after_id", after_id, 0, _MAX_ID),
            "limit": check_limit(limit),
        }
        stmt = self._sql.list_dead if wanted is JobState.DEAD else self._sql.list_live
        with self._store._conn() as conn:
            return [job_info_from_row(row, utc) for row in fetch_all(conn, stmt, params)]

    def stats(self) -> QueueStats:
        """Counts by state; a pure read."""
        self._check_open()
        with self._store._conn() as conn:
            row = fetch_one(conn, self._sql.stats, {"queue": self._name})
        assert row is not None
        pending, scheduled, processing, dead = (int(v) for v in row)
        return QueueStats(self._name, pending, scheduled, processing, dead)

    def sweep_expired(self) -> SweepResult:
        """Expired rows to dead, exhausted lapsed claims to dead, retained dead
        rows purged: one statement (Q-12, Q-15..Q-17)."""
        self._check_open()
        with self._store._conn() as conn:
            row = fetch_one(conn, self._sql.sweep, {"queue": self._name})
        assert row is not None
        expired, purged, exhausted = (int(v) for v in row)
        return SweepResult(expired=expired, purged=purged, exhausted=exhausted)
