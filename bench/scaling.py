"""C-8: the cost of claim + ack must not grow with the rows around it.

For each alkstore engine, one store per scenario, all built before any
timing, then measured round-robin (so that a burst of machine noise hits
every scenario alike). Each measurement claims and acks ``claims`` jobs one
at a time (``claim()`` + ``ack()``) out of ``waiting`` ready jobs, then tops
the ready jobs back up, untimed. The scenarios add, to the same queue
unless said otherwise:

- ``baseline``: nothing (just the ready jobs);
- ``waiting``: a large backlog of ready jobs (claims take from it);
- ``in_flight``: as many rows claimed by another worker, not yet lapsed;
- ``scheduled``: as many rows delayed by a day;
- ``other_queue``: as many ready rows in another queue;
- ``dead``: a very large dead-letter table for the queue.

Rows are made through the public API except the dead letters, which are
inserted with SQL straight into the engine's dead table (the API would take
one ``fail`` per row); they are shaped exactly as ``fail`` leaves them.

SQLite runs with ``synchronous=normal`` so that the per-commit fsync does
not hide the statements' cost; PostgreSQL tables are ``VACUUM ANALYZE``d
after each build and top-up, so that every scenario starts a measurement in
the same state.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import sqlite3
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import sql

import alkstore
from alkstore import EnqueueOpts, QueueOpts
from bench.systems import QUEUE, Env, Sample, payload, timed_loop

__all__ = ["SCENARIOS", "ScalingResult", "Sizes", "describe", "run_scaling"]

SCENARIOS: dict[str, str] = {
    "baseline": "{waiting:,} ready jobs, nothing else",
    "waiting": "+ {population:,} more ready jobs in the queue",
    "in_flight": "+ {population:,} jobs of the queue in flight (claimed, not lapsed)",
    "scheduled": "+ {population:,} jobs of the queue delayed by a day",
    "other_queue": "+ {population:,} ready jobs in another queue",
    "dead": "+ {dead:,} dead letters of the queue",
}
_BATCH = 10_000
_DAY_S = 86_400.0


@dataclass(frozen=True)
class Sizes:
    population: int
    dead: int
    waiting: int
    claims: int
    reps: int


@dataclass
class ScalingResult:
    engine: str
    sizes: Sizes
    build_s: dict[str, float] = field(default_factory=dict)
    samples: dict[str, list[Sample]] = field(default_factory=dict)
    error: str | None = None

    def label(self, key: str) -> str:
        s = self.sizes
        return SCENARIOS[key].format(waiting=s.waiting, population=s.population, dead=s.dead)

    def us_per_job(self, key: str) -> float:
        rates = [x.rate for x in self.samples.get(key, []) if x.jobs]
        return 1e6 / statistics.median(rates) if rates else float("nan")

    def ratio(self, key: str) -> float:
        return self.us_per_job(key) / self.us_per_job("baseline")


def _enqueue_in_batches(q: alkstore.Queue, n: int, opts: EnqueueOpts | None = None) -> None:
    done = 0
    while done < n:
        k = min(_BATCH, n - done)
        q.enqueue_many([payload(i) for i in range(done, done + k)], opts)
        done += k


def _populate(
    store: alkstore.Store,
    key: str,
    sizes: Sizes,
    insert_dead: Callable[[int], None],
) -> None:
    """Build scenario *key* in *store*, then enqueue the ready jobs."""
    q = store.queue(QUEUE)
    if key == "waiting":
        _enqueue_in_batches(q, sizes.population)
    elif key == "in_flight":
        long_claims = store.queue(QUEUE, QueueOpts(visibility_timeout_s=_DAY_S))
        _enqueue_in_batches(long_claims, sizes.population)
        claimed = 0
        while claimed < sizes.population:
            got = long_claims.claim_batch("elsewhere", min(_BATCH, sizes.population - claimed))
            if not got:
                raise AssertionError("in_flight: fewer rows claimable than enqueued")
            claimed += len(got)
    elif key == "scheduled":
        _enqueue_in_batches(q, sizes.population, EnqueueOpts(delay_s=_DAY_S))
    elif key == "other_queue":
        _enqueue_in_batches(store.queue(QUEUE + "-other"), sizes.population)
    elif key == "dead":
        insert_dead(sizes.dead)
    _enqueue_in_batches(q, sizes.waiting)


# Dead-letter ids start far above anything the live tables will hand out.
_DEAD_ID_BASE = 10**12

_SQLITE_DEAD = """
WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < :n)
INSERT INTO __alkstore_dead (
    id, queue, payload, priority, run_at, created_at, claimed_at, deadline, worker_id,
    attempts, max_attempts, visibility_timeout_s, backoff_base_s, dead_letter_retention_s,
    expires_at, last_error, died_at, purge_at)
SELECT :base + i, :queue, '{"n":0,"to":"user@example.com"}', 0, :now, :now, :now, :now, 'w',
    3, 3, 300.0, 5.0, NULL, NULL, 'failed', :now, NULL
FROM c
"""

_PG_DEAD = """
INSERT INTO {schema}.dead (
    id, queue, payload, priority, run_at, created_at, claimed_at, deadline, worker_id,
    attempts, max_attempts, visibility_timeout_s, backoff_base_s, dead_letter_retention_s,
    expires_at, last_error, died_at, purge_at)
SELECT %(base)s::bigint + g, %(queue)s, '{{"n":0,"to":"user@example.com"}}'::json, 0,
    now(), now(), now(), now(), 'w', 3, 3, 300.0, 5.0, NULL, NULL, 'failed', now(), NULL
FROM generate_series(1, %(n)s) AS g
"""


class _Engine:
    """How to open one isolated store per scenario on an engine."""

    name = ""

    def open(self, key: str) -> alkstore.Store:
        raise NotImplementedError

    def insert_dead(self, key: str, n: int) -> None:
        raise NotImplementedError

    def settle(self, key: str) -> None:
        """After a build or top-up, before timing."""

    def cleanup(self) -> None:
        """After the last measurement."""


class _SQLite(_Engine):
    name = "sqlite"

    def __init__(self, tmpdir: str) -> None:
        self.tmpdir = tmpdir

    def _path(self, key: str) -> str:
        return os.path.join(self.tmpdir, f"c8-{key}.db")

    def open(self, key: str) -> alkstore.Store:
        return alkstore.open(f"sqlite:///{self._path(key)}", synchronous="normal")

    def insert_dead(self, key: str, n: int) -> None:
        conn = sqlite3.connect(self._path(key), isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(
                _SQLITE_DEAD,
                {"n": n, "base": _DEAD_ID_BASE, "queue": QUEUE, "now": time.time_ns() // 1000},
            )
            conn.execute("COMMIT")
            conn.execute("ANALYZE")
        finally:
            conn.close()

    def cleanup(self) -> None:
        for name in os.listdir(self.tmpdir):
            if name.startswith("c8-"):
                os.remove(os.path.join(self.tmpdir, name))


class _Postgres(_Engine):
    name = "postgres"

    def __init__(self, url: str) -> None:
        self.url = url

    @staticmethod
    def _schema(key: str) -> str:
        return f"alkstore_c8_{key}"

    def open(self, key: str) -> alkstore.Store:
        return alkstore.open(self.url, schema=self._schema(key))

    def insert_dead(self, key: str, n: int) -> None:
        stmt = sql.SQL(_PG_DEAD).format(schema=sql.Identifier(self._schema(key)))
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(stmt, {"base": _DEAD_ID_BASE, "queue": QUEUE, "n": n})

    def settle(self, key: str) -> None:
        schema = sql.Identifier(self._schema(key))
        with psycopg.connect(self.url, autocommit=True) as conn:
            for table in ("jobs", "dead"):
                conn.execute(sql.SQL("VACUUM ANALYZE {}.{}").format(schema, sql.Identifier(table)))

    def cleanup(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn:
            for key in SCENARIOS:
                conn.execute(
                    sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
                        sql.Identifier(self._schema(key))
                    )
                )


def _claim_ack_one(q: alkstore.Queue) -> int:
    job = q.claim("bench-worker")
    if job is None:
        return 0
    job.ack()
    return 1


def run_scaling(
    engine_name: str, env: Env, sizes: Sizes, log: Callable[[str], None]
) -> ScalingResult:
    """Build every scenario on one engine, then measure them round-robin."""
    result = ScalingResult(engine_name, sizes)
    engine: _Engine
    if engine_name == "sqlite":
        engine = _SQLite(env.tmpdir)
    elif env.pg_url is None:
        result.error = env.pg_reason
        return result
    else:
        engine = _Postgres(env.pg_url)
    stores: dict[str, alkstore.Store] = {}
    try:
        for key in SCENARIOS:
            t0 = time.perf_counter()
            store = engine.open(key)
            stores[key] = store
            _populate(store, key, sizes, functools.partial(engine.insert_dead, key))
            engine.settle(key)
            result.build_s[key] = time.perf_counter() - t0
            log(f"  c8-{engine_name} {key}: built in {result.build_s[key]:.1f} s")
        queues = {key: store.queue(QUEUE) for key, store in stores.items()}
        for rep in range(sizes.reps):
            for key, q in queues.items():
                _claim_ack_one(q)  # warm the connection and statement caches
                sample = timed_loop(functools.partial(_claim_ack_one, q), sizes.claims, 60.0)
                result.samples.setdefault(key, []).append(sample)
                _enqueue_in_batches(q, sample.jobs + 1)  # back to `waiting` ready jobs
                engine.settle(key)
            log(
                f"  c8-{engine_name} rep {rep + 1}/{sizes.reps}: "
                + ", ".join(f"{k} {1e6 / v[-1].rate:.0f} us" for k, v in result.samples.items())
            )
    except Exception as exc:
        result.error = f"{type(exc).__name__}: {exc}"
        log(f"  c8-{engine_name} failed: {result.error}")
    finally:
        for store in stores.values():
            store.close()
        engine.cleanup()
    return result


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def describe(result: ScalingResult) -> dict[str, Any]:
    """The JSON form of *result*."""
    return {
        "engine": result.engine,
        "sizes": dataclasses.asdict(result.sizes),
        "error": result.error,
        "scenarios": {
            key: {
                "label": result.label(key),
                "build_s": result.build_s.get(key),
                "us_per_claim_ack": _finite(result.us_per_job(key)),
                "ratio_to_baseline": _finite(result.ratio(key)),
                "samples": [dataclasses.asdict(s) for s in result.samples.get(key, [])],
            }
            for key in SCENARIOS
        },
    }
