"""Every operation of the executor, once, as an :class:`~._plan.Op` (docs/adr/0008).

:class:`OpBook` turns the arguments of each seam operation
(:class:`alkstore.engine.Executor`) into a plan over the statements of
:mod:`._sql` and maps the rows that come back into the kit's named rows. The
sync and async executors run the same ``Op`` objects; nothing here does I/O.
"""

from __future__ import annotations

import hashlib
import math
import secrets
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any

import psycopg

from alkstore.engine import (
    SCHEDULES_WAKE_KEY,
    ClaimRow,
    EventRow,
    Fence,
    Fire,
    Inserted,
    JobRow,
    NewJob,
    RateSpec,
    ResultRow,
    ScheduleRow,
    claim_row,
    job_row,
    schedule_row,
    stream_stats_of,
)
from alkstore.engine.results import RESULT_WAKE_PREFIX
from alkstore.errors import QueueFull, TransientError
from alkstore.types import (
    JobState,
    LockInfo,
    QueueStats,
    StreamStats,
    SweepResult,
    WorkerCount,
    WorkerInfo,
)

from . import _sql
from ._plan import ALL, ONE, ROWCOUNT, Op, Plan, Q

__all__ = ["OpBook", "advisory_key", "user_channel", "utc", "wake_channel"]

#: How many partition widths ahead the sweep keeps the partitions of results
#: and dead letters (RS-3, Q-16; docs/adr/0018, 0026), and at least 15
#: minutes' worth: a sweep at least this often keeps every row out of the
#: default partitions.
RESULT_HOURS_AHEAD = 6
_UPKEEP_SAVEPOINT = "SAVEPOINT alkstore_results"
_UPKEEP_RELEASE = "RELEASE SAVEPOINT alkstore_results"
_UPKEEP_ROLLBACK = "ROLLBACK TO SAVEPOINT alkstore_results"
# The partitions' DDL waits at most this long for its locks, so that acks
# queue behind it no longer than that; the old value is restored after.
_UPKEEP_LOCK_TIMEOUT = """
WITH old AS MATERIALIZED (SELECT current_setting('lock_timeout') AS v)
SELECT v FROM old, LATERAL set_config('lock_timeout', '100ms', true) s
"""
_UPKEEP_RESTORE = "SELECT set_config('lock_timeout', %(value)s::text, true)"

# A holder that vanished between the insert and the read of holders (acked
# meanwhile) frees its key: the insert is tried again, this many times.
_UNIQUE_ROUNDS = 3


def utc(value: datetime) -> datetime:
    """A timestamp from the server as an aware UTC datetime (C-4), whatever
    the session's ``TimeZone``."""
    return value.astimezone(timezone.utc)


def _opt_utc(value: datetime | None) -> datetime | None:
    return None if value is None else value.astimezone(timezone.utc)


def wake_channel(schema: str) -> str:
    """The NOTIFY channel of the wakes of *schema*: one per schema, so stores
    on different schemas of a database do not wake each other."""
    return "alkstore_wake_" + hashlib.sha256(schema.encode()).hexdigest()[:16]


def user_channel(schema: str, channel: str) -> str:
    """The PostgreSQL channel of notification channel *channel*: a hash of
    both names, so that any name of up to 200 characters fits the 63-byte
    identifier limit and two schemas never share a channel."""
    digest = hashlib.sha256(f"{schema}\x00{channel}".encode()).hexdigest()
    return "alkn_" + digest[:40]


def advisory_key(purpose: str, *names: str) -> int:
    """A signed 64-bit advisory-lock key for *purpose* over *names*."""
    text = "\x00".join((f"alkstore.{purpose}", *names))
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big", signed=True)


# ------------------------------------------------------------------ row mapping


def _claim_row(row: Sequence[Any]) -> ClaimRow:
    return claim_row(row, utc)


def _schedule_row(row: Sequence[Any]) -> ScheduleRow:
    return schedule_row(row, utc)


# ------------------------------------------------------------------- plans


def _landed(fences: Sequence[Fence], rows: Sequence[Sequence[Any]]) -> list[bool]:
    """One result per fence from the ``(id, claims, ...)`` rows an ack
    deleted: matched by (id, claim), each once, so an older claim of a job
    whose newer claim is in the same call, or one handle given twice, lands
    once (Q-7, Q-9)."""
    gone = {(int(r[0]), int(r[1])) for r in rows}
    results = []
    for f in fences:
        results.append((f.id, f.claim) in gone)
        gone.discard((f.id, f.claim))
    return results


def _count(stmt: str, params: dict[str, Any]) -> Plan[int]:
    count: int = yield Q(stmt, params, ROWCOUNT)
    return count


def _upkeep(query: Q) -> Plan[Any]:
    """*query*, partition DDL, in a savepoint under a short lock timeout: its
    row, or ``None`` when this role may not run DDL or a lock was not free
    at once (nothing of it is left; the caller deletes rows instead)."""
    yield Q(_UPKEEP_SAVEPOINT, None, kind="control")
    try:
        (old,) = yield Q(_UPKEEP_LOCK_TIMEOUT, {}, ONE)
        row = yield Q(query.text, query.params, ONE)
        yield Q(_UPKEEP_RESTORE, {"value": old})
        yield Q(_UPKEEP_RELEASE, None, kind="control")
    except psycopg.Error:
        yield Q(_UPKEEP_ROLLBACK, None, kind="control")
        yield Q(_UPKEEP_RELEASE, None, kind="control")
        return None
    return row


class OpBook:
    """The operations of one store: its statements, wake channel and names."""

    def __init__(self, schema: str) -> None:
        self.schema = schema
        self.st = _sql.Statements(schema)
        self.wake = wake_channel(schema)

    # ------------------------------------------------------------- helpers

    def _job_params(self, queue: str, job: NewJob) -> dict[str, Any]:
        return {
            "queue": queue,
            "payload": job.payload,
            "priority": job.priority,
            "run_at": job.run_at,
            "delay_s": job.delay_s,
            "max_attempts": job.max_attempts,
            "visibility_timeout_s": job.visibility_timeout_s,
            "backoff_base_s": job.backoff_base_s,
            "dead_letter_retention_s": job.dead_letter_retention_s,
            "expires_s": job.expires_s,
            "grp": job.group,
            "group_limit": job.group_limit,
            "trace_context": job.trace_context,
            "result_ttl_s": job.result_ttl_s,
            "parents": list(job.after) if job.after else None,
            "wake": self.wake,
        }

    @staticmethod
    def _fence(fence: Fence) -> dict[str, Any]:
        return {"id": fence.id, "claim": fence.claim}

    # ----------------------------------------------------------------- queues

    def insert_jobs(
        self, queue: str, jobs: Sequence[NewJob], max_depth: int | None
    ) -> Op[list[Inserted]]:
        """Q-1, Q-23, Q-24. Plain inserts are one statement; unique ones one
        more read when a key was held; bounded ones take the queue's depth
        lock and count, all in one transaction (or savepoint)."""
        first = jobs[0]
        params = self._job_params(queue, first)
        make: Callable[[], Plan[list[Inserted]]]
        if first.after:
            # The plain insert when every parent has finished (it keeps the
            # parents for WF-4: _job_params reads them from the job).
            plain = self._insert_plain_or_many(queue, jobs, params, max_depth)
            return Op(lambda: self._insert_after(first.after, jobs, params, plain), atomic=True)
        if first.unique_key is not None and (first.replace or first.debounce_s is not None):
            # a pending holder found is one statement; several items,
            # or a group to rebalance, commit together.
            make = lambda: self._upsert_unique(queue, jobs, params)  # noqa: E731
            if max_depth is None:
                return Op(make, atomic=len(jobs) > 1 or first.group_limit is not None)
        elif first.unique_key is not None:
            make = lambda: self._insert_unique(queue, jobs, params)  # noqa: E731
        elif len(jobs) == 1:
            params["payload"] = first.payload
            make = lambda: self._insert_plain(self.st.enqueue, params)  # noqa: E731
        else:
            params["payloads"] = [j.payload for j in jobs]
            make = lambda: self._insert_plain(self.st.enqueue_many, params)  # noqa: E731
        if max_depth is None:
            return Op(make)
        return Op(lambda: self._bounded(queue, max_depth, make()), atomic=True)

    def insert_rows(self, batches: Sequence[tuple[str, Sequence[NewJob]]]) -> Op[list[int]]:
        """Producer group commit: the plain enqueues of several callers as
        one statement (and one commit); the ids, in the callers' order."""
        jobs = [(queue, job) for queue, group in batches for job in group]
        params: dict[str, Any] = {
            "queue": [q for q, _ in jobs],
            "payload": [j.payload for _, j in jobs],
            "priority": [j.priority for _, j in jobs],
            "run_at": [j.run_at for _, j in jobs],
            "delay_s": [j.delay_s for _, j in jobs],
            "max_attempts": [j.max_attempts for _, j in jobs],
            "visibility_timeout_s": [j.visibility_timeout_s for _, j in jobs],
            "backoff_base_s": [j.backoff_base_s for _, j in jobs],
            "dead_letter_retention_s": [j.dead_letter_retention_s for _, j in jobs],
            "expires_s": [j.expires_s for _, j in jobs],
            "grp": [j.group for _, j in jobs],
            "group_limit": [j.group_limit for _, j in jobs],
            "trace_context": [j.trace_context for _, j in jobs],
            "result_ttl_s": [j.result_ttl_s for _, j in jobs],
            "wake": self.wake,
        }

        def plan() -> Plan[list[int]]:
            rows = yield Q(self.st.enqueue_rows, params, ALL)
            return sorted(int(r[0]) for r in rows)

        return Op(plan)

    def _insert_plain_or_many(
        self, queue: str, jobs: Sequence[NewJob], params: dict[str, Any], max_depth: int | None
    ) -> Op[list[Inserted]]:
        make: Callable[[], Plan[list[Inserted]]]
        if len(jobs) == 1:
            one = {**params, "payload": jobs[0].payload}
            make = lambda: self._insert_plain(self.st.enqueue, one)  # noqa: E731
        else:
            many = {**params, "payloads": [j.payload for j in jobs]}
            make = lambda: self._insert_plain(self.st.enqueue_many, many)  # noqa: E731
        if max_depth is None:
            return Op(make)
        return Op(lambda: self._bounded(queue, max_depth, make()), atomic=True)

    def _insert_after(
        self,
        after: Sequence[int],
        jobs: Sequence[NewJob],
        params: dict[str, Any],
        plain: Op[list[Inserted]],
    ) -> Plan[list[Inserted]]:
        """WF-1, WF-3: with every parent finished, an enqueue as usual;
        else the jobs wait (or, after a dead parent, are written dead), and
        an edge per unfinished parent is written, all in one transaction."""
        ids = {"ids": list(after)}
        waiting = yield Q(self.st.parents_waiting, ids, ALL)
        live = yield Q(self.st.parents_live, ids, ALL)
        dead = yield Q(self.st.parents_dead, ids, ALL)
        unfinished = sorted({int(r[0]) for r in waiting} | {int(r[0]) for r in live})
        failed = [int(r[0]) for r in dead]
        if not unfinished and not failed:
            result: list[Inserted] = yield from plain.make()
            return result
        held = {**params, "payloads": [j.payload for j in jobs]}
        if failed:
            rows = yield Q(self.st.insert_dead_dep, {**held, "parent": failed[0]}, ALL)
        else:
            rows = yield Q(self.st.insert_waiting, {**held, "unfinished": len(unfinished)}, ALL)
        new = [int(r[0]) for r in rows]
        yield Q(self.st.insert_deps, {"parents": unfinished + failed, "ids": new})
        return [Inserted(i) for i in sorted(new)]

    def _insert_plain(self, stmt: str, params: dict[str, Any]) -> Plan[list[Inserted]]:
        rows = yield Q(stmt, params, ALL)
        return [Inserted(int(r[0])) for r in sorted(rows)]

    def _insert_unique(
        self, queue: str, jobs: Sequence[NewJob], params: dict[str, Any]
    ) -> Plan[list[Inserted]]:
        keys = [j.unique_key for j in jobs]
        created: dict[str, int] = {}
        held: dict[str, int] = {}
        todo = list(range(len(jobs)))
        for _ in range(_UNIQUE_ROUNDS):
            batch = {
                **params,
                "payloads": [jobs[i].payload for i in todo],
                "keys": [keys[i] for i in todo],
            }
            rows = yield Q(self.st.enqueue_unique, batch, ALL)
            for job_id, key, _ in rows:
                created[key] = int(job_id)
            missing = sorted({k for k in batch["keys"] if k not in created})
            if not missing:
                break
            rows = yield Q(self.st.key_holders, {"queue": queue, "keys": missing}, ALL)
            held.update((key, int(job_id)) for key, job_id in rows)
            # A holder gone since (acked, cancelled): its key is free; again.
            todo = [i for i in todo if keys[i] not in created and keys[i] not in held]
            if not todo:
                break
        else:
            raise TransientError("unique keys kept changing hands; retry the enqueue")
        out: list[Inserted] = []
        seen: set[str] = set()
        for key in keys:
            assert key is not None
            if key in created and key not in seen:
                out.append(Inserted(created[key], True))
            else:
                out.append(Inserted(created.get(key, held.get(key, 0)), False))
            seen.add(key)
        return out

    def _upsert_unique(
        self, queue: str, jobs: Sequence[NewJob], params: dict[str, Any]
    ) -> Plan[list[Inserted]]:
        """Q-29: each item in order (a key repeated in one call is replaced
        by its later items)."""
        out: list[Inserted] = []
        for job in jobs:
            one = yield from self._upsert_one(queue, job, params)
            out.append(one)
        return out

    def _upsert_one(self, queue: str, job: NewJob, params: dict[str, Any]) -> Plan[Inserted]:
        """Q-29 for one key: replace or debounce its pending holder; else the
        Q-23 insert (which frees a key held by a job that can never run
        again, and waits for a holder another transaction has not
        committed); when that finds the key held, a pending holder (just
        committed by another transaction) is replaced next round, a
        processing one is kept."""
        key = job.unique_key
        update = {
            **params,
            "payload": job.payload,
            "key": key,
            "max_wait_s": job.max_wait_s,
        }
        stmt = self.st.replace_holder if job.replace else self.st.debounce_holder
        insert = {**params, "payloads": [job.payload], "keys": [key]}
        for _ in range(_UNIQUE_ROUNDS):
            rows = yield Q(stmt, update, ALL)
            if rows:
                job_id, grp, group_limit = rows[0][:3]
                if grp is not None and group_limit is not None:
                    yield Q(self.st.rebalance_group, {"queue": queue, "grp": grp}, ONE)
                return Inserted(int(job_id), False)
            rows = yield Q(self.st.enqueue_unique, insert, ALL)
            if rows:
                return Inserted(int(rows[0][0]), True)
            held = yield Q(self.st.key_holder_state, {"queue": queue, "key": key}, ONE)
            if held is not None and held[1] != "pending":
                return Inserted(int(held[0]), False)
        raise TransientError("unique keys kept changing hands; retry the enqueue")

    def _bounded(
        self, queue: str, max_depth: int, inner: Plan[list[Inserted]]
    ) -> Plan[list[Inserted]]:
        """Q-24: one bounded enqueue of the queue at a time (the advisory
        lock lasts to the end of the transaction); stale rows to dead; the
        insert; then at most max_depth + 1 index entries counted. Raising
        rolls the transaction (or savepoint) back: nothing is written."""
        key = advisory_key("depth", self.schema, queue)
        yield Q(self.st.depth_lock, {"key": key})
        yield Q(self.st.bury_stale, {"queue": queue}, ONE)
        result = yield from inner
        if any(r.created for r in result):
            (count,) = yield Q(self.st.count_unfinished, {"queue": queue, "n": max_depth + 1}, ONE)
            if int(count) > max_depth:
                raise QueueFull(queue, max_depth)
        return result

    def claim(
        self,
        queues: Sequence[str],
        worker_id: str,
        n: int,
        rate: RateSpec | None,
        idle: bool,
    ) -> Op[list[ClaimRow]]:
        """W-10, Q-2..Q-6, Q-12, R-1: the queues in order, each with one
        claim statement (and the exhaust statement when its probe found
        lapsed claims without budget). With a rate limit, the limiter row is
        locked and the units taken in the claim's own transaction. *idle*
        claims (re-attempts of a blocked call) are soft: while the database
        cannot be reached they find nothing rather than fail."""
        names = list(queues)
        if rate is None:
            return Op(lambda: self._claim(names, worker_id, n, None), soft=idle, soft_value=[])
        return Op(
            lambda: self._claim(names, worker_id, n, rate), atomic=True, soft=idle, soft_value=[]
        )

    def _claim(
        self, queues: list[str], worker_id: str, n: int, rate: RateSpec | None
    ) -> Plan[list[ClaimRow]]:
        budget = n
        base = 0.0
        if rate is not None:
            yield Q(self.st.rate_lock, {"name": rate.name})
            tat, now = yield Q(self.st.rate_read, {"name": rate.name}, ONE)
            base = max(float(tat), float(now))
            room = (float(now) + rate.burst * rate.interval_s - base) / rate.interval_s
            budget = min(n, max(0, math.floor(room + 1e-9)))
        claimed: list[ClaimRow] = []
        for queue in queues:
            want = budget - len(claimed)
            if want <= 0:
                break
            params = {"queue": queue, "worker_id": worker_id, "n": want}
            rows = yield Q(self.st.claim(want), params, ALL)
            got = [_claim_row(r[:-1]) for r in rows if r[0] is not None]
            if rows and rows[0][-1]:
                # Rare: lapsed claims with no budget left, expired
                # holders of group slots. Moving them to dead may
                # free slots: a claim short of its count looks again.
                yield Q(self.st.exhaust, {"queue": queue}, ONE)
                if len(got) < want:
                    params["n"] = want - len(got)
                    more = yield Q(self.st.claim(want - len(got)), params, ALL)
                    got.extend(_claim_row(r[:-1]) for r in more if r[0] is not None)
            claimed.extend(got)
        if rate is not None and claimed:
            tat = base + len(claimed) * rate.interval_s
            yield Q(self.st.rate_take, {"name": rate.name, "tat": tat})
        return claimed

    def next_ready(self, queues: Sequence[str], soft: bool) -> Op[float | None]:
        def plan() -> Plan[float | None]:
            row = yield Q(self.st.next_ready, {"queues": list(queues)}, ONE)
            return None if row is None or row[0] is None else float(row[0])

        return Op(plan, writes=False, soft=soft, soft_value=None)

    def ack(
        self,
        fences: Sequence[Fence],
        results: Sequence[str | None] | None = None,
    ) -> Op[list[bool]]:
        """Q-7, Q-9: one statement for one fence or many; one result each.
        With *results*, the stamped rows keep theirs in the same statement
        (RS-1)."""
        if results is not None:
            keep = {
                "ids": [f.id for f in fences],
                "claims": [f.claim for f in fences],
                "results": list(results),
                "wake": self.wake,
                "prefix": RESULT_WAKE_PREFIX,
            }

            def kept() -> Plan[list[bool]]:
                rows = yield Q(self.st.ack_keep, keep, ALL)
                return _landed(fences, rows)

            return Op(kept)
        if len(fences) == 1:
            fence = fences[0]

            def one() -> Plan[list[bool]]:
                params = {**self._fence(fence), "wake": self.wake}
                count, _ = yield Q(self.st.ack, params, ONE)
                return [int(count) == 1]

            return Op(one)

        def many() -> Plan[list[bool]]:
            params = {
                "ids": [f.id for f in fences],
                "claims": [f.claim for f in fences],
                "wake": self.wake,
            }
            rows = yield Q(self.st.ack_many, params, ALL)
            return _landed(fences, rows)

        return Op(many)

    def retry(self, fence: Fence, delay_s: float, error: str) -> Op[bool]:
        params = {
            **self._fence(fence),
            "delay_s": delay_s,
            "last_error": error,
            "wake": self.wake,
            "prefix": RESULT_WAKE_PREFIX,
        }

        def plan() -> Plan[bool]:
            count = yield Q(self.st.retry, params, ROWCOUNT)
            return bool(count == 1)

        return Op(plan)

    def fail(self, fence: Fence, error: str) -> Op[bool]:
        params = {
            **self._fence(fence),
            "last_error": error,
            "wake": self.wake,
            "prefix": RESULT_WAKE_PREFIX,
        }

        def plan() -> Plan[bool]:
            count = yield Q(self.st.fenced_to_dead, params, ROWCOUNT)
            return bool(count == 1)

        return Op(plan)

    def release(self, fence: Fence) -> Op[bool]:
        params = {**self._fence(fence), "wake": self.wake}

        def plan() -> Plan[bool]:
            count = yield Q(self.st.release, params, ROWCOUNT)
            return bool(count == 1)

        return Op(plan)

    def heartbeat(self, fence: Fence, extend_s: float) -> Op[datetime | None]:
        params = {**self._fence(fence), "extend_s": extend_s}

        def plan() -> Plan[datetime | None]:
            row = yield Q(self.st.heartbeat, params, ONE)
            return None if row is None else utc(row[0])

        return Op(plan)

    def progress(self, fence: Fence, value: str | None) -> Op[bool]:
        """Q-28: the checkpoint, fenced like a heartbeat (the deadline stays)."""
        params = {**self._fence(fence), "progress": value}

        def plan() -> Plan[bool]:
            count = yield Q(self.st.progress, params, ROWCOUNT)
            return bool(count == 1)

        return Op(plan)

    def cancel(self, queue: str, job_id: int) -> Op[bool]:
        def plan() -> Plan[bool]:
            count, _ = yield Q(self.st.cancel, {"id": job_id, "queue": queue}, ONE)
            return int(count) == 1

        return Op(plan)

    # ---- Q-27 pause, O-6 run now (docs/adr/0023)

    def set_paused(self, queue: str, paused: bool) -> Op[bool]:
        params = {"queue": queue, "wake": self.wake}
        stmt = self.st.pause if paused else self.st.resume

        def plan() -> Plan[bool]:
            count = yield Q(stmt, params, ROWCOUNT)
            return bool(count == 1)

        return Op(plan)

    def is_paused(self, queue: str) -> Op[bool]:
        def plan() -> Plan[bool]:
            (paused,) = yield Q(self.st.is_paused, {"queue": queue}, ONE)
            return bool(paused)

        return Op(plan, writes=False)

    def run_now(self, queue: str, job_id: int) -> Op[bool]:
        params = {"id": job_id, "queue": queue, "wake": self.wake}

        def plan() -> Plan[bool]:
            rows = yield Q(self.st.run_now, params, ALL)
            for grp, limit, _ in rows:
                if grp is not None and limit is not None:
                    yield Q(self.st.rebalance_group, {"queue": queue, "grp": grp}, ONE)
            return bool(rows)

        return Op(plan, atomic=True)

    # ---- end Q-27, O-6

    def _waiting_on(self, rows: list[JobRow]) -> Plan[list[JobRow]]:
        """WF-1: each waiting row's unfinished parents."""
        ids = [r.id for r in rows if r.state == "waiting"]
        if not ids:
            return rows
        found = yield Q(self.st.waiting_on, {"ids": ids}, ALL)
        parents = {int(c): tuple(int(p) for p in ps) for c, ps in found}
        return [
            replace(r, waiting_on=parents.get(r.id, ())) if r.state == "waiting" else r
            for r in rows
        ]

    def parent_results(self, job_id: int) -> Op[dict[int, str]]:
        def plan() -> Plan[dict[int, str]]:
            rows = yield Q(self.st.parent_results, {"id": job_id}, ALL)
            return {int(i): r for i, r in rows}

        return Op(plan, writes=False)

    def get_job(self, queue: str, job_id: int) -> Op[JobRow | None]:
        def plan() -> Plan[JobRow | None]:
            row = yield Q(self.st.get_job, {"id": job_id, "queue": queue}, ONE)
            if row is None:
                return None
            (job,) = yield from self._waiting_on([job_row(row, utc)])
            return job

        return Op(plan, writes=False)

    def get_result(self, queue: str, job_id: int) -> Op[ResultRow | None]:
        """RS-2: a pure read, in the caller's transaction when given."""

        def plan() -> Plan[ResultRow | None]:
            row = yield Q(self.st.get_result, {"id": job_id, "queue": queue}, ONE)
            if row is None:
                return None
            return ResultRow(int(row[0]), row[1], row[2], row[3], utc(row[4]))

        return Op(plan, writes=False)

    def list_jobs(self, queue: str, state: JobState, limit: int, after_id: int) -> Op[list[JobRow]]:
        params = {"queue": queue, "state": state.value, "after": after_id, "limit": limit}
        if state is JobState.DONE:
            stmt = self.st.list_done
        elif state is JobState.WAITING:
            stmt = self.st.list_waiting
        else:
            stmt = self.st.list_dead if state is JobState.DEAD else self.st.list_live

        def plan() -> Plan[list[JobRow]]:
            rows = yield Q(stmt, params, ALL)
            jobs: list[JobRow] = yield from self._waiting_on([job_row(r, utc) for r in rows])
            return jobs

        return Op(plan, writes=False)

    def queue_stats(self, queue: str | None) -> Op[list[QueueStats]]:
        def one(name: str) -> Plan[list[QueueStats]]:
            row = yield Q(self.st.stats, {"queue": name}, ONE)
            pending, scheduled, processing, dead, oldest, waiting, paused = row
            return [
                QueueStats(
                    name,
                    int(pending),
                    int(scheduled),
                    int(processing),
                    int(dead),
                    _opt_utc(oldest),
                    int(waiting),
                    bool(paused),
                )
            ]

        def every() -> Plan[list[QueueStats]]:
            rows = yield Q(self.st.queue_stats, {}, ALL)
            names = yield Q(self.st.paused_queues, {}, ALL)
            paused = {str(r[0]) for r in names}
            stats = {
                q: QueueStats(q, int(p), int(s), int(r), int(d), _opt_utc(o), int(w), q in paused)
                for q, p, s, r, d, o, w in rows
            }
            # a paused queue is listed even when it holds no rows.
            for name in paused - stats.keys():
                stats[name] = QueueStats(name, 0, 0, 0, 0, None, 0, True)
            return [stats[q] for q in sorted(stats)]  # code point order, as COLLATE "C"

        if queue is not None:
            return Op(lambda: one(queue), writes=False)
        return Op(every, writes=False)

    def sweep(self, queue: str) -> Op[SweepResult]:
        """RS-3, Q-16 first: the upkeep of the partitions of results and dead
        letters (whole partitions past their time dropped, the next widths'
        created), skipped when this role may not or the lock is not free at
        once (docs/adr/0026); then Q-12, Q-15..Q-17 in one statement, which
        deletes the dead rows past their retention that no drop took; then
        the results past their time that no drop will take soon: the
        default partition's and those held in a partition by a much longer
        kept result, or, when the upkeep was skipped, every past width's
        (docs/adr/0018, 0026). What follows a drop stays short: the drop's
        locks on the parent tables are held until the commit, and acks and
        failures wait on them."""
        upkeep = {"schema": self.schema, "queue": queue, "ahead": RESULT_HOURS_AHEAD}

        def plan() -> Plan[SweepResult]:
            dropped = (0, 0)
            row = yield from _upkeep(Q(self.st.partition_upkeep, upkeep, ONE))
            if row is not None:
                dropped = (int(row[0]), int(row[1]))
            expired, purged, exhausted, carried = yield Q(self.st.sweep, {"queue": queue}, ONE)
            # No upkeep: every result past its time goes by row (0 widths).
            held = {"queue": queue, "held_widths": 0 if row is None else 2}
            deleted = yield Q(self.st.purge_results, held, ROWCOUNT)
            if row is not None:
                deleted += yield Q(self.st.purge_default_results, {"queue": queue}, ROWCOUNT)
            return SweepResult(
                expired=int(expired),
                purged=int(purged) + dropped[1],
                exhausted=int(exhausted),
                results=dropped[0] + int(carried) + int(deleted),
            )

        return Op(plan, atomic=True)

    def redrive(self, queue: str, job_ids: Sequence[int] | None) -> Op[int]:
        """Q-21: one statement; the wake goes out only when something moved."""
        params: dict[str, Any] = {"queue": queue, "wake": self.wake}
        if job_ids is None:
            stmt = self.st.redrive_all
        else:
            stmt = self.st.redrive_ids
            params["ids"] = list(job_ids)

        def plan() -> Plan[int]:
            rows = yield Q(stmt, params, ALL)
            return len(rows)

        return Op(plan)

    def purge_dead(
        self,
        queue: str,
        job_ids: Sequence[int] | None,
        older_than_s: float | None,
    ) -> Op[int]:
        params: dict[str, Any] = {"queue": queue}
        if job_ids is not None:
            params["ids"] = list(job_ids)
        if older_than_s is not None:
            params["older_than_s"] = older_than_s
        stmt = self.st.purge_dead[(job_ids is not None, older_than_s is not None)]
        if job_ids is not None:
            return Op(lambda: _count(stmt, params))
        # By age or all: the partitions wholly at or before the cut that hold
        # only this queue's rows are dropped first (docs/adr/0026), when this
        # role may and the locks are free at once; the rest go by row deletes.
        drop = {"schema": self.schema, "queue": queue, "older_than_s": older_than_s}

        def plan() -> Plan[int]:
            row = yield from _upkeep(Q(self.st.dead_drop_before, drop, ONE))
            deleted = yield Q(stmt, params, ROWCOUNT)
            return (int(row[0]) if row is not None else 0) + int(deleted)

        return Op(plan, atomic=True)

    # -------------------------------------------------------------- streams

    def publish(self, stream: str, key: str | None, payload: str) -> Op[int]:
        params = {
            "stream": stream,
            "payload": payload,
            "key": key,
            "wake": self.wake,
            "wake_key": "stream:" + stream,
        }

        def plan() -> Plan[int]:
            row = yield Q(self.st.publish, params, ONE)
            return int(row[0])

        return Op(plan)

    def read_events(self, stream: str, after: int, limit: int) -> Op[list[EventRow]]:
        params = {"stream": stream, "after": after, "limit": limit}

        def plan() -> Plan[list[EventRow]]:
            rows = yield Q(self.st.read_events, params, ALL)
            return [EventRow(int(seq), key, payload, utc(at)) for seq, key, payload, at in rows]

        return Op(plan, writes=False)

    def has_event_after(self, stream: str, after: int) -> Op[bool]:
        def plan() -> Plan[bool]:
            row = yield Q(self.st.has_event_after, {"stream": stream, "after": after}, ONE)
            return bool(row is not None and row[0])

        return Op(plan, writes=False)

    def commit_offset(self, stream: str, consumer: str, offset: int) -> Op[bool]:
        params = {"stream": stream, "consumer": consumer, "seq": offset}

        def plan() -> Plan[bool]:
            count = yield Q(self.st.commit_offset, params, ROWCOUNT)
            return bool(count == 1)

        return Op(plan)

    def get_offset(self, stream: str, consumer: str) -> Op[int]:
        def plan() -> Plan[int]:
            row = yield Q(self.st.get_offset, {"stream": stream, "consumer": consumer}, ONE)
            return 0 if row is None else int(row[0])

        return Op(plan, writes=False)

    def trim(self, stream: str, before: int) -> Op[int]:
        return Op(lambda: _count(self.st.trim, {"stream": stream, "before": before}))

    def stream_stats(self) -> Op[list[StreamStats]]:
        def plan() -> Plan[list[StreamStats]]:
            streams = yield Q(self.st.stream_stats, {}, ALL)
            consumers = yield Q(self.st.consumers, {}, ALL)
            return stream_stats_of(streams, consumers)

        return Op(plan, writes=False)

    # ---------------------------------------------------------------- locks

    def acquire_lock(self, name: str, owner: str, ttl_s: float) -> Op[tuple[int, datetime] | None]:
        params = {"name": name, "owner": owner, "ttl_s": ttl_s}

        def plan() -> Plan[tuple[int, datetime] | None]:
            row = yield Q(self.st.acquire_lock, params, ONE)
            if row is None:
                return None
            token, expires_at = row
            return int(token), utc(expires_at)

        return Op(plan)

    def renew_lock(self, name: str, owner: str, token: int, ttl_s: float) -> Op[datetime | None]:
        params = {"name": name, "owner": owner, "token": token, "ttl_s": ttl_s}

        def plan() -> Plan[datetime | None]:
            row = yield Q(self.st.renew_lock, params, ONE)
            return None if row is None else utc(row[0])

        return Op(plan)

    def release_lock(self, name: str, owner: str, token: int) -> Op[bool]:
        params = {"name": name, "owner": owner, "token": token}

        def plan() -> Plan[bool]:
            count = yield Q(self.st.release_lock, params, ROWCOUNT)
            return bool(count == 1)

        return Op(plan)

    def held_locks(self) -> Op[list[LockInfo]]:
        def plan() -> Plan[list[LockInfo]]:
            rows = yield Q(self.st.held_locks, {}, ALL)
            return [LockInfo(n, o, int(t), utc(e)) for n, o, t, e in rows]

        return Op(plan, writes=False)

    # ------------------------------------------------------ workers (O-5)

    def report_worker(
        self,
        info: WorkerInfo,
        counts: Sequence[WorkerCount],
        gone: bool,
        forget_after_s: float,
        keep_counts_s: float,
    ) -> Op[None]:
        """O-5: one statement (the worker's row, its counts, the stale rows)."""
        params = {
            "id": info.id,
            "host": info.host,
            "pid": info.pid,
            "queues": list(info.queues),
            "concurrency": info.concurrency,
            "started_at": info.started_at,
            "version": info.version,
            "gone": gone,
            "minutes": [c.minute for c in counts],
            "cqueues": [c.queue for c in counts],
            "outcomes": [c.outcome for c in counts],
            "ns": [c.n for c in counts],
            "forget_s": forget_after_s,
            "keep_s": keep_counts_s,
        }

        def plan() -> Plan[None]:
            yield Q(self.st.report_worker, params, ROWCOUNT)
            return None

        return Op(plan)

    def list_workers(self, seen_within_s: float) -> Op[list[WorkerInfo]]:
        def plan() -> Plan[list[WorkerInfo]]:
            rows = yield Q(self.st.list_workers, {"within_s": seen_within_s}, ALL)
            return [
                WorkerInfo(
                    wid,
                    host,
                    int(pid),
                    tuple(queues),
                    int(concurrency),
                    utc(started),
                    version,
                    utc(seen),
                )
                for wid, host, pid, queues, concurrency, started, version, seen in rows
            ]

        return Op(plan, writes=False)

    def worker_counts(self, since: datetime) -> Op[list[WorkerCount]]:
        def plan() -> Plan[list[WorkerCount]]:
            rows = yield Q(self.st.worker_counts, {"since": since}, ALL)
            return [WorkerCount(utc(m), w, q, o, int(n)) for m, w, q, o, n in rows]

        return Op(plan, writes=False)

    # ---------------------------------------------------------- rate limits

    def acquire_rate(self, rate: RateSpec, n: int) -> Op[float]:
        """R-1: one statement on the server's clock; ``0.0`` when granted,
        else the seconds until the units could be."""
        cost = n * rate.interval_s
        burst_t = rate.burst * rate.interval_s
        params = {"name": rate.name, "cost": cost, "burst_t": burst_t}

        def plan() -> Plan[float]:
            tat, granted, now = yield Q(self.st.acquire_rate, params, ONE)
            if granted:
                return 0.0
            return max(float(tat) + cost - burst_t - float(now), 1e-6)

        return Op(plan)

    # -------------------------------------------------------- notifications

    def notify(self, channel: str, payload: str) -> Op[None]:
        """N-1: behind a random tag, so that PostgreSQL does not fold two
        identical notifications of one transaction into one."""
        params = {
            "channel": user_channel(self.schema, channel),
            "payload": f"{secrets.token_hex(6)}:{payload}",
        }

        def plan() -> Plan[None]:
            yield Q(self.st.notify, params)

        return Op(plan)

    def poke(self, channel: str) -> Op[None]:
        """An empty NOTIFY on one of our own channels (the listener's way to
        interrupt its own wait)."""

        def plan() -> Plan[None]:
            yield Q(self.st.notify, {"channel": channel, "payload": ""})

        return Op(plan)

    def wake_probe(self, keys: Sequence[str]) -> Op[list[tuple[str, str]]]:
        """EN-4: one fingerprint per watched key (see ``_sql.WAKE_PROBE``)."""
        params = {"keys": list(keys), "schedules_key": SCHEDULES_WAKE_KEY}

        def plan() -> Plan[list[tuple[str, str]]]:
            rows = yield Q(self.st.wake_probe, params, ALL)
            return [
                (key, f"{head}|{seq}|{sched}|{paused}") for key, head, seq, sched, paused in rows
            ]

        return Op(plan, writes=False, soft=True, soft_value=[])

    # ------------------------------------------------------------ schedules

    def clock(self) -> Op[datetime]:
        def plan() -> Plan[datetime]:
            row = yield Q(self.st.clock, {}, ONE)
            return utc(row[0])

        return Op(plan, writes=False)

    def upsert_schedule(self, row: ScheduleRow) -> Op[ScheduleRow]:
        params = {
            "name": row.name,
            "spec": row.spec,
            "queue": row.queue,
            "payload": row.payload,
            "opts": row.opts,
            "tz": row.tz,
            "next_fire_at": row.next_fire_at,
            "wake": self.wake,
            "wake_key": SCHEDULES_WAKE_KEY,
        }

        def plan() -> Plan[ScheduleRow]:
            stored = yield Q(self.st.upsert_schedule, params, ONE)
            return _schedule_row(stored)

        return Op(plan)

    def delete_schedule(self, name: str) -> Op[bool]:
        params = {"name": name, "wake": self.wake, "wake_key": SCHEDULES_WAKE_KEY}

        def plan() -> Plan[bool]:
            count = yield Q(self.st.delete_schedule, params, ROWCOUNT)
            return bool(count == 1)

        return Op(plan)

    def list_schedules(self) -> Op[list[ScheduleRow]]:
        def plan() -> Plan[list[ScheduleRow]]:
            rows = yield Q(self.st.list_schedules, {}, ALL)
            return [_schedule_row(r) for r in rows]

        return Op(plan, writes=False)

    def due_schedules(self) -> Op[tuple[datetime, list[ScheduleRow]]]:
        def plan() -> Plan[tuple[datetime, list[ScheduleRow]]]:
            rows = yield Q(self.st.due_schedules, {}, ALL)
            now = utc(rows[0][0])
            return now, [_schedule_row(r[1:]) for r in rows if r[1] is not None]

        return Op(plan, writes=False)

    def fire_schedule(self, fire: Fire) -> Op[bool]:
        params = self._job_params(fire.queue, fire.job)
        params.update(
            name=fire.name,
            expected=fire.expected,
            next_fire_at=fire.next_fire_at,
            last_fire_at=fire.fire_at,
        )

        def plan() -> Plan[bool]:
            count = yield Q(self.st.fire_schedule, params, ROWCOUNT)
            return bool(count == 1)

        return Op(plan)

    def seconds_to_next_fire(self) -> Op[float | None]:
        def plan() -> Plan[float | None]:
            row = yield Q(self.st.next_fire, {}, ONE)
            return None if row is None or row[0] is None else float(row[0])

        return Op(plan, writes=False)
