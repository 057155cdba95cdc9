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
    check_limit,
    check_wait,
    check_worker_id,
    job_info_from_row,
    prepare_job,
    wait_for,
)
from alkstore.errors import InvalidArgument
from alkstore.names import decode_payload, encode_payload
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

_MAX_BATCH = 10_000


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


class SQLiteQueue:
    """A handle on one queue name with the opts it stamps on enqueues (Q-1)."""

    def __init__(self, store: StoreCore, name: str, opts: QueueOpts) -> None:
        self._store = store
        self._name = name
        self._opts = opts

    def __repr__(self) -> str:
        return f"SQLiteQueue({self._name!r}, {self._opts!r})"

    @property
    def name(self) -> str:
        return self._name

    @property
    def opts(self) -> QueueOpts:
        return self._opts

    # ------------------------------------------------------------------ enqueue

    def enqueue(
        self, payload: Any, opts: EnqueueOpts | None = None, tx: object | None = None
    ) -> int:
        """Insert one job, stamped with this handle's opts (Q-1); joins *tx* (T-1)."""
        self._store._check_open()
        job = prepare_job(self._opts, payload, opts)
        with self._store._write(tx) as conn:
            params = insert_params(self._name, job, now_us())
            return int(conn.execute(_sql.ENQUEUE, params).fetchone()[0])

    def enqueue_many(
        self, payloads: Sequence[Any], opts: EnqueueOpts | None = None, tx: object | None = None
    ) -> list[int]:
        """Insert every payload in one statement; ids in payload order."""
        self._store._check_open()
        if isinstance(payloads, (str, bytes)) or not isinstance(payloads, Sequence):
            raise InvalidArgument("payloads must be a sequence (list or tuple) of payloads")
        if not payloads:
            return []
        first = prepare_job(self._opts, payloads[0], opts)
        texts = [first.payload] + [encode_payload(p) for p in payloads[1:]]
        with self._store._write(tx) as conn:
            params = insert_params(self._name, first, now_us())
            params["payloads"] = json.dumps(texts)
            ids = sorted(int(row[0]) for row in conn.execute(_sql.ENQUEUE_MANY, params))
        if len(ids) != len(texts):  # pragma: no cover - a broken SQLite
            raise AssertionError("enqueue_many inserted an unexpected number of rows")
        return ids

    # -------------------------------------------------------------------- claim

    def claim(self, worker_id: str, wait_s: float = 0) -> Job | None:
        """The best claimable job (Q-2..Q-6), waiting up to *wait_s* (Q-19)."""
        jobs = self.claim_batch(worker_id, 1, wait_s)
        return jobs[0] if jobs else None

    def claim_batch(self, worker_id: str, n: int, wait_s: float = 0) -> list[Job]:
        """Up to *n* jobs in claim order, in one statement (Q-2, Q-3)."""
        self._store._check_open()
        wid = check_worker_id(worker_id)
        count = check_int("n", n, 1, _MAX_BATCH)
        wait = check_wait(wait_s)
        jobs: list[Job] = wait_for(
            lambda: self._claim_once(wid, count),
            wakes=self._store._wakes,
            key=self._name,
            wait_s=wait,
            is_closed=lambda: self._store.closed,
            next_ready=self._seconds_to_next_ready,
            on_wait=self._store._ensure_watcher,
            fallback_s=self._store._fallback_s(),
        )
        return jobs

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
        # RETURNING order is unspecified; run_at now holds the claim-order time.
        rows.sort(key=lambda r: (-r[4], r[5], r[0]))
        return [
            ClaimedJob(
                id=job_id,
                queue=self._name,
                payload=decode_payload(payload),
                attempts=attempts,
                max_attempts=max_attempts,
                priority=priority,
                deadline=to_datetime(deadline),
                visibility_timeout_s=float(vt),
                backoff_base_s=float(backoff),
                worker_id=worker_id,
                _ops=self,
            )
            for job_id, payload, attempts, max_attempts, priority, _, deadline, vt, backoff in rows
        ]

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
        self._store._check_open()
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
        self._store._check_open()
        with self._store._write(tx) as conn:
            return conn.execute(_sql.ACK, self._fence(job, now_us())).rowcount == 1

    def _heartbeat_job(self, job: ClaimedJob, extend_s: float) -> datetime | None:
        self._store._check_open()
        with self._store._write() as conn:
            now = now_us()
            params = self._fence(job, now)
            params["deadline"] = now + micros(extend_s)
            row = conn.execute(_sql.HEARTBEAT, params).fetchone()
        return None if row is None else to_datetime(row[0])

    def _retry_job(self, job: ClaimedJob, error: str, delay_s: float, tx: object | None) -> bool:
        self._store._check_open()
        with self._store._write(tx) as conn:
            now = now_us()
            params = self._fence(job, now)
            params["run_at"] = now + micros(delay_s)
            if conn.execute(_sql.RETRY_PENDING, params).rowcount == 1:
                return True
            # No budget left (or the claim is no longer valid): Q-10.
            return self._to_dead(conn, job, error, now)

    def _fail_job(self, job: ClaimedJob, error: str, tx: object | None) -> bool:
        self._store._check_open()
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
        self._store._check_open()
        check_int("job_id", job_id, -(2**63), 2**63 - 1)
        with self._store._write(tx) as conn:
            return conn.execute(_sql.CANCEL, {"id": job_id, "queue": self._name}).rowcount == 1

    def get_job(self, job_id: int) -> JobInfo | None:
        """The job in any state, or ``None`` (Q-14); scoped to this queue (C-7)."""
        self._store._check_open()
        check_int("job_id", job_id, -(2**63), 2**63 - 1)
        with self._store._read() as conn:
            row = conn.execute(_sql.GET_JOB, {"id": job_id, "queue": self._name}).fetchone()
        return None if row is None else job_info_from_row(row, to_datetime)

    def list_jobs(self, state: JobState, limit: int = 100, after_id: int = 0) -> list[JobInfo]:
        """Jobs in *state* with ``id > after_id``, ascending, at most *limit*."""
        self._store._check_open()
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
        self._store._check_open()
        with self._store._read() as conn:
            row = conn.execute(_sql.STATS, {"queue": self._name, "now": now_us()}).fetchone()
        pending, scheduled, processing, dead = row
        return QueueStats(self._name, pending, scheduled, processing, dead)

    def sweep_expired(self) -> SweepResult:
        """Expired rows to dead, exhausted lapsed claims to dead, retained dead
        rows purged: one transaction (Q-12, Q-15..Q-17)."""
        self._store._check_open()
        with self._store._write() as conn:
            now = now_us()
            params = {"queue": self._name, "now": now, "error": "expired"}
            conn.execute(_sql.EXPIRED_TO_DEAD, params)
            expired = conn.execute(_sql.EXPIRED_DELETE, {"queue": self._name, "now": now}).rowcount
            exhausted = self._exhaust(conn, now)
            purged = conn.execute(_sql.PURGE_DEAD, {"queue": self._name, "now": now}).rowcount
        return SweepResult(expired=expired, purged=purged, exhausted=exhausted)
