"""Queues on SQLite (SPEC §5); the design is docs/adr/0002."""

from __future__ import annotations

import json
import sqlite3
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

from . import _sql
from ._time import from_datetime, micros, now_us, to_datetime

if TYPE_CHECKING:
    from ._core import StoreCore

__all__ = ["SQLiteQueue", "insert_params"]


def insert_params(queue: str, job: NewJob, now: int) -> dict[str, Any]:
    """Parameters of ``ENQUEUE`` (and, with ``payloads``, ``ENQUEUE_MANY``)."""
    run_at = from_datetime(job.run_at) if job.run_at is not None else now + micros(job.delay_s)
    return {
        "queue": queue,
        "payload": job.payload,
        "priority": job.priority,
        "run_at": run_at,
        "now": now,
        "max_attempts": job.max_attempts,
        "vt": job.visibility_timeout_s,
        "backoff": job.backoff_base_s,
        "retention": job.dead_letter_retention_s,
        "expires_at": None if job.expires_s is None else now + micros(job.expires_s),
    }


class SQLiteQueue(QueueBase):
    """A handle on one queue name with the opts it stamps on enqueues (Q-1)."""

    def __init__(self, store: StoreCore, name: str, opts: QueueOpts) -> None:
        super().__init__(name, opts)
        self._store = store

    # ---------------------------------------------------------- QueueBase hooks

    def _check_open(self) -> None:
        self._store._check_open()

    def _is_closed(self) -> bool:
        return self._store.closed

    @property
    def _wakeboard(self) -> WakeBoard:
        return self._store._wakes

    def _start_wakes(self) -> None:
        self._store._ensure_watcher()

    def _fallback_s(self) -> float | None:
        return self._store._fallback_s()

    # ------------------------------------------------------------------ enqueue

    def enqueue(
        self, payload: Any, opts: EnqueueOpts | None = None, tx: object | None = None
    ) -> int:
        """Insert one job, stamped with this handle's opts (Q-1); joins *tx* (T-1)."""
        self._check_open()
        job = prepare_job(self._opts, payload, opts)
        with self._store._write(tx) as conn:
            params = insert_params(self._name, job, now_us())
            return int(conn.execute(_sql.ENQUEUE, params).fetchone()[0])

    def _insert_many(self, first: NewJob, payloads: list[str], tx: object | None) -> list[int]:
        # One statement: the payloads travel as one JSON array of texts.
        with self._store._write(tx) as conn:
            params = insert_params(self._name, first, now_us())
            params["payloads"] = json.dumps(payloads)
            return sorted(int(row[0]) for row in conn.execute(_sql.ENQUEUE_MANY, params))

    # -------------------------------------------------------------------- claim

    def _claim_once(self, worker_id: str, n: int) -> list[Job]:
        now = now_us()
        params = {"queue": self._name, "now": now}
        with self._store._read() as conn:
            claimable, exhausted = conn.execute(_sql.CLAIM_PRECHECK, params).fetchone()
        if not claimable and not exhausted:
            return []
        with self._store._write() as conn:
            now = now_us()
            if exhausted:
                self._exhaust(conn, now)
            rows = conn.execute(
                _sql.CLAIM, {"queue": self._name, "now": now, "worker": worker_id, "n": n}
            ).fetchall()
        return list(claimed_jobs(rows, self._name, worker_id, self, to_datetime))

    def _exhaust(self, conn: sqlite3.Connection, now: int) -> int:
        """Q-12: lapsed claims with no budget left move to dead."""
        params = {"queue": self._name, "now": now, "error": "max attempts exceeded"}
        conn.execute(_sql.EXHAUSTED_TO_DEAD, params)
        return conn.execute(_sql.EXHAUSTED_DELETE, {"queue": self._name, "now": now}).rowcount

    def _seconds_to_next_ready(self) -> float | None:
        now = now_us()
        with self._store._read() as conn:
            (ready_at,) = conn.execute(
                _sql.NEXT_READY, {"queue": self._name, "now": now}
            ).fetchone()
        return None if ready_at is None else (ready_at - now) / 1_000_000

    def ack_batch(self, jobs: Sequence[Job]) -> int:
        """Ack every still-valid claim in one transaction; count those that
        landed (Q-9)."""
        self._check_open()
        handles = [j for j in jobs if isinstance(j, ClaimedJob)]
        if len(handles) != len(jobs):
            raise InvalidArgument("ack_batch takes jobs claimed from this store")
        if not handles:
            return 0
        with self._store._write() as conn:
            now = now_us()
            return sum(
                conn.execute(_sql.ACK, {"id": j.id, "attempt": j.attempts, "now": now}).rowcount
                for j in handles
                if j.queue == self._name
            )

    # --------------------------------------------------------- JobOps (fenced)

    def _fence(self, job: ClaimedJob, now: int) -> dict[str, Any]:
        return {"id": job.id, "attempt": job.attempts, "now": now}

    def _ack_job(self, job: ClaimedJob, tx: object | None) -> bool:
        self._check_open()
        with self._store._write(tx) as conn:
            return conn.execute(_sql.ACK, self._fence(job, now_us())).rowcount == 1

    def _heartbeat_job(self, job: ClaimedJob, extend_s: float) -> datetime | None:
        self._check_open()
        with self._store._write() as conn:
            now = now_us()
            params = self._fence(job, now)
            params["deadline"] = now + micros(extend_s)
            row = conn.execute(_sql.HEARTBEAT, params).fetchone()
        return None if row is None else to_datetime(row[0])

    def _retry_job(self, job: ClaimedJob, error: str, delay_s: float, tx: object | None) -> bool:
        self._check_open()
        with self._store._write(tx) as conn:
            now = now_us()
            params = self._fence(job, now)
            params["run_at"] = now + micros(delay_s)
            if conn.execute(_sql.RETRY_PENDING, params).rowcount == 1:
                return True
            # No budget left (or the claim is no longer valid): Q-10.
            return self._to_dead(conn, job, error, now)

    def _fail_job(self, job: ClaimedJob, error: str, tx: object | None) -> bool:
        self._check_open()
        with self._store._write(tx) as conn:
            return self._to_dead(conn, job, error, now_us())

    def _to_dead(self, conn: sqlite3.Connection, job: ClaimedJob, error: str, now: int) -> bool:
        params = self._fence(job, now)
        params["error"] = error
        if conn.execute(_sql.FENCED_TO_DEAD, params).rowcount != 1:
            return False
        conn.execute(_sql.DELETE_BY_ID, {"id": job.id})
        return True

    # ----------------------------------------------------------------- operator

    def cancel(self, job_id: int, tx: object | None = None) -> bool:
        """Delete a pending or processing job of this queue, whoever holds it
        (Q-13); joins *tx* (T-1)."""
        self._check_open()
        check_int("job_id", job_id, -(2**63), 2**63 - 1)
        with self._store._write(tx) as conn:
            return conn.execute(_sql.CANCEL, {"id": job_id, "queue": self._name}).rowcount == 1

    def get_job(self, job_id: int) -> JobInfo | None:
        """The job in any state, or ``None`` (Q-14); scoped to this queue (C-7)."""
        self._check_open()
        check_int("job_id", job_id, -(2**63), 2**63 - 1)
        with self._store._read() as conn:
            row = conn.execute(_sql.GET_JOB, {"id": job_id, "queue": self._name}).fetchone()
        return None if row is None else job_info_from_row(row, to_datetime)

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
            "after": check_int("after_id", after_id, 0, 2**63 - 1),
            "limit": check_limit(limit),
        }
        sql = _sql.LIST_DEAD if wanted is JobState.DEAD else _sql.LIST_LIVE
        with self._store._read() as conn:
            return [job_info_from_row(row, to_datetime) for row in conn.execute(sql, params)]

    def stats(self) -> QueueStats:
        """Counts by state; a pure read."""
        self._check_open()
        with self._store._read() as conn:
            row = conn.execute(_sql.STATS, {"queue": self._name, "now": now_us()}).fetchone()
        pending, scheduled, processing, dead = row
        return QueueStats(self._name, pending, scheduled, processing, dead)

    def sweep_expired(self) -> SweepResult:
        """Expired rows to dead, exhausted lapsed claims to dead, retained dead
        rows purged: one transaction (Q-12, Q-15..Q-17)."""
        self._check_open()
        with self._store._write() as conn:
            now = now_us()
            params = {"queue": self._name, "now": now, "error": "expired"}
            conn.execute(_sql.EXPIRED_TO_DEAD, params)
            expired = conn.execute(_sql.EXPIRED_DELETE, {"queue": self._name, "now": now}).rowcount
            exhausted = self._exhaust(conn, now)
            purged = conn.execute(_sql.PURGE_DEAD, {"queue": self._name, "now": now}).rowcount
        return SweepResult(expired=expired, purged=purged, exhausted=exhausted)
