"""The workers' registry of the SQLite executor (SPEC §21 O-5, docs/adr/0024).

A refresh is one write transaction of up to four statements on the write
queue (SQLite has no data-modifying common table expressions): the worker's
row, its counts, and the deletion of stale rows. It commits once, like one
ack.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from datetime import datetime

from alkstore.types import WorkerCount, WorkerInfo

from . import _sql
from ._core import Core
from ._time import from_datetime, micros, now_us, to_datetime

__all__ = ["WorkerOps"]


class WorkerOps:
    """Refreshing, listing and counting workers."""

    def __init__(self, core: Core) -> None:
        self._read = core.read
        self._write = core.write

    def report_worker(
        self,
        info: WorkerInfo,
        counts: Sequence[WorkerCount],
        gone: bool,
        forget_after_s: float,
        keep_counts_s: float,
    ) -> None:
        def run(conn: sqlite3.Connection) -> None:
            now = now_us()
            if gone:
                conn.execute(_sql.DELETE_WORKER, {"id": info.id})
            else:
                params = {
                    "id": info.id,
                    "host": info.host,
                    "pid": info.pid,
                    "queues": json.dumps(list(info.queues)),
                    "concurrency": info.concurrency,
                    "started_at": from_datetime(info.started_at),
                    "version": info.version,
                    "now": now,
                }
                conn.execute(_sql.UPSERT_WORKER, params)
            keep_from = now - micros(keep_counts_s)
            rows = [
                {
                    "minute": m,
                    "worker_id": c.worker_id,
                    "queue": c.queue,
                    "outcome": c.outcome,
                    "n": c.n,
                }
                for c in counts
                if (m := from_datetime(c.minute)) >= keep_from
            ]
            if rows:
                conn.executemany(_sql.ADD_WORKER_COUNT, rows)
            forget = {"cutoff": now - micros(forget_after_s), "id": info.id}
            conn.execute(_sql.FORGET_WORKERS, forget)
            conn.execute(_sql.FORGET_COUNTS, {"cutoff": keep_from})

        self._write(None, run)

    def list_workers(self, seen_within_s: float) -> list[WorkerInfo]:
        with self._read() as conn:
            cutoff = now_us() - micros(seen_within_s)
            rows = conn.execute(_sql.LIST_WORKERS, {"cutoff": cutoff}).fetchall()
        return [
            WorkerInfo(
                wid,
                host,
                int(pid),
                tuple(json.loads(queues)),
                int(concurrency),
                to_datetime(started),
                version,
                to_datetime(seen),
            )
            for wid, host, pid, queues, concurrency, started, version, seen in rows
        ]

    def worker_counts(self, since: datetime) -> list[WorkerCount]:
        with self._read() as conn:
            rows = conn.execute(_sql.WORKER_COUNTS, {"since": from_datetime(since)}).fetchall()
        return [WorkerCount(to_datetime(m), w, q, o, int(n)) for m, w, q, o, n in rows]
