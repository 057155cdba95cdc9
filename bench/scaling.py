"""C-8 and its job-control cases (Q-24, Q-25): the cost of the hot calls must
not grow with the rows around them.

For each alkstore engine, one store per scenario, all built before any
timing, then measured round-robin (so that a burst of machine noise hits
every scenario alike). Most scenarios time ``claim()`` + ``ack()``, one job
at a time, ``claims`` times out of ``waiting`` ready jobs, then top the ready
jobs back up, untimed. The C-8 scenarios add, to the same queue unless said
otherwise:

- ``baseline``: nothing (just the ready jobs);
- ``waiting``: a large backlog of ready jobs (claims take from it);
- ``in_flight``: as many rows claimed by another worker, not yet lapsed;
- ``scheduled``: as many rows delayed by a day;
- ``other_queue``: as many ready rows in another queue;
- ``dead``: a very large dead-letter table for the queue;
- ``wf_waiting``: as many jobs of the queue enqueued ``after=`` a parent that
  never finishes (WF-5: waiting jobs live outside the claim's table);
- ``results``: as many kept results of the queue as there are dead letters
  (RS-3: results live outside it too).

Groups (Q-25), claims and acks of grouped jobs (``group_limit`` 2), ratios
to the same ``baseline``:

- ``groups_small``: ``waiting`` jobs in a hundredth as many groups;
- ``groups``: ``population`` waiting jobs in ``groups`` groups;
- ``groups_blocked``: the same, but the first nine tenths of the jobs in
  claim order (higher priority) belong to groups already at their limit
  (their slots held by claims of another worker): every claim must pass
  over them without reading them.

Bounded queues (Q-24), with a bound of ``bound`` jobs; each scenario has
its own reference (``base``):

- ``bounded_at_bound``: the queue holds ``bound`` jobs; each timed step is an
  enqueue through the bounded handle, refused with ``QueueFull``;
- ``bounded_backlog``: the same with ``population`` jobs waiting: the check
  reads at most ``bound + 1`` index entries, so it must cost the same;
- ``plain_room``: half the bound waiting; each step is an ``enqueue`` and a
  ``cancel`` of it through an unbounded handle;
- ``bounded_room``: the same through the bounded handle: the cost of the
  check when there is room.

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
from alkstore_postgres import _sql as pg_sql
from alkstore_sqlite import _sql as sqlite_sql
from bench.systems import QUEUE, Env, Sample, payload, timed_loop

__all__ = ["SCENARIOS", "ScalingResult", "Scenario", "Sizes", "describe", "run_scaling"]


@dataclass(frozen=True)
class Scenario:
    """One measured store: its label (formatted with the sizes), what one
    timed step does, and the scenario its ratio is taken to (``None``: it
    is a reference itself)."""

    label: str
    step: str = "claim + ack"
    base: str | None = "baseline"


_REFUSED = "refused enqueue"
_ENQUEUE_CANCEL = "enqueue + cancel"

SCENARIOS: dict[str, Scenario] = {
    "baseline": Scenario("{waiting:,} ready jobs, nothing else", base=None),
    "waiting": Scenario("+ {population:,} more ready jobs in the queue"),
    "in_flight": Scenario("+ {population:,} jobs of the queue in flight (claimed, not lapsed)"),
    "scheduled": Scenario("+ {population:,} jobs of the queue delayed by a day"),
    "other_queue": Scenario("+ {population:,} ready jobs in another queue"),
    "dead": Scenario("+ {dead:,} dead letters of the queue"),
    "wf_waiting": Scenario("+ {population:,} jobs of the queue waiting on a parent (WF-5)"),
    "results": Scenario("+ {dead:,} kept results of the queue (RS-3)"),
    "groups_small": Scenario("{waiting:,} waiting jobs in {small_groups:,} groups, limit 2"),
    "groups": Scenario("{population:,} waiting jobs in {groups:,} groups, limit 2"),
    "groups_blocked": Scenario(
        "{population:,} waiting jobs in {groups:,} groups, the first {blocked:,} in claim "
        "order in groups at their limit"
    ),
    "bounded_at_bound": Scenario("bound {bound:,}, {bound:,} jobs waiting", _REFUSED, None),
    "bounded_backlog": Scenario(
        "bound {bound:,}, {population:,} jobs waiting", _REFUSED, "bounded_at_bound"
    ),
    "plain_room": Scenario("no bound, {half_bound:,} jobs waiting", _ENQUEUE_CANCEL, None),
    "bounded_room": Scenario(
        "bound {bound:,}, {half_bound:,} jobs waiting", _ENQUEUE_CANCEL, "plain_room"
    ),
}
_BATCH = 10_000
_DAY_S = 86_400.0
_GROUP_LIMIT = 2
#: Jobs per group in the group scenarios.
_PER_GROUP = 10


@dataclass(frozen=True)
class Sizes:
    population: int
    dead: int
    waiting: int
    claims: int
    reps: int
    groups: int = 10_000
    bound: int = 100

    @property
    def blocked(self) -> int:
        """Jobs of groups at their limit, first in claim order (nine tenths)."""
        return self.population * 9 // 10

    def fields(self) -> dict[str, int]:
        return {
            **dataclasses.asdict(self),
            "blocked": self.blocked,
            "small_groups": max(self.waiting // _PER_GROUP, 1),
            "half_bound": self.bound // 2,
        }


@dataclass
class ScalingResult:
    engine: str
    sizes: Sizes
    build_s: dict[str, float] = field(default_factory=dict)
    samples: dict[str, list[Sample]] = field(default_factory=dict)
    error: str | None = None
    #: Scenarios that could not be built (an engine without the feature).
    failed: dict[str, str] = field(default_factory=dict)

    def label(self, key: str) -> str:
        return SCENARIOS[key].label.format(**self.sizes.fields())

    def us_per_job(self, key: str) -> float:
        rates = [x.rate for x in self.samples.get(key, []) if x.jobs]
        return 1e6 / statistics.median(rates) if rates else float("nan")

    def ratio(self, key: str) -> float:
        base = SCENARIOS[key].base
        if base is None:
            return 1.0
        return self.us_per_job(key) / self.us_per_job(base)


def _enqueue_in_batches(q: alkstore.Queue, n: int, opts: EnqueueOpts | None = None) -> None:
    done = 0
    while done < n:
        k = min(_BATCH, n - done)
        q.enqueue_many([payload(i) for i in range(done, done + k)], opts)
        done += k


def _group_opts(group: int, priority: int = 0) -> EnqueueOpts:
    return EnqueueOpts(group=f"g{group}", priority=priority)


def _fill_groups(q: alkstore.Queue, groups: range, per_group: int, priority: int = 0) -> None:
    for g in groups:
        q.enqueue_many([payload(i) for i in range(per_group)], _group_opts(g, priority))


class _TopUp:
    """Puts back what a measurement took, untimed: ready jobs for the claim
    scenarios, spread over the free groups for the group ones."""

    def __init__(self, q: alkstore.Queue, groups: range | None = None) -> None:
        self.q = q
        self.groups = groups
        self.next = 0

    def __call__(self, n: int) -> None:
        if self.groups is None:
            _enqueue_in_batches(self.q, n)
            return
        for _ in range(n):
            g = self.groups[self.next % len(self.groups)]
            self.next += 1
            self.q.enqueue(payload(g), _group_opts(g))


def _populate(
    store: alkstore.Store,
    key: str,
    sizes: Sizes,
    insert_dead: Callable[[int], None],
    keep_results: Callable[[], None] = lambda: None,
) -> tuple[Callable[[], int], Callable[[int], None]]:
    """Build scenario *key* in *store*; return its timed step and its top-up."""
    q = store.queue(QUEUE)
    grouped = store.queue(QUEUE, QueueOpts(group_limit=_GROUP_LIMIT))
    if key == "groups_small":
        small = sizes.fields()["small_groups"]
        _fill_groups(grouped, range(small), sizes.waiting // small)
        return functools.partial(_claim_ack_one, q), _TopUp(grouped, range(small))
    if key == "groups":
        _fill_groups(grouped, range(sizes.groups), sizes.population // sizes.groups)
        return functools.partial(_claim_ack_one, q), _TopUp(grouped, range(sizes.groups))
    if key == "groups_blocked":
        per = sizes.population // sizes.groups
        n_blocked = sizes.groups * 9 // 10
        held = store.queue(QUEUE, QueueOpts(visibility_timeout_s=_DAY_S, group_limit=_GROUP_LIMIT))
        # Each blocked group: two jobs claimed elsewhere (its limit), `per`
        # more waiting behind them, all ahead of every free job by priority.
        _fill_groups(held, range(n_blocked), per + _GROUP_LIMIT, priority=10)
        claimed = 0
        while claimed < n_blocked * _GROUP_LIMIT:
            got = held.claim_batch("elsewhere", min(_BATCH, n_blocked * _GROUP_LIMIT - claimed))
            if not got or any(j.priority != 10 for j in got):
                raise AssertionError("groups_blocked: the blocked groups' slots were not taken")
            claimed += len(got)
        free = range(n_blocked, sizes.groups)
        _fill_groups(grouped, free, per)
        return functools.partial(_claim_ack_one, q), _TopUp(grouped, free)
    if key.startswith("bounded_") or key == "plain_room":
        waiting = {
            "bounded_at_bound": sizes.bound,
            "bounded_backlog": sizes.population,
        }.get(key, sizes.bound // 2)
        _enqueue_in_batches(q, waiting)
        bounded = store.queue(QUEUE, QueueOpts(max_depth=sizes.bound))
        if SCENARIOS[key].step == _REFUSED:
            return functools.partial(_refused_enqueue, bounded), _no_top_up
        handle = q if key == "plain_room" else bounded
        return functools.partial(_enqueue_cancel, handle), _no_top_up
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
    elif key == "wf_waiting":
        parent = store.queue(QUEUE + "-parent").enqueue(payload(0))
        _enqueue_in_batches(q, sizes.population, EnqueueOpts(after=[parent]))
    elif key == "results":
        # Enqueued stamped, then moved to the results table in one statement
        # each: a million acks through the API would take the whole run.
        _enqueue_in_batches(q, sizes.dead, EnqueueOpts(result_ttl_s=_DAY_S))
        keep_results()
    _enqueue_in_batches(q, sizes.waiting)
    return functools.partial(_claim_ack_one, q), _TopUp(q)


def _no_top_up(n: int) -> None:
    """The step leaves the queue as it found it."""


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


# Every job of the queue (all stamped, none claimed) becomes a kept result,
# as an ack with ``result=None`` leaves it, kept for a day.
_SQLITE_KEEP = f"""
INSERT INTO __alkstore_results ({sqlite_sql._JOB_COLUMNS}, result, finished_at, keep_until)
SELECT {sqlite_sql._JOB_COLUMNS}, 'null', :now, :now + 86400000000
FROM __alkstore_jobs WHERE queue = :queue
"""
_SQLITE_KEPT = "DELETE FROM __alkstore_jobs WHERE queue = :queue"

_PG_KEEP = f"""
INSERT INTO {{schema}}.results ({pg_sql._JOB_COLUMNS}, result, finished_at, keep_until)
SELECT {pg_sql._JOB_COLUMNS}, 'null'::json, now(), now() + interval '1 day'
FROM {{schema}}.jobs WHERE queue = %(queue)s
"""
_PG_KEPT = "DELETE FROM {schema}.jobs WHERE queue = %(queue)s"


class _Engine:
    """How to open one isolated store per scenario on an engine."""

    name = ""

    def open(self, key: str) -> alkstore.Store:
        raise NotImplementedError

    def insert_dead(self, key: str, n: int) -> None:
        raise NotImplementedError

    def keep_results(self, key: str) -> None:
        """Every job of the queue becomes a kept result (RS-1)."""
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

    def keep_results(self, key: str) -> None:
        conn = sqlite3.connect(self._path(key), isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")
            params = {"queue": QUEUE, "now": time.time_ns() // 1000}
            conn.execute(_SQLITE_KEEP, params)
            conn.execute(_SQLITE_KEPT, params)
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

    def keep_results(self, key: str) -> None:
        schema = sql.Identifier(self._schema(key))
        with psycopg.connect(self.url) as conn:
            for stmt in (_PG_KEEP, _PG_KEPT):
                conn.execute(sql.SQL(stmt).format(schema=schema), {"queue": QUEUE})

    def settle(self, key: str) -> None:
        schema = sql.Identifier(self._schema(key))
        with psycopg.connect(self.url, autocommit=True) as conn:
            for table in ("jobs", "dead", "waiting", "results"):
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


def _refused_enqueue(q: alkstore.Queue) -> int:
    try:
        q.enqueue(payload(0))
    except alkstore.QueueFull:
        return 1
    raise AssertionError("a full bounded queue took a job")


def _enqueue_cancel(q: alkstore.Queue) -> int:
    if not q.cancel(q.enqueue(payload(0))):
        raise AssertionError("cancel of a fresh job failed")
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
    plans: dict[str, tuple[Callable[[], int], Callable[[int], None]]] = {}
    try:
        for key in SCENARIOS:
            t0 = time.perf_counter()
            store = engine.open(key)
            stores[key] = store
            try:
                plans[key] = _populate(
                    store,
                    key,
                    sizes,
                    functools.partial(engine.insert_dead, key),
                    functools.partial(engine.keep_results, key),
                )
            except alkstore.AlkstoreError as exc:  # e.g. an engine without groups
                result.failed[key] = f"{type(exc).__name__}: {exc}"
                log(f"  c8-{engine_name} {key}: not built: {result.failed[key]}")
                continue
            engine.settle(key)
            result.build_s[key] = time.perf_counter() - t0
            log(f"  c8-{engine_name} {key}: built in {result.build_s[key]:.1f} s")
        for rep in range(sizes.reps):
            for key, (step, top_up) in plans.items():
                step()  # warm the connection and statement caches
                sample = timed_loop(step, sizes.claims, 60.0)
                result.samples.setdefault(key, []).append(sample)
                top_up(sample.jobs + 1)  # back to where the measurement started
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
                "step": SCENARIOS[key].step,
                "base": SCENARIOS[key].base,
                "failed": result.failed.get(key),
                "build_s": result.build_s.get(key),
                "us_per_step": _finite(result.us_per_job(key)),
                "ratio_to_base": _finite(result.ratio(key)),
                "samples": [dataclasses.asdict(s) for s in result.samples.get(key, [])],
            }
            for key in SCENARIOS
        },
    }
