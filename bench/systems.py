"""The systems the benchmark drives, one adapter each.

Every adapter offers the same four operations on one queue named ``bench``:
enqueue one job in its own transaction (W1), enqueue a batch (W2), prefill
(untimed, the fastest way the system has), and claim + acknowledge up to *n*
jobs (W3). An adapter that lacks an operation leaves it out of ``workloads``,
and the report says "n/a" rather than inventing a stand-in.

Three kinds of system:

- ``raw``: a minimal hand-written jobs table with the same kind of claim
  statement as alkstore's (one ordered index, ``UPDATE ... WHERE id IN
  (SELECT ... ORDER BY ... LIMIT n)``, ``FOR UPDATE SKIP LOCKED`` on
  PostgreSQL) and a fenced ``DELETE`` as the ack: the raw-SQL limit.
- ``alkstore``: the public API of the two engines in this repository.
- ``peer``: other libraries through their own public API, installed only in
  the bench virtualenv. They are imported with :func:`importlib.import_module`
  (typed ``Any``) because the repository's type check runs in the
  development environment, where they are deliberately absent.

Async peers run their whole timed loop inside one event loop, so they pay
for asyncio only where their users do.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import itertools
import json
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import psycopg
from psycopg import sql

import alkstore

__all__ = [
    "PRODUCERS",
    "QUEUE",
    "Env",
    "Sample",
    "System",
    "Unavailable",
    "all_systems",
    "payload",
    "throwaway_database",
    "truncate",
]

QUEUE = "bench"
TO = "user@example.com"
#: Prefill and population inserts go in chunks of this many jobs.
CHUNK = 1_000
#: W1c: how many threads (or tasks) enqueue at once, one job per call each.
PRODUCERS = 16


def payload(i: int) -> dict[str, Any]:
    """The job every system enqueues: a small JSON object."""
    return {"n": i, "to": TO}


def payload_text(i: int) -> str:
    """The same payload as the JSON text the raw systems store, encoded per
    job with ``json.dumps`` as alkstore must encode a caller's value (and in
    the same compact form), so that the raw limit pays for it too."""
    return json.dumps(payload(i), separators=(",", ":"))


class Unavailable(Exception):
    """The system cannot run on this machine; the message says why."""


@dataclass(frozen=True)
class Env:
    """What a run gives its systems: a scratch directory for SQLite files
    and the URL of the run's throwaway PostgreSQL database (``None`` when
    no server answered)."""

    tmpdir: str
    pg_url: str | None
    pg_reason: str


@dataclass
class Sample:
    """One timed measurement."""

    jobs: int
    seconds: float
    cpu_s: float

    @property
    def rate(self) -> float:
        return self.jobs / self.seconds if self.seconds > 0 else 0.0


Step = Callable[[], int]
AsyncStep = Callable[[], Awaitable[int]]


def timed_loop(step: Step, target: int, cap_s: float) -> Sample:
    """Call *step* (which returns the jobs it handled; 0 means the queue is
    empty) until *target* jobs or *cap_s* seconds, whichever comes first."""
    jobs = 0
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    while jobs < target:
        done = step()
        if done == 0:
            break
        jobs += done
        if time.perf_counter() - t0 >= cap_s:
            break
    seconds = time.perf_counter() - t0
    return Sample(jobs, seconds, time.process_time() - cpu0)


async def async_timed_loop(step: AsyncStep, target: int, cap_s: float) -> Sample:
    """:func:`timed_loop` for coroutines, inside the caller's event loop."""
    jobs = 0
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    while jobs < target:
        done = await step()
        if done == 0:
            break
        jobs += done
        if time.perf_counter() - t0 >= cap_s:
            break
    seconds = time.perf_counter() - t0
    return Sample(jobs, seconds, time.process_time() - cpu0)


Producer = Callable[[int], None]


def threaded_loop(producers: list[Producer], warmup: int, target: int, cap_s: float) -> Sample:
    """W1c: every producer (one per thread) enqueues jobs one call at a time
    until *target* jobs in all or *cap_s* seconds; the time runs from the
    moment all threads are released to the last thread's end."""
    numbers = itertools.count()  # next() on a count is atomic under the GIL
    tickets = itertools.count()
    start = threading.Barrier(len(producers) + 1)
    errors: list[BaseException] = []

    def run(enqueue: Producer) -> None:
        try:
            for _ in range(warmup):
                enqueue(next(numbers))
        except BaseException as exc:
            errors.append(exc)
        start.wait()
        end = time.perf_counter() + cap_s
        try:
            while next(tickets) < target and time.perf_counter() < end:
                enqueue(next(numbers))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(p,), daemon=True) for p in producers]
    for t in threads:
        t.start()
    start.wait()
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    if errors:
        raise errors[0]
    # Tickets past the target, and the one each thread drew to see the end.
    jobs = min(target, next(tickets) - len(producers))
    return Sample(jobs, seconds, cpu)


def _now_us() -> int:
    return time.time_ns() // 1000


def _remove_db(path: str) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        with contextlib.suppress(FileNotFoundError):
            os.remove(path + suffix)


def _import(module: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise Unavailable(f"{module} is not installed ({exc}); run from the bench venv") from exc


def truncate(url: str, tables: list[str], *, analyze: bool = False) -> None:
    """Empty *tables* (``schema.table`` or ``table``) of the bench database."""
    idents = [sql.Identifier(*t.split(".")) for t in tables]
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("TRUNCATE {} RESTART IDENTITY CASCADE").format(sql.SQL(", ").join(idents))
        )
        if analyze:
            conn.execute(sql.SQL("ANALYZE {}").format(sql.SQL(", ").join(idents)))


def _analyze(url: str, tables: list[str]) -> None:
    idents = [sql.Identifier(*t.split(".")) for t in tables]
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("ANALYZE {}").format(sql.SQL(", ").join(idents)))


def _tables_like(url: str, prefix: str) -> list[str]:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename LIKE %s",
            (prefix + "%",),
        ).fetchall()
    return [str(r[0]) for r in rows]


# ---------------------------------------------------------------------- base


class System:
    """One system under test. Subclasses implement the operations they have.

    ``compare_to`` names the raw limit of the same engine and durability,
    and ``peer_of`` the alkstore system a peer is compared with.
    """

    def __init__(
        self,
        *,
        name: str,
        engine: str,
        kind: str,
        description: str,
        workloads: frozenset[str],
        compare_to: str | None = None,
        peer_of: str | None = None,
        sync_of: str | None = None,
    ) -> None:
        self.name = name
        self.engine = engine
        self.kind = kind
        self.description = description
        self.workloads = workloads
        self.compare_to = compare_to
        self.peer_of = peer_of
        #: The sync system an async one is the other face of.
        self.sync_of = sync_of
        self.env: Env | None = None

    # lifecycle -----------------------------------------------------------

    def start(self, env: Env) -> None:
        """Once per run: import, create tables; raise :class:`Unavailable`."""
        self.env = env

    def reset(self) -> None:
        """Before each measurement: an empty queue, nothing else."""

    def after_prefill(self) -> None:
        """After a prefill, before timing (PostgreSQL systems refresh the
        planner's statistics, as autovacuum would on a live table)."""

    def stop(self) -> None:
        """Once per run: close everything."""

    # operations --------------------------------------------------------

    def enqueue_one(self, i: int) -> None:
        raise NotImplementedError

    def enqueue_batch(self, start: int, n: int) -> None:
        raise NotImplementedError

    def prefill(self, n: int) -> None:
        """Put *n* jobs in the queue, the fastest way the system has."""
        done = 0
        while done < n:
            k = min(CHUNK, n - done)
            self.enqueue_batch(done, k)
            done += k

    def claim_ack(self, n: int) -> int:
        """Claim up to *n* jobs and acknowledge them; return how many."""
        raise NotImplementedError

    def producer(self) -> tuple[Producer, Callable[[], None]]:
        """W1c: an enqueue-one function for one more thread, and its closer.
        Thread-safe systems share themselves; raw ones open a connection."""
        return self.enqueue_one, lambda: None

    # measuring ---------------------------------------------------------

    def steps(self, workload: str, batch: int) -> Step:
        counter = iter(range(10**12))
        if workload == "W1":

            def one() -> int:
                self.enqueue_one(next(counter))
                return 1

            return one
        if workload == "W2":

            def many() -> int:
                self.enqueue_batch(next(counter) * batch, batch)
                return batch

            return many
        return lambda: self.claim_ack(batch)

    def measure(self, workload: str, batch: int, warmup: int, target: int, cap_s: float) -> Sample:
        if workload == "W1c":
            made = [self.producer() for _ in range(PRODUCERS)]
            try:
                return threaded_loop([p for p, _ in made], warmup, target, cap_s)
            finally:
                for _, close in made:
                    close()
        step = self.steps(workload, batch)
        for _ in range(warmup):
            step()
        return timed_loop(step, target, cap_s)


class AsyncSystem(System):
    """A system whose API is coroutines: one event loop per run, and the
    timed loop runs inside it."""

    _loop: asyncio.AbstractEventLoop | None = None

    def run(self, coro: Awaitable[Any]) -> Any:
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        return self._loop.run_until_complete(coro)

    def close_loop(self) -> None:
        if self._loop is not None:
            self._loop.close()
            self._loop = None

    async def a_enqueue_one(self, i: int) -> None:
        raise NotImplementedError

    async def a_enqueue_batch(self, start: int, n: int) -> None:
        raise NotImplementedError

    async def a_claim_ack(self, n: int) -> int:
        raise NotImplementedError

    def enqueue_one(self, i: int) -> None:
        self.run(self.a_enqueue_one(i))

    def enqueue_batch(self, start: int, n: int) -> None:
        self.run(self.a_enqueue_batch(start, n))

    def claim_ack(self, n: int) -> int:
        result: int = self.run(self.a_claim_ack(n))
        return result

    def a_steps(self, workload: str, batch: int) -> AsyncStep:
        counter = iter(range(10**12))
        if workload == "W1":

            async def one() -> int:
                await self.a_enqueue_one(next(counter))
                return 1

            return one
        if workload == "W2":

            async def many() -> int:
                await self.a_enqueue_batch(next(counter) * batch, batch)
                return batch

            return many
        return lambda: self.a_claim_ack(batch)

    def measure(self, workload: str, batch: int, warmup: int, target: int, cap_s: float) -> Sample:
        if workload == "W1c":
            concurrent: Sample = self.run(self.a_concurrent(warmup, target, cap_s))
            return concurrent
        step = self.a_steps(workload, batch)

        async def go() -> Sample:
            for _ in range(warmup):
                await step()
            return await async_timed_loop(step, target, cap_s)

        sample: Sample = self.run(go())
        return sample

    async def a_concurrent(self, warmup: int, target: int, cap_s: float) -> Sample:
        """W1c for coroutines: :data:`PRODUCERS` tasks on this loop, each
        awaiting one enqueue at a time."""
        numbers = itertools.count()
        tickets = itertools.count()
        for _ in range(warmup):
            await self.a_enqueue_one(next(numbers))

        async def run() -> None:
            end = time.perf_counter() + cap_s
            while next(tickets) < target and time.perf_counter() < end:
                await self.a_enqueue_one(next(numbers))

        cpu0 = time.process_time()
        t0 = time.perf_counter()
        await asyncio.gather(*(run() for _ in range(PRODUCERS)))
        seconds = time.perf_counter() - t0
        jobs = min(target, next(tickets) - PRODUCERS)
        return Sample(jobs, seconds, time.process_time() - cpu0)


ALL = frozenset({"W1", "W2", "W3b1", "W3b32"})
SINGLES = frozenset({"W1", "W3b1"})
#: The workloads of the systems that W1c (several producers at once) is for.
WITH_W1C = ALL | {"W1c"}


# ------------------------------------------------------------- raw SQLite

RAW_SQLITE_DDL = [
    """CREATE TABLE IF NOT EXISTS jobs (
        id INTEGER PRIMARY KEY,
        queue TEXT NOT NULL,
        payload TEXT NOT NULL,
        priority INTEGER NOT NULL DEFAULT 0,
        ready_at INTEGER NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        worker TEXT
    )""",
    "CREATE INDEX IF NOT EXISTS jobs_claim ON jobs (queue, priority DESC, ready_at, id)",
]
RAW_SQLITE_INSERT = "INSERT INTO jobs (queue, payload, ready_at) VALUES (?, ?, ?)"
# The same shape as alkstore's claim: walk the ordered index, stop after n,
# move ready_at to the claim deadline so that a lapsed claim is claimable again.
RAW_SQLITE_CLAIM = """
UPDATE jobs SET attempts = attempts + 1, ready_at = :deadline, worker = :worker
WHERE id IN (SELECT id FROM jobs WHERE queue = :queue AND ready_at <= :now
             ORDER BY priority DESC, ready_at, id LIMIT :n)
RETURNING id, payload, attempts
"""
RAW_SQLITE_ACK = "DELETE FROM jobs WHERE id = ? AND attempts = ?"


class RawSQLite(System):
    """sqlite3 on a WAL file, one autocommit statement per operation."""

    def __init__(self, synchronous: str) -> None:
        super().__init__(
            name=f"raw-sqlite-{synchronous}",
            engine="sqlite",
            kind="raw",
            description=f"sqlite3, WAL, synchronous={synchronous.upper()}, minimal jobs table",
            workloads=WITH_W1C,
        )
        self.synchronous = synchronous
        self.conn: sqlite3.Connection | None = None
        self.path = ""

    def reset(self) -> None:
        assert self.env is not None
        self.stop()
        self.path = os.path.join(self.env.tmpdir, f"{self.name}.db")
        _remove_db(self.path)
        conn = sqlite3.connect(self.path, isolation_level=None)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(f"PRAGMA synchronous = {self.synchronous.upper()}")
        for stmt in RAW_SQLITE_DDL:
            conn.execute(stmt)
        self.conn = conn

    def stop(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def _conn(self) -> sqlite3.Connection:
        assert self.conn is not None
        return self.conn

    def enqueue_one(self, i: int) -> None:
        self._conn().execute(RAW_SQLITE_INSERT, (QUEUE, payload_text(i), _now_us()))

    def producer(self) -> tuple[Producer, Callable[[], None]]:
        # One connection per thread, waiting for the write lock in SQLite's
        # busy handler (the sqlite3 default, 5 s): what threads without a
        # shared writer queue get.
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        conn.execute(f"PRAGMA synchronous = {self.synchronous.upper()}")

        def enqueue(i: int) -> None:
            conn.execute(RAW_SQLITE_INSERT, (QUEUE, payload_text(i), _now_us()))

        return enqueue, conn.close

    def enqueue_batch(self, start: int, n: int) -> None:
        conn = self._conn()
        now = _now_us()
        conn.execute("BEGIN")
        conn.executemany(
            RAW_SQLITE_INSERT, [(QUEUE, payload_text(i), now) for i in range(start, start + n)]
        )
        conn.execute("COMMIT")

    def claim_ack(self, n: int) -> int:
        conn = self._conn()
        now = _now_us()
        params = {"queue": QUEUE, "now": now, "deadline": now + 300_000_000, "worker": "w", "n": n}
        rows = conn.execute(RAW_SQLITE_CLAIM, params).fetchall()
        if not rows:
            return 0
        for r in rows:
            json.loads(r[1])  # alkstore hands out decoded payloads
        if len(rows) == 1:
            conn.execute(RAW_SQLITE_ACK, (rows[0][0], rows[0][2]))
        else:
            conn.execute("BEGIN")
            conn.executemany(RAW_SQLITE_ACK, [(r[0], r[2]) for r in rows])
            conn.execute("COMMIT")
        return len(rows)


# --------------------------------------------------------- raw PostgreSQL

RAW_PG_DDL = [
    """CREATE TABLE IF NOT EXISTS raw_jobs (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        queue text NOT NULL,
        payload json NOT NULL,
        priority integer NOT NULL DEFAULT 0,
        ready_at timestamptz NOT NULL DEFAULT now(),
        attempts integer NOT NULL DEFAULT 0,
        worker text
    )""",
    "CREATE INDEX IF NOT EXISTS raw_jobs_claim ON raw_jobs (queue, priority DESC, ready_at, id)",
]
RAW_PG_INSERT = "INSERT INTO raw_jobs (queue, payload) VALUES (%s, %s::json)"
RAW_PG_INSERT_MANY = (
    "INSERT INTO raw_jobs (queue, payload) SELECT %s, p::json FROM unnest(%s::text[]) AS p"
)
RAW_PG_CLAIM = """
UPDATE raw_jobs j SET attempts = j.attempts + 1,
    ready_at = now() + interval '300 seconds', worker = %(worker)s
FROM (SELECT id FROM raw_jobs WHERE queue = %(queue)s AND ready_at <= now()
      ORDER BY priority DESC, ready_at, id LIMIT %(n)s FOR UPDATE SKIP LOCKED) p
WHERE j.id = p.id
RETURNING j.id, j.payload::text, j.attempts
"""
RAW_PG_ACK = "DELETE FROM raw_jobs WHERE id = %s AND attempts = %s"
RAW_PG_ACK_MANY = """
DELETE FROM raw_jobs j USING unnest(%s::bigint[], %s::int[]) AS h(id, attempt)
WHERE j.id = h.id AND j.attempts = h.attempt
"""


class RawPostgres(System):
    """psycopg 3, one autocommit connection, one statement per operation."""

    def __init__(self) -> None:
        super().__init__(
            name="raw-postgres",
            engine="postgres",
            kind="raw",
            description="psycopg 3, autocommit, minimal jobs table, FOR UPDATE SKIP LOCKED",
            workloads=WITH_W1C,
        )
        self.conn: psycopg.Connection[Any] | None = None

    def start(self, env: Env) -> None:
        super().start(env)
        if env.pg_url is None:
            raise Unavailable(env.pg_reason)
        self.conn = psycopg.connect(env.pg_url, autocommit=True)
        for stmt in RAW_PG_DDL:
            self.conn.execute(stmt)

    def reset(self) -> None:
        assert self.env is not None and self.env.pg_url is not None
        truncate(self.env.pg_url, ["raw_jobs"])

    def after_prefill(self) -> None:
        assert self.env is not None and self.env.pg_url is not None
        _analyze(self.env.pg_url, ["raw_jobs"])

    def stop(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def _conn(self) -> psycopg.Connection[Any]:
        assert self.conn is not None
        return self.conn

    def enqueue_one(self, i: int) -> None:
        self._conn().execute(RAW_PG_INSERT, (QUEUE, payload_text(i)))

    def producer(self) -> tuple[Producer, Callable[[], None]]:
        assert self.env is not None and self.env.pg_url is not None
        conn = psycopg.connect(self.env.pg_url, autocommit=True)

        def enqueue(i: int) -> None:
            conn.execute(RAW_PG_INSERT, (QUEUE, payload_text(i)))

        return enqueue, conn.close

    def enqueue_batch(self, start: int, n: int) -> None:
        texts = [payload_text(i) for i in range(start, start + n)]
        self._conn().execute(RAW_PG_INSERT_MANY, (QUEUE, texts))

    def claim_ack(self, n: int) -> int:
        conn = self._conn()
        rows = conn.execute(RAW_PG_CLAIM, {"worker": "w", "queue": QUEUE, "n": n}).fetchall()
        if not rows:
            return 0
        for r in rows:
            json.loads(r[1])  # alkstore hands out decoded payloads
        if len(rows) == 1:
            conn.execute(RAW_PG_ACK, (rows[0][0], rows[0][2]))
        else:
            conn.execute(RAW_PG_ACK_MANY, ([r[0] for r in rows], [r[2] for r in rows]))
        return len(rows)


# ---------------------------------------------------------------- alkstore


class AlkstoreSystem(System):
    """The public API: ``enqueue``, ``enqueue_many``, ``claim`` + ``ack``
    for batch 1 (the worker's path), ``claim_batch`` + ``ack_batch`` above."""

    store: alkstore.Store | None = None
    queue: alkstore.Queue | None = None

    def _queue(self) -> alkstore.Queue:
        assert self.queue is not None
        return self.queue

    def enqueue_one(self, i: int) -> None:
        self._queue().enqueue(payload(i))

    def enqueue_batch(self, start: int, n: int) -> None:
        self._queue().enqueue_many([payload(i) for i in range(start, start + n)])

    def claim_ack(self, n: int) -> int:
        q = self._queue()
        if n == 1:
            job = q.claim("bench-worker")
            if job is None:
                return 0
            job.ack()
            return 1
        jobs = q.claim_batch("bench-worker", n)
        if not jobs:
            return 0
        q.ack_batch(jobs)
        return len(jobs)

    def stop(self) -> None:
        if self.store is not None:
            self.store.close()
            self.store = None
            self.queue = None


class AlkstoreSQLite(AlkstoreSystem):
    def __init__(self, synchronous: str) -> None:
        super().__init__(
            name=f"alkstore-sqlite-{synchronous}",
            engine="sqlite",
            kind="alkstore",
            description=f"alkstore SQLite engine, synchronous={synchronous}",
            workloads=WITH_W1C,
            compare_to=f"raw-sqlite-{synchronous}",
        )
        self.synchronous = synchronous
        self.path = ""

    def reset(self) -> None:
        assert self.env is not None
        self.stop()
        self.path = os.path.join(self.env.tmpdir, f"{self.name}.db")
        _remove_db(self.path)
        self.store = alkstore.open(f"sqlite:///{self.path}", synchronous=self.synchronous)
        self.queue = self.store.queue(QUEUE)


class AlkstorePostgres(AlkstoreSystem):
    SCHEMA = "alkstore_bench"

    def __init__(self) -> None:
        super().__init__(
            name="alkstore-postgres",
            engine="postgres",
            kind="alkstore",
            description="alkstore PostgreSQL engine (psycopg 3 pool)",
            workloads=WITH_W1C,
            compare_to="raw-postgres",
        )

    def start(self, env: Env) -> None:
        super().start(env)
        if env.pg_url is None:
            raise Unavailable(env.pg_reason)
        self.store = alkstore.open(env.pg_url, schema=self.SCHEMA)
        self.queue = self.store.queue(QUEUE)

    def _tables(self) -> list[str]:
        return [f"{self.SCHEMA}.jobs", f"{self.SCHEMA}.dead"]

    def reset(self) -> None:
        assert self.env is not None and self.env.pg_url is not None
        truncate(self.env.pg_url, self._tables())

    def after_prefill(self) -> None:
        assert self.env is not None and self.env.pg_url is not None
        _analyze(self.env.pg_url, self._tables())


class AlkstoreAsyncSystem(AsyncSystem):
    """The async face (``alkstore.open_async``), the same calls awaited in
    one event loop: ``enqueue``, ``enqueue_many``, ``claim`` + ``ack``,
    ``claim_batch`` + ``ack_batch``."""

    store: alkstore.AsyncStore | None = None
    queue: alkstore.AsyncQueue | None = None

    def _queue(self) -> alkstore.AsyncQueue:
        assert self.queue is not None
        return self.queue

    async def a_enqueue_one(self, i: int) -> None:
        await self._queue().enqueue(payload(i))

    async def a_enqueue_batch(self, start: int, n: int) -> None:
        await self._queue().enqueue_many([payload(i) for i in range(start, start + n)])

    async def a_claim_ack(self, n: int) -> int:
        q = self._queue()
        if n == 1:
            job = await q.claim("bench-worker")
            if job is None:
                return 0
            await job.ack()
            return 1
        jobs = await q.claim_batch("bench-worker", n)
        if not jobs:
            return 0
        await q.ack_batch(jobs)
        return len(jobs)

    def close_store(self) -> None:
        if self.store is not None:
            self.run(self.store.close())
            self.store = None
            self.queue = None

    def stop(self) -> None:
        self.close_store()
        self.close_loop()


class AlkstoreAsyncSQLite(AlkstoreAsyncSystem):
    def __init__(self, synchronous: str) -> None:
        super().__init__(
            name=f"alkstore-sqlite-{synchronous}-async",
            engine="sqlite",
            kind="alkstore",
            description=(
                f"alkstore SQLite engine, synchronous={synchronous}, async face (open_async)"
            ),
            workloads=WITH_W1C,
            compare_to=f"raw-sqlite-{synchronous}",
            sync_of=f"alkstore-sqlite-{synchronous}",
        )
        self.synchronous = synchronous
        self.path = ""

    def reset(self) -> None:
        assert self.env is not None
        self.close_store()
        self.path = os.path.join(self.env.tmpdir, f"{self.name}.db")
        _remove_db(self.path)
        url = f"sqlite:///{self.path}"
        self.store = self.run(alkstore.open_async(url, synchronous=self.synchronous))
        self.queue = self.store.queue(QUEUE)


class AlkstoreAsyncPostgres(AlkstoreAsyncSystem):
    SCHEMA = "alkstore_bench_async"

    def __init__(self) -> None:
        super().__init__(
            name="alkstore-postgres-async",
            engine="postgres",
            kind="alkstore",
            description="alkstore PostgreSQL engine, async face (psycopg 3 AsyncConnectionPool)",
            workloads=WITH_W1C,
            compare_to="raw-postgres",
            sync_of="alkstore-postgres",
        )

    def start(self, env: Env) -> None:
        super().start(env)
        if env.pg_url is None:
            raise Unavailable(env.pg_reason)
        self.store = self.run(alkstore.open_async(env.pg_url, schema=self.SCHEMA))
        self.queue = self.store.queue(QUEUE)

    def _tables(self) -> list[str]:
        return [f"{self.SCHEMA}.jobs", f"{self.SCHEMA}.dead"]

    def reset(self) -> None:
        assert self.env is not None and self.env.pg_url is not None
        truncate(self.env.pg_url, self._tables())

    def after_prefill(self) -> None:
        assert self.env is not None and self.env.pg_url is not None
        _analyze(self.env.pg_url, self._tables())


# ------------------------------------------------------------ peers: SQLite


class Huey(System):
    """huey's SqliteHuey through its task API. Its dequeue deletes the row
    in the same transaction (at-most-once: there is no ack), and it has no
    batch enqueue or batch dequeue."""

    def __init__(self, synchronous: str) -> None:
        super().__init__(
            name=f"huey-{synchronous}",
            engine="sqlite",
            kind="peer",
            description=(
                f"huey {{version}} SqliteHuey, WAL, synchronous={synchronous.upper()}"
                + (" (its default)" if synchronous == "full" else " (set by hand)")
                + "; dequeue deletes, no ack"
            ),
            workloads=SINGLES,
            peer_of=f"alkstore-sqlite-{synchronous}",
        )
        self.synchronous = synchronous
        self.huey: Any = None
        self.task: Any = None

    def start(self, env: Env) -> None:
        super().start(env)
        mod = _import("huey")
        self.description = self.description.format(version=mod.__version__)

    def reset(self) -> None:
        assert self.env is not None
        self.stop()
        mod = _import("huey")
        path = os.path.join(self.env.tmpdir, f"{self.name}.db")
        _remove_db(path)
        # fsync=None keeps SQLite's default (FULL); fsync=False would mean OFF.
        self.huey = mod.SqliteHuey(name=QUEUE, filename=path, results=False, fsync=None)
        if self.synchronous == "normal":
            self.huey.storage.conn.execute("PRAGMA synchronous = NORMAL")

        def noop(n: int, to: str) -> None:
            return None

        self.task = self.huey.task(name="noop")(noop)

    def stop(self) -> None:
        if self.huey is not None:
            self.huey.storage.close()
            self.huey = None

    def enqueue_one(self, i: int) -> None:
        self.task(i, TO)

    def prefill(self, n: int) -> None:
        for i in range(n):
            self.task(i, TO)

    def claim_ack(self, n: int) -> int:
        return 0 if self.huey.dequeue() is None else 1


class LiteQueue(System):
    """litequeue: ``put`` / ``pop`` / ``done``; hard-wired synchronous=NORMAL;
    done rows stay in the table; no batches."""

    def __init__(self) -> None:
        super().__init__(
            name="litequeue",
            engine="sqlite",
            kind="peer",
            description="litequeue {version}, WAL, synchronous=NORMAL (hard-wired)",
            workloads=SINGLES,
            peer_of="alkstore-sqlite-normal",
        )
        self.q: Any = None

    def start(self, env: Env) -> None:
        super().start(env)
        mod = _import("litequeue")
        self.description = self.description.format(version=mod.__version__)

    def reset(self) -> None:
        assert self.env is not None
        self.stop()
        path = os.path.join(self.env.tmpdir, f"{self.name}.db")
        _remove_db(path)
        self.q = _import("litequeue").LiteQueue(path, queue_name=QUEUE)

    def stop(self) -> None:
        if self.q is not None:
            self.q.conn.close()
            self.q = None

    def enqueue_one(self, i: int) -> None:
        self.q.put(json.dumps(payload(i)))

    def prefill(self, n: int) -> None:
        for i in range(n):
            self.q.put(json.dumps(payload(i)))

    def claim_ack(self, n: int) -> int:
        message = self.q.pop()
        if message is None:
            return 0
        json.loads(message.data)
        self.q.done(message.message_id)
        return 1


class PersistQueue(System):
    """persist-queue's SQLiteAckQueue: ``put`` / ``get`` / ``ack``, pickled
    items, WAL with SQLite's default synchronous (FULL); acked rows stay."""

    def __init__(self) -> None:
        super().__init__(
            name="persist-queue",
            engine="sqlite",
            kind="peer",
            description="persist-queue {version} SQLiteAckQueue, WAL, synchronous=FULL (default)",
            workloads=SINGLES,
            peer_of="alkstore-sqlite-full",
        )
        self.q: Any = None
        self.mod: Any = None

    def start(self, env: Env) -> None:
        super().start(env)
        self.mod = _import("persistqueue")
        self.description = self.description.format(version=self.mod.__version__)

    def reset(self) -> None:
        assert self.env is not None
        self.stop()
        path = os.path.join(self.env.tmpdir, self.name)
        if os.path.isdir(path):
            for entry in os.listdir(path):
                os.remove(os.path.join(path, entry))
        self.q = self.mod.SQLiteAckQueue(path, auto_commit=True, multithreading=False)

    def stop(self) -> None:
        if self.q is not None:
            with contextlib.suppress(Exception):
                self.q._getter.close()
                self.q._putter.close()
            self.q = None

    def enqueue_one(self, i: int) -> None:
        self.q.put(payload(i))

    def prefill(self, n: int) -> None:
        for i in range(n):
            self.q.put(payload(i))

    def claim_ack(self, n: int) -> int:
        try:
            item = self.q.get(block=False, raw=True)
        except self.mod.Empty:
            return 0
        self.q.ack(id=item["pqid"])
        return 1


# -------------------------------------------------------- peers: PostgreSQL


class PgQueuer(AsyncSystem):
    """pgqueuer's ``Queries`` on an async psycopg connection: ``enqueue``
    (scalar or lists), ``dequeue(batch_size)`` and ``log_jobs`` (which its
    worker calls to finish jobs: delete + insert into its log table)."""

    def __init__(self) -> None:
        super().__init__(
            name="pgqueuer",
            engine="postgres",
            kind="peer",
            description="pgqueuer {version}, Queries on psycopg AsyncConnection",
            workloads=ALL,
            peer_of="alkstore-postgres",
        )
        self.queries: Any = None
        self.conn: Any = None
        self.param: Any = None
        self.qm_id = uuid.uuid4()

    def start(self, env: Env) -> None:
        super().start(env)
        if env.pg_url is None:
            raise Unavailable(env.pg_reason)
        mod = _import("pgqueuer")
        queries_mod = _import("pgqueuer.queries")
        self.description = self.description.format(version=_version("pgqueuer", mod))
        self.param = {QUEUE: queries_mod.EntrypointExecutionParameter(concurrency_limit=0)}

        url = env.pg_url

        async def go() -> None:
            self.conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
            self.queries = queries_mod.Queries.from_psycopg_connection(self.conn)
            await self.queries.install()

        self.run(go())

    def reset(self) -> None:
        assert self.env is not None and self.env.pg_url is not None
        truncate(self.env.pg_url, _tables_like(self.env.pg_url, "pgqueuer"))

    def after_prefill(self) -> None:
        assert self.env is not None and self.env.pg_url is not None
        _analyze(self.env.pg_url, _tables_like(self.env.pg_url, "pgqueuer"))

    def stop(self) -> None:
        if self.conn is not None:
            self.run(self.conn.close())
            self.conn = None
        self.close_loop()

    async def a_enqueue_one(self, i: int) -> None:
        await self.queries.enqueue(QUEUE, json.dumps(payload(i)).encode(), 0)

    async def a_enqueue_batch(self, start: int, n: int) -> None:
        data = [json.dumps(payload(i)).encode() for i in range(start, start + n)]
        await self.queries.enqueue([QUEUE] * n, data, [0] * n)

    async def a_claim_ack(self, n: int) -> int:
        jobs = await self.queries.dequeue(
            batch_size=n,
            entrypoints=self.param,
            queue_manager_id=self.qm_id,
            global_concurrency_limit=None,
            heartbeat_timeout=timedelta(seconds=30),
        )
        if not jobs:
            return 0
        for job in jobs:
            json.loads(job.payload)
        await self.queries.log_jobs([(job, "successful", None) for job in jobs])
        return len(jobs)


class Procrastinate(AsyncSystem):
    """procrastinate's async App: ``defer_async``, ``batch_defer_async``,
    and the worker's own ``JobManager.fetch_job`` / ``finish_job`` (one job
    per round trip; there is no batch fetch). Finished jobs are deleted
    (its ``delete_jobs="successful"`` worker option)."""

    def __init__(self) -> None:
        super().__init__(
            name="procrastinate",
            engine="postgres",
            kind="peer",
            description="procrastinate {version}, PsycopgConnector (async pool)",
            workloads=frozenset({"W1", "W2", "W3b1"}),
            peer_of="alkstore-postgres",
        )
        self.app: Any = None
        self.task: Any = None
        self.status: Any = None
        self.worker_id = 0

    def start(self, env: Env) -> None:
        super().start(env)
        if env.pg_url is None:
            raise Unavailable(env.pg_reason)
        mod = _import("procrastinate")
        self.status = _import("procrastinate.jobs").Status.SUCCEEDED
        self.description = self.description.format(version=_version("procrastinate", mod))
        self.app = mod.App(connector=mod.PsycopgConnector(conninfo=env.pg_url))

        def noop(n: int, to: str) -> None:
            return None

        self.task = self.app.task(name="noop", queue=QUEUE)(noop)

        async def go() -> None:
            await self.app.open_async()
            await self.app.schema_manager.apply_schema_async()

        self.run(go())

    def reset(self) -> None:
        assert self.env is not None and self.env.pg_url is not None
        truncate(self.env.pg_url, _tables_like(self.env.pg_url, "procrastinate"))
        self.worker_id = int(self.run(self.app.job_manager.register_worker()))

    def after_prefill(self) -> None:
        assert self.env is not None and self.env.pg_url is not None
        _analyze(self.env.pg_url, _tables_like(self.env.pg_url, "procrastinate"))

    def stop(self) -> None:
        if self.app is not None:
            self.run(self.app.close_async())
            self.app = None
        self.close_loop()

    async def a_enqueue_one(self, i: int) -> None:
        await self.task.defer_async(**payload(i))

    async def a_enqueue_batch(self, start: int, n: int) -> None:
        await self.task.batch_defer_async(*[payload(i) for i in range(start, start + n)])

    async def a_claim_ack(self, n: int) -> int:
        manager = self.app.job_manager
        job = await manager.fetch_job(queues=[QUEUE], worker_id=self.worker_id)
        if job is None:
            return 0
        await manager.finish_job(job, self.status, delete_job=True)
        return 1


class NotRun(System):
    """A peer we wanted but do not run here; listed with the reason."""

    def __init__(self, name: str, engine: str, reason: str) -> None:
        super().__init__(
            name=name,
            engine=engine,
            kind="peer",
            description=reason,
            workloads=frozenset(),
        )
        self.reason = reason

    def start(self, env: Env) -> None:
        raise Unavailable(self.reason)


def _version(dist: str, mod: Any) -> str:
    version = getattr(mod, "__version__", None)
    if version:
        return str(version)
    from importlib.metadata import version as dist_version

    return dist_version(dist)


def all_systems() -> list[System]:
    """Every system, in report order; fresh instances each call."""
    return [
        RawSQLite("full"),
        RawSQLite("normal"),
        AlkstoreSQLite("full"),
        AlkstoreSQLite("normal"),
        AlkstoreAsyncSQLite("full"),
        AlkstoreAsyncSQLite("normal"),
        Huey("full"),
        Huey("normal"),
        PersistQueue(),
        LiteQueue(),
        NotRun(
            "honker",
            "sqlite",
            "not installable here: PyPI offers 0.5.0 for no platform this machine has, and "
            "the 0.1-0.2.4 sdists build with Rust crates from crates.io, which is unreachable",
        ),
        RawPostgres(),
        AlkstorePostgres(),
        AlkstoreAsyncPostgres(),
        PgQueuer(),
        Procrastinate(),
        NotRun(
            "oban",
            "postgres",
            "not installable here: every release needs Python >= 3.12, and the bench venv "
            "uses the interpreter that runs run.py (3.11 on this machine)",
        ),
        NotRun(
            "chancy",
            "postgres",
            "not added: a job is finished by its Worker's batched update loop, not by a call "
            "we could time per job without running a whole worker; left out, not approximated",
        ),
    ]


@contextlib.contextmanager
def throwaway_database(admin_url: str) -> Iterator[tuple[str | None, str]]:
    """Create a database for this run and drop it at the end; yield its URL
    (or ``None`` and the reason when no server answers)."""
    name = f"alkstore_bench_{os.getpid()}_{int(time.time())}"
    try:
        admin = psycopg.connect(admin_url, autocommit=True, connect_timeout=5)
    except psycopg.Error as exc:
        yield None, f"no PostgreSQL at {admin_url}: {exc}".strip()
        return
    with admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        info = admin.info
        url = f"postgresql://{info.user}@{info.host}:{info.port}/{name}"
        try:
            yield url, ""
        finally:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
