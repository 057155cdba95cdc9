"""Queue operations of the SQLite executor (SPEC §5, §15, §16); design in
docs/adr/0002. Each operation runs in one write transaction (or the caller's),
so it fully happens or leaves no trace (C-6)."""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from alkstore.engine import (
    ClaimRow,
    Fence,
    Inserted,
    JobRow,
    NewJob,
    RateSpec,
    ResultRow,
    claim_row,
    job_row,
)
from alkstore.errors import QueueFull, TransientError
from alkstore.types import JobState, QueueStats, SweepResult

from . import _sql
from ._core import Core
from ._time import from_datetime, micros, now_us, to_datetime

__all__ = ["QueueOps"]

_MAX_ERROR = "max attempts exceeded"


def _opt_time(us: int | None) -> datetime | None:
    return None if us is None else to_datetime(us)


def _claim_row(row: Sequence[Any]) -> ClaimRow:
    return claim_row(row, to_datetime)


def _before(a: Sequence[Any], b: Sequence[Any], now: int) -> bool:
    """Whether row *a* ``(id, priority, ready_at, ...)`` has the better claim
    to a group's slot than *b*: a row ready now before one that waits, then
    claim order (Q-2, Q-25)."""

    def key(r: Sequence[Any]) -> tuple[bool, int, int, int]:
        return (int(r[2]) > now, -int(r[1]), int(r[2]), int(r[0]))

    return key(a) < key(b)


def insert_params(queue: str, job: NewJob, now: int) -> dict[str, Any]:
    """Parameters of ``ENQUEUE`` (and, with ``items``, ``ENQUEUE_MANY``)."""
    run_at = from_datetime(job.run_at) if job.run_at is not None else now + micros(job.delay_s)
    return {
        "queue": queue,
        "payload": job.payload,
        "priority": job.priority,
        "run_at": run_at,
        "now": now,
        "max_attempts": job.max_attempts,
        "visibility_timeout_s": job.visibility_timeout_s,
        "backoff_base_s": job.backoff_base_s,
        "dead_letter_retention_s": job.dead_letter_retention_s,
        "expires_at": None if job.expires_s is None else now + micros(job.expires_s),
        "unique_key": job.unique_key,
        "grp": job.group,
        "group_limit": job.group_limit,
        "parked": 0,
        "trace_context": job.trace_context,
        "result_ttl_s": job.result_ttl_s,
        "parents": json.dumps(list(job.after)) if job.after else None,
    }


class QueueOps:
    """Enqueue, claim, settle and operate on jobs; rate limits."""

    def __init__(self, core: Core) -> None:
        self._read = core.read
        self._write = core.write

    # ------------------------------------------------------------------ enqueue

    def insert_jobs(
        self,
        tx: sqlite3.Connection | None,
        queue: str,
        jobs: Sequence[NewJob],
        max_depth: int | None,
    ) -> list[Inserted]:
        first = jobs[0]
        unique = first.unique_key is not None
        grouped = first.group is not None and first.group_limit is not None
        waits = bool(first.after)
        if len(jobs) == 1 and not unique and max_depth is None and not grouped and not waits:

            def one(conn: sqlite3.Connection) -> list[Inserted]:
                params = insert_params(queue, first, now_us())
                return [Inserted(int(conn.execute(_sql.ENQUEUE, params).fetchall()[0][0]))]

            return self._write(tx, one, single=True)

        def many(conn: sqlite3.Connection, jobs: Sequence[NewJob] = jobs) -> list[Inserted]:
            now = now_us()
            todo = jobs
            held: dict[str, int] = {}
            if unique:
                keys = json.dumps([j.unique_key for j in jobs])
                self._free_stale_keys(conn, queue, keys, now)
                # keys a live job holds are left out before the insert,
                # so that a call which writes nothing changes nothing in the
                # file (an ignored AUTOINCREMENT insert still would) and
                # sends no wake.
                held = {
                    k: int(i)
                    for k, i in conn.execute(_sql.KEY_HOLDERS, {"queue": queue, "keys": keys})
                }
                todo = [j for j in jobs if j.unique_key not in held]
            params = insert_params(queue, first, now)
            if not todo:
                ids: list[int] = []
                inserted: dict[str | None, int] = {}
            elif len(todo) == 1:
                params = insert_params(queue, todo[0], now)
                sql = _sql.ENQUEUE_UNIQUE if unique else _sql.ENQUEUE
                got = conn.execute(sql, params).fetchall()
                inserted = {todo[0].unique_key: int(got[0][0])} if got else {}
                ids = [int(got[0][0])] if got else []
            else:
                params["items"] = json.dumps([[j.payload, j.unique_key] for j in todo])
                sql = _sql.ENQUEUE_MANY_UNIQUE if unique else _sql.ENQUEUE_MANY
                rows = conn.execute(sql, params).fetchall()
                ids = sorted(int(r[0]) for r in rows)
                inserted = {r[1]: int(r[0]) for r in rows}
            if waits and ids and self._hold_back(conn, first, ids, now):
                return [Inserted(i) for i in ids]  # waiting or dead: no slot, no depth
            if grouped and ids:
                # new rows of a limited group wait parked; the group's
                # free slots then go to its best rows in claim order.
                conn.execute(_sql.PARK_NEW, {"ids": json.dumps(ids)})
                assert first.group is not None
                self._rebalance(conn, queue, first.group)
            if max_depth is not None and ids:
                self._check_room(conn, queue, max_depth, now)
            if not unique:
                return [Inserted(i) for i in ids]
            if any(j.unique_key not in held and j.unique_key not in inserted for j in todo):
                # Taken meanwhile by a writer this transaction could not see
                # (OR IGNORE kept the insert from failing): read the holders.
                held = dict(conn.execute(_sql.KEY_HOLDERS, {"queue": queue, "keys": keys}))
            out = []
            seen: set[str] = set()
            for job in jobs:
                key = job.unique_key
                assert key is not None
                created = key in inserted and key not in seen
                seen.add(key)
                holder = inserted[key] if key in inserted else held[key]
                out.append(Inserted(int(holder), created))
            return out

        if unique and (first.replace or first.debounce_s is not None):
            if tx is None and len(jobs) == 1 and not grouped:
                # The common case, a pending holder: one statement in
                # autocommit (a 10,000-times debounced key writes one row).
                held = self._write(
                    None, lambda conn: self._update_holder(conn, queue, first), single=True
                )
                if held is not None:
                    return [Inserted(held, False)]

            # each item in order, so a key repeated in one call is
            # replaced by its later items.
            def upsert(conn: sqlite3.Connection) -> list[Inserted]:
                out: list[Inserted] = []
                for job in jobs:
                    holder = self._update_holder(conn, queue, job)
                    out.extend(
                        [Inserted(holder, False)] if holder is not None else many(conn, [job])
                    )
                return out

            return self._write(tx, upsert)

        return self._write(tx, many)

    def _update_holder(self, conn: sqlite3.Connection, queue: str, job: NewJob) -> int | None:
        """Q-29: replace or debounce the pending holder of *job*'s key, in one
        statement; its id, or ``None`` when no pending holder that can still
        run holds the key (then the insert path decides, as Q-23 says). The
        commit wakes blocked claims (every commit does, docs/adr/0003)."""
        now = now_us()
        params = insert_params(queue, job, now)
        params["max_wait_us"] = None if job.max_wait_s is None else micros(job.max_wait_s)
        sql = _sql.REPLACE_HOLDER if job.replace else _sql.DEBOUNCE_HOLDER
        row = conn.execute(sql, params).fetchone()
        if row is None:
            return None
        if row[1] is not None and row[2] is not None:
            # a new time or priority may change which rows of its group
            # hold the slots.
            self._rebalance(conn, queue, row[1])
        return int(row[0])

    @staticmethod
    def _hold_back(conn: sqlite3.Connection, job: NewJob, ids: list[int], now: int) -> bool:
        """WF-1, WF-3: the rows *ids* just written wait for their unfinished
        parents, or die at once when a parent is dead; ``False`` when every
        parent has finished (the rows stay as written, ready as usual)."""
        parents = json.dumps(list(job.after))
        unfinished = [int(r[0]) for r in conn.execute(_sql.PARENTS_UNFINISHED, {"ids": parents})]
        dead = [int(r[0]) for r in conn.execute(_sql.PARENTS_DEAD, {"ids": parents})]
        if not unfinished and not dead:
            return False
        mine = json.dumps(ids)
        if dead:
            params = {"ids": mine, "parent": dead[0], "now": now}
            conn.execute(_sql.JOBS_TO_DEAD_DEP, params)
        else:
            delay_us = None if job.run_at is not None else micros(job.delay_s)
            params = {"ids": mine, "delay_us": delay_us, "unfinished": len(unfinished)}
            conn.execute(_sql.JOBS_TO_WAITING, params)
        # The parents not finished: what a redrive counts the job back in on.
        conn.execute(_sql.INSERT_DEPS, {"parents": json.dumps(unfinished + dead), "ids": mine})
        conn.execute(_sql.DELETE_JOB_IDS, {"ids": mine})
        return True

    @classmethod
    def _finished(cls, conn: sqlite3.Connection, ids: list[int], now: int) -> None:
        """WF-2: jobs *ids* were acked; each child whose last unfinished
        parent this was is released into the claim's table, in this
        transaction (the commit wakes claimers: the watcher sees it)."""
        params = {"ids": json.dumps(ids)}
        rows = conn.execute(_sql.CHILDREN_FINISHED, params).fetchall()
        if not rows:
            return
        conn.execute(_sql.DELETE_DEPS_OF, params)
        ready = [int(r[0]) for r in rows if int(r[1]) <= 0]
        if ready:
            cls._release_waiting(conn, ready, now)

    @classmethod
    def _release_waiting(cls, conn: sqlite3.Connection, ids: list[int], now: int) -> None:
        params = {"ids": json.dumps(ids), "now": now}
        moved = conn.execute(_sql.RELEASE_WAITING, params).fetchall()
        conn.execute(_sql.DELETE_WAITING_IDS, params)
        grouped = [int(r[0]) for r in moved if r[2] is not None]
        if grouped:
            conn.execute(_sql.PARK_NEW, {"ids": json.dumps(grouped)})
            cls._rebalance_rows_static(conn, [(r[1], r[2]) for r in moved])

    @classmethod
    def _failed(cls, conn: sqlite3.Connection, ids: list[int], now: int) -> None:
        """WF-3: jobs *ids* died or were cancelled; every job waiting on one
        of them dies, transitively, in this transaction. Each round moves
        one generation out of the waiting table, so the work is one pass
        over the jobs that die (each at most once), never over others."""
        frontier = ids
        while frontier:
            params = {"ids": json.dumps(frontier), "now": now}
            died = [int(r[0]) for r in conn.execute(_sql.WAITING_TO_DEAD, params).fetchall()]
            if died:
                conn.execute(_sql.DELETE_WAITING_IDS, {"ids": json.dumps(died)})
            frontier = died

    def _failed_rows(self, conn: sqlite3.Connection, rows: list[Any], now: int) -> None:
        """:meth:`_failed` for the ``(id, grp)`` rows a move to dead returned."""
        if rows:
            self._failed(conn, [int(r[0]) for r in rows], now)

    @staticmethod
    def _rebalance(conn: sqlite3.Connection, queue: str, group: str) -> None:
        """Q-25: a group's slots (its claimed and unparked rows) go to its
        best rows, never more than its limit: unpark the best parked row
        while a slot is free, park the worst waiting row while too many hold
        one, and swap the two when a parked row comes first. "Best" is a row
        ready now before one that waits (a job waiting on a delay or a
        retry's backoff holds no slot another could use), then claim order.
        Each step reads O(limit) index entries of this group, plus the
        parked rows of higher priority that are not ready yet."""
        now = now_us()
        params = {"queue": queue, "grp": group, "now": now}

        def first(*statements: str) -> Any:
            for sql in statements:
                row = conn.execute(sql, params).fetchone()
                if row is not None:
                    return row
            return None

        for _ in range(10_000):  # each step settles one row; a few suffice
            best = first(_sql.GROUP_BEST_PARKED_READY, _sql.GROUP_BEST_PARKED)
            worst = first(_sql.GROUP_WORST_WAITING_LATER, _sql.GROUP_WORST_WAITING)
            limit = int(best[3]) if best is not None else None
            if worst is not None and (limit is None or int(worst[3]) < limit):
                limit = int(worst[3])
            if limit is None:
                return
            (holders,) = conn.execute(_sql.GROUP_HOLDERS, {**params, "n": limit + 1}).fetchone()
            if best is not None and holders < limit:
                conn.execute(_sql.SET_PARKED, {"id": best[0], "parked": 0})
            elif worst is not None and holders > limit:
                conn.execute(_sql.SET_PARKED, {"id": worst[0], "parked": 1})
            elif best is not None and worst is not None and _before(best, worst, now):
                conn.execute(_sql.SET_PARKED, {"id": worst[0], "parked": 1})
                conn.execute(_sql.SET_PARKED, {"id": best[0], "parked": 0})
            else:
                return

    def _rebalance_rows(self, conn: sqlite3.Connection, queue: str, rows: list[Any]) -> None:
        """Rebalance every group that *rows* (``(..., grp)`` last) left a slot in."""
        for group in {r[-1] for r in rows if r[-1] is not None}:
            self._rebalance(conn, queue, group)

    def _free_stale_keys(self, conn: sqlite3.Connection, queue: str, keys: str, now: int) -> None:
        """Q-23: a key held by a job that can never run again is freed."""
        params = {"queue": queue, "keys": keys, "now": now}
        conn.execute(_sql.STALE_KEYS_TO_DEAD, params)
        gone = conn.execute(_sql.STALE_KEYS_DELETE, params).fetchall()
        self._rebalance_rows(conn, queue, gone)
        self._failed_rows(conn, gone, now)  # WF-3

    def _check_room(self, conn: sqlite3.Connection, queue: str, max_depth: int, now: int) -> None:
        """Q-24, after the insert: at most *max_depth* unfinished jobs, counted
        on at most max_depth + 1 index entries; rows that can never run again
        go to dead first. Raising rolls the insert back."""
        params = {"queue": queue, "now": now}
        if conn.execute(_sql.EXPIRED_ANY, params).fetchone()[0]:
            conn.execute(_sql.EXPIRED_TO_DEAD, {**params, "last_error": "expired"})
            gone = conn.execute(_sql.EXPIRED_DELETE, params).fetchall()
            self._rebalance_rows(conn, queue, gone)
            self._failed_rows(conn, gone, now)  # WF-3
        if conn.execute(_sql.EXHAUSTED_ANY, params).fetchone()[0]:
            self._exhaust(conn, queue, now)
        (count,) = conn.execute(
            _sql.COUNT_UNFINISHED, {"queue": queue, "n": max_depth + 1}
        ).fetchone()
        if count > max_depth:
            raise QueueFull(queue, max_depth)

    # -------------------------------------------------------------------- claim

    def claim(
        self,
        queues: Sequence[str],
        worker_id: str,
        n: int,
        rate: RateSpec | None,
        idle: bool,
        *,
        full: bool = False,
    ) -> list[ClaimRow]:
        if idle and not self._anything_to_do(queues):
            return []  # nothing claimable: no write lock taken (LESSONS)
        if len(queues) == 1 and rate is None and not full:
            return self._claim_one_queue(queues[0], worker_id, n)

        def run(conn: sqlite3.Connection) -> list[ClaimRow]:
            now = now_us()
            budget = n if rate is None else min(n, self._rate_room(conn, rate, now))
            rows: list[Any] = []
            for queue in queues:
                if budget <= len(rows):
                    break
                self._clear(conn, queue, now)
                params: dict[str, Any] = {"queue": queue, "now": now, "worker_id": worker_id}
                rows.extend(self._claim_levels(conn, params, budget - len(rows)))
            if rate is not None and rows:
                self._rate_take(conn, rate, now, len(rows))
            return [_claim_row(r) for r in rows]

        return self._write(None, run)

    def _claim_one_queue(self, queue: str, worker_id: str, n: int) -> list[ClaimRow]:
        """The common claim: the top priority level in one autocommit
        statement, which also says whether the queue holds anything a claim
        must clear first. When it filled the claim, that is all (a flagged
        queue is cleared by a second write before this returns, Q-12, Q-25);
        when it took fewer, the full claim takes the rest from the levels
        below, after a pure read says there is anything to take."""

        def claim(conn: sqlite3.Connection) -> list[Any]:
            params = {"queue": queue, "now": now_us(), "worker_id": worker_id, "n": n}
            return conn.execute(_sql.CLAIM_FLAGGED, params).fetchall()

        rows = self._write(None, claim, single=True)
        got = [_claim_row(r[:-1]) for r in rows]
        # The claims above are committed: a busy follow-up must not hide them
        # from the caller (they would wait out their visibility timeout). The
        # caller gets what it has; the next claim clears or takes the rest.
        try:
            if len(rows) < n:
                return got + self.claim((queue,), worker_id, n - len(rows), None, True, full=True)
            if rows[0][-1]:
                self._write(None, lambda conn: self._clear(conn, queue, now_us()))
        except TransientError:
            if not got:
                raise
        return got

    def _clear(self, conn: sqlite3.Connection, queue: str, now: int) -> None:
        """What a claim clears first: lapsed claims with no budget left go to
        dead (Q-12), and so do expired rows holding a group's slot (Q-25)."""
        exhausted, group_expired = conn.execute(
            _sql.EXHAUSTED_ANY, {"queue": queue, "now": now}
        ).fetchone()
        if exhausted:
            self._exhaust(conn, queue, now)
        if group_expired:
            self._expire_group_holders(conn, queue, now)

    @staticmethod
    def _claim_levels(conn: sqlite3.Connection, params: dict[str, Any], want: int) -> list[Any]:
        """Up to *want* rows of one queue in claim order: the top priority
        level first, then each level below while more are wanted, one index
        seek per level (C-8; see ``_sql.CLAIM``)."""
        rows: list[Any] = conn.execute(_sql.CLAIM, {**params, "n": want}).fetchall()
        if len(rows) >= want:
            return rows
        if rows:
            level = rows[0][_sql.CLAIM_PRIORITY_COLUMN]
        else:
            top = conn.execute(_sql.TOP_PRIORITY, params).fetchone()
            if top is None:
                return rows
            level = top[0]
        while len(rows) < want:
            below = conn.execute(_sql.NEXT_PRIORITY, {**params, "p": level}).fetchone()
            if below is None:
                break
            level = below[0]
            at = {**params, "p": level, "n": want - len(rows)}
            rows.extend(conn.execute(_sql.CLAIM_AT, at).fetchall())
        return rows

    def _anything_to_do(self, queues: Sequence[str]) -> bool:
        now = now_us()
        with self._read() as conn:
            for queue in queues:
                claimable, exhausted = conn.execute(
                    _sql.CLAIM_PRECHECK, {"queue": queue, "now": now}
                ).fetchone()
                if claimable or exhausted:
                    return True
        return False

    def _exhaust(self, conn: sqlite3.Connection, queue: str, now: int) -> int:
        """Q-12: lapsed claims with no budget left move to dead."""
        params = {"queue": queue, "now": now, "last_error": _MAX_ERROR}
        conn.execute(_sql.EXHAUSTED_TO_DEAD, params)
        gone = conn.execute(_sql.EXHAUSTED_DELETE, {"queue": queue, "now": now}).fetchall()
        self._rebalance_rows(conn, queue, gone)
        self._failed_rows(conn, gone, now)  # WF-3
        return len(gone)

    def _expire_group_holders(self, conn: sqlite3.Connection, queue: str, now: int) -> None:
        """Q-25: waiting rows of a limited group past ``expires_at`` can never
        run, so they must not keep their group's slots: they go to dead as
        ``"expired"`` (as a sweep would move them, Q-15), and each group
        rebalances."""
        params = {"queue": queue, "now": now, "last_error": "expired"}
        conn.execute(_sql.GROUP_EXPIRED_TO_DEAD, params)
        gone = conn.execute(_sql.GROUP_EXPIRED_DELETE, {"queue": queue, "now": now}).fetchall()
        self._rebalance_rows(conn, queue, gone)
        self._failed_rows(conn, gone, now)  # WF-3

    def next_ready(self, queues: Sequence[str]) -> float | None:
        now = now_us()
        soonest: int | None = None
        with self._read() as conn:
            for queue in queues:
                times = conn.execute(_sql.NEXT_READY, {"queue": queue, "now": now}).fetchone()
                for at in times or ():  # no row: the queue is paused
                    if at is not None and (soonest is None or at < soonest):
                        soonest = at
        return None if soonest is None else (soonest - now) / 1_000_000

    # ----------------------------------------------------------- rate limits

    @staticmethod
    def _rate_room(conn: sqlite3.Connection, rate: RateSpec, now: int) -> int:
        """How many units *rate* grants now (R-1, GCRA)."""
        row = conn.execute(_sql.RATE_TAT, {"name": rate.name}).fetchone()
        interval = rate.interval_s * 1_000_000
        base = now if row is None else max(float(row[0]), now)
        return max(0, math.floor((now + rate.burst * interval - base) / interval + 1e-9))

    @staticmethod
    def _rate_take(conn: sqlite3.Connection, rate: RateSpec, now: int, units: int) -> None:
        row = conn.execute(_sql.RATE_TAT, {"name": rate.name}).fetchone()
        base = now if row is None else max(float(row[0]), now)
        tat = base + units * rate.interval_s * 1_000_000
        conn.execute(_sql.SET_RATE_TAT, {"name": rate.name, "tat": tat})

    def acquire_rate(self, rate: RateSpec, n: int) -> float:
        interval = rate.interval_s * 1_000_000
        cost = n * interval
        burst_t = rate.burst * interval

        def run(conn: sqlite3.Connection) -> float:
            now = now_us()
            params = {"name": rate.name, "now": now, "cost": cost, "burst_t": burst_t}
            ((tat, granted),) = conn.execute(_sql.ACQUIRE_RATE, params).fetchall()
            if granted:
                return 0.0
            return max((float(tat) + cost - burst_t - now) / 1_000_000, 1e-6)

        return self._write(None, run, single=True)

    # -------------------------------------------------------------- handle ops

    def ack(
        self,
        tx: sqlite3.Connection | None,
        fences: Sequence[Fence],
        results: Sequence[str | None] | None = None,
    ) -> list[bool]:
        grouped = any(f.group is not None for f in fences)
        if len(fences) == 1:
            fence = fences[0]
            if tx is None and results is None and not grouped:
                # Most acks: one statement in autocommit, no BEGIN/COMMIT.
                def alone(conn: sqlite3.Connection) -> bool:
                    params = {"id": fence.id, "claim": fence.claim, "now": now_us()}
                    return bool(conn.execute(_sql.ACK_ALONE, params).fetchall())

                if self._write(None, alone, single=True):
                    return [True]

            def one(conn: sqlite3.Connection) -> list[bool]:
                params = {"id": fence.id, "claim": fence.claim, "now": now_us()}
                if results is not None:  # RS-1, in the ack's transaction
                    conn.execute(_sql.ACK_KEEP, {**params, "result": results[0]})
                rows = conn.execute(_sql.ACK, params).fetchall()
                if rows and grouped:
                    self._rebalance_rows(conn, rows[0][0], rows)
                if rows:
                    self._finished(conn, [fence.id], params["now"])  # WF-2
                return [bool(rows)]

            # Not one statement: the release of waiting children (WF-2) must
            # commit with the ack.
            return self._write(tx, one)

        def many(conn: sqlite3.Connection) -> list[bool]:
            now = now_us()
            params = {"fences": json.dumps([[f.id, f.claim] for f in fences]), "now": now}
            if results is not None:  # RS-1, in the ack's transaction
                triples = [[f.id, f.claim, r] for f, r in zip(fences, results, strict=True)]
                conn.execute(_sql.ACK_MANY_KEEP, {**params, "fences": json.dumps(triples)})
            rows = conn.execute(_sql.ACK_MANY, params).fetchall()
            if rows:
                self._finished(conn, [int(r[0]) for r in rows], now)  # WF-2
            if grouped:
                for queue in {r[2] for r in rows}:
                    self._rebalance_rows(conn, queue, [r for r in rows if r[2] == queue])
            # Matched by (id, claim), each once: an older claim of a job
            # whose newer claim is in the same call, or the same handle
            # given twice, lands once.
            gone = {(int(r[0]), int(r[1])) for r in rows}
            landed = []
            for f in fences:
                key = (f.id, f.claim)
                landed.append(key in gone)
                gone.discard(key)
            return landed

        return self._write(tx, many)

    def heartbeat(self, fence: Fence, extend_s: float) -> datetime | None:
        def run(conn: sqlite3.Connection) -> datetime | None:
            now = now_us()
            params = {"id": fence.id, "claim": fence.claim, "now": now}
            params["deadline"] = now + micros(extend_s)
            rows = conn.execute(_sql.HEARTBEAT, params).fetchall()
            return to_datetime(rows[0][0]) if rows else None

        return self._write(None, run, single=True)

    def progress(self, tx: sqlite3.Connection | None, fence: Fence, value: str | None) -> bool:
        """Q-28: the checkpoint, fenced like a heartbeat (the deadline stays)."""

        def run(conn: sqlite3.Connection) -> bool:
            params = {"id": fence.id, "claim": fence.claim, "now": now_us(), "progress": value}
            return conn.execute(_sql.PROGRESS, params).rowcount == 1

        return self._write(tx, run, single=True)

    def retry(
        self, tx: sqlite3.Connection | None, fence: Fence, delay_s: float, error: str
    ) -> bool:
        def run(conn: sqlite3.Connection) -> bool:
            now = now_us()
            params: dict[str, Any] = {"id": fence.id, "claim": fence.claim, "now": now}
            params["run_at"] = now + micros(delay_s)
            rows = conn.execute(_sql.RETRY_PENDING, params).fetchall()
            if rows:
                if fence.group is not None:
                    # a job waiting on backoff holds no slot of its own.
                    conn.execute(_sql.PARK_NEW, {"ids": json.dumps([fence.id])})
                    self._rebalance(conn, rows[0][0], fence.group)
                return True
            # No budget left (or the claim is no longer valid): Q-10.
            return self._to_dead(conn, fence, error, now)

        return self._write(tx, run)

    def fail(self, tx: sqlite3.Connection | None, fence: Fence, error: str) -> bool:
        return self._write(tx, lambda conn: self._to_dead(conn, fence, error, now_us()))

    def release(self, fence: Fence) -> bool:
        def run(conn: sqlite3.Connection) -> bool:
            params = {"id": fence.id, "claim": fence.claim, "now": now_us()}
            return bool(conn.execute(_sql.RELEASE, params).fetchall())

        return self._write(None, run, single=True)

    @staticmethod
    def _to_dead(conn: sqlite3.Connection, fence: Fence, error: str, now: int) -> bool:
        params = {"id": fence.id, "claim": fence.claim, "now": now, "last_error": error}
        if conn.execute(_sql.FENCED_TO_DEAD, params).rowcount != 1:
            return False
        gone = conn.execute(_sql.DELETE_BY_ID, {"id": fence.id}).fetchall()
        if gone:
            QueueOps._rebalance_rows_static(conn, gone)
        QueueOps._failed(conn, [fence.id], now)  # WF-3
        return True

    @staticmethod
    def _rebalance_rows_static(conn: sqlite3.Connection, rows: list[Any]) -> None:
        for queue, group in {(r[0], r[1]) for r in rows if r[1] is not None}:
            QueueOps._rebalance(conn, queue, group)

    # ----------------------------------------------------------------- operator

    def cancel(self, tx: sqlite3.Connection | None, queue: str, job_id: int) -> bool:
        def run(conn: sqlite3.Connection) -> bool:
            params = {"id": job_id, "queue": queue}
            gone = conn.execute(_sql.CANCEL, params).fetchall()
            if not gone:  # a waiting job (WF-1) is cancelled as a pending one
                gone = conn.execute(_sql.CANCEL_WAITING, params).fetchall()
                if gone:
                    conn.execute(_sql.DELETE_DEPS_OF_CHILD, params)
            self._rebalance_rows_static(conn, gone)
            if gone:
                self._failed(conn, [job_id], now_us())  # WF-3
            return bool(gone)

        return self._write(tx, run)

    # ---- Q-27 pause, O-6 run now (docs/adr/0023)

    def set_paused(self, tx: sqlite3.Connection | None, queue: str, paused: bool) -> bool:
        # A resume wakes blocked claims by its commit, as every commit does.
        def run(conn: sqlite3.Connection) -> bool:
            params = {"queue": queue, "now": now_us()}
            return conn.execute(_sql.PAUSE if paused else _sql.RESUME, params).rowcount == 1

        return self._write(tx, run, single=True)

    def is_paused(self, queue: str) -> bool:
        with self._read() as conn:
            return bool(conn.execute(_sql.IS_PAUSED, {"queue": queue}).fetchone()[0])

    def run_now(self, tx: sqlite3.Connection | None, queue: str, job_id: int) -> bool:
        def run(conn: sqlite3.Connection) -> bool:
            params = {"id": job_id, "queue": queue, "now": now_us()}
            rows = conn.execute(_sql.RUN_NOW, params).fetchall()
            for (group,) in rows:
                if group is not None:  # ready rows hold the group's slots first
                    self._rebalance(conn, queue, group)
            return bool(rows)

        return self._write(tx, run)

    # ---- end Q-27, O-6

    def parent_results(self, tx: sqlite3.Connection | None, job_id: int) -> dict[int, str]:
        def run(conn: sqlite3.Connection) -> dict[int, str]:
            params = {"id": job_id, "now": now_us()}
            return {int(i): r for i, r in conn.execute(_sql.PARENT_RESULTS, params)}

        if tx is not None:
            return self._write(tx, run, single=True)  # a read in the caller's transaction
        with self._read() as conn:
            return run(conn)

    def get_job(self, queue: str, job_id: int) -> JobRow | None:
        params = {"id": job_id, "queue": queue, "now": now_us()}
        with self._read() as conn:
            row = conn.execute(_sql.GET_JOB, params).fetchone()
            if row is None:
                return None
            job = job_row(row, to_datetime)
            if job.state == "waiting":  # WF-1: the parents still unfinished
                parents = conn.execute(_sql.WAITING_ON, {"id": job_id}).fetchall()
                job = replace(job, waiting_on=tuple(int(p[0]) for p in parents))
        return job

    def get_result(
        self, tx: sqlite3.Connection | None, queue: str, job_id: int
    ) -> ResultRow | None:
        def run(conn: sqlite3.Connection) -> ResultRow | None:
            params = {"id": job_id, "queue": queue, "now": now_us()}
            row = conn.execute(_sql.GET_RESULT, params).fetchone()
            if row is None:
                return None
            return ResultRow(int(row[0]), row[1], row[2], row[3], to_datetime(row[4]))

        if tx is not None:
            return self._write(tx, run, single=True)  # a read in the caller's transaction
        with self._read() as conn:
            return run(conn)

    def list_jobs(self, queue: str, state: JobState, limit: int, after_id: int) -> list[JobRow]:
        params = {"queue": queue, "state": state.value, "after": after_id, "limit": limit}
        if state is JobState.DONE:
            params["now"] = now_us()
            sql = _sql.LIST_DONE
        elif state is JobState.WAITING:
            with self._read() as conn:
                jobs = [job_row(r, to_datetime) for r in conn.execute(_sql.LIST_WAITING, params)]
                return [
                    replace(
                        j,
                        waiting_on=tuple(
                            int(p[0]) for p in conn.execute(_sql.WAITING_ON, {"id": j.id})
                        ),
                    )
                    for j in jobs
                ]
        else:
            sql = _sql.LIST_DEAD if state is JobState.DEAD else _sql.LIST_LIVE
        with self._read() as conn:
            return [job_row(r, to_datetime) for r in conn.execute(sql, params)]

    def queue_stats(self, queue: str | None) -> list[QueueStats]:
        now = now_us()
        with self._read() as conn:
            if queue is not None:
                row = conn.execute(_sql.STATS, {"queue": queue, "now": now}).fetchone()
                pending, scheduled, processing, dead, oldest, waiting = row
                (paused,) = conn.execute(_sql.IS_PAUSED, {"queue": queue}).fetchone()
                return [
                    QueueStats(
                        queue,
                        pending,
                        scheduled,
                        processing,
                        dead,
                        _opt_time(oldest),
                        waiting,
                        bool(paused),
                    )
                ]
            rows = conn.execute(_sql.QUEUE_STATS, {"now": now}).fetchall()
            held = {str(r[0]) for r in conn.execute(_sql.PAUSED_QUEUES)}
        stats = {
            q: QueueStats(q, int(p), int(s), int(r), int(d), _opt_time(o), int(w), q in held)
            for q, p, s, r, d, o, w in rows
        }
        # a paused queue is listed even when it holds no rows.
        for q in held - stats.keys():
            stats[q] = QueueStats(q, 0, 0, 0, 0, None, 0, True)
        return [stats[q] for q in sorted(stats)]

    def sweep(self, queue: str) -> SweepResult:
        def run(conn: sqlite3.Connection) -> SweepResult:
            now = now_us()
            params = {"queue": queue, "now": now}
            conn.execute(_sql.EXPIRED_TO_DEAD, {**params, "last_error": "expired"})
            gone = conn.execute(_sql.EXPIRED_DELETE, params).fetchall()
            self._rebalance_rows(conn, queue, gone)
            self._failed_rows(conn, gone, now)  # WF-3
            expired = len(gone)
            exhausted = self._exhaust(conn, queue, now)
            purged = conn.execute(_sql.PURGE_RETAINED, params).rowcount
            results = conn.execute(_sql.PURGE_RESULTS, params).rowcount
            return SweepResult(expired=expired, purged=purged, exhausted=exhausted, results=results)

        return self._write(None, run)

    def redrive(
        self, tx: sqlite3.Connection | None, queue: str, job_ids: Sequence[int] | None
    ) -> int:
        ids = None if job_ids is None else json.dumps(list(job_ids))

        def run(conn: sqlite3.Connection) -> int:
            params = {"queue": queue, "ids": ids, "now": now_us()}
            rows = conn.execute(_sql.REDRIVE, params).fetchall()
            moved = [int(r[0]) for r in rows]
            if moved:
                # WF-3: the jobs that died by these jobs' cascade come back
                # waiting on them again (before the rows below leave dead).
                self._revive_victims(conn, moved)
                conn.execute(_sql.DELETE_DEAD_IDS, {"ids": json.dumps(moved)})
                grouped = [i for i, g in rows if g is not None]
                if grouped:
                    conn.execute(_sql.PARK_NEW, {"ids": json.dumps(grouped)})
                    self._rebalance_rows(conn, queue, rows)
            return len(moved)

        return self._write(tx, run)

    @staticmethod
    def _revive_victims(conn: sqlite3.Connection, parents: list[int]) -> None:
        """WF-3: the still-dead jobs that died by *parents*' cascade go back to
        waiting, counting their unfinished parents again, transitively; each
        job moves at most once (it leaves the dead table)."""
        frontier = parents
        while frontier:
            victims = [
                int(r[0]) for r in conn.execute(_sql.CASCADE_VICTIMS, {"ids": json.dumps(frontier)})
            ]
            if victims:
                back = json.dumps(victims)
                conn.execute(_sql.DEAD_TO_WAITING, {"ids": back})
                conn.execute(_sql.DELETE_DEAD_IDS, {"ids": back})
            frontier = victims

    def purge_dead(
        self,
        tx: sqlite3.Connection | None,
        queue: str,
        job_ids: Sequence[int] | None,
        older_than_s: float | None,
    ) -> int:
        ids = None if job_ids is None else json.dumps(list(job_ids))

        def run(conn: sqlite3.Connection) -> int:
            cutoff = None if older_than_s is None else now_us() - micros(older_than_s)
            params = {"queue": queue, "ids": ids, "cutoff": cutoff}
            return conn.execute(_sql.PURGE_DEAD, params).rowcount

        return self._write(tx, run, single=True)
