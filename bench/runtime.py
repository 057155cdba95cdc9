"""The worker runtime's workloads: Wd (drain), W4 (producer and worker
processes) and W6 (cross-process wake latency), issues 9 and 11.

Like the throughput workloads, everything is measured in one run, in
interleaved rounds (round 1 of every case of every engine, then round 2, and
so on), and compared with a raw-SQL limit measured in the same rounds.

- **Wd**: *drain_jobs* jobs are enqueued (untimed, ``enqueue_many``), then
  ``Worker(concurrency=c).run_until_empty()`` with a sync no-op handler, and
  ``AsyncWorker(concurrency=c).run_until_empty()`` with a coroutine no-op
  handler, for each *c*. Time: from the call to its return (first claim to
  empty). The raw limit drains the same backlog with the raw system's claim
  of one job + fenced delete, one autocommit statement each, in a loop.
- **W4**: this process is the producer (one job per transaction, paced at
  *w4_rate* jobs/s or flat out); two worker processes, started fresh for
  each measurement and ready before the first enqueue, run
  ``alkstore.Worker`` (concurrency 4, the default) with a handler that only
  notes the time it started. Latency: from the return of the job's
  ``enqueue`` (its commit) to its handler's start, per job, on the machine's
  monotonic clock (one clock for all processes on Linux). Throughput: jobs
  over the time from the first enqueue to the last handler start. The raw
  limit runs the raw system's insert in the producer and, in each of two
  worker processes, the raw claim + delete, polling every millisecond while
  the queue is empty (no wakes; on SQLite a read first, so that an empty
  poll takes no write lock).
- **W6**: a waiter process blocks in ``claim(wait_s=...)`` (sync face, or
  the async face's ``await claim(...)``) on an empty queue; this process
  waits a moment so that the claim is surely blocked, enqueues one job and
  notes when ``enqueue`` returned; the waiter notes when ``claim`` returned
  with it. Latency: the difference.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import multiprocessing
import multiprocessing.connection
import sqlite3
import statistics
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg

import alkstore
from alkstore.worker import AsyncWorker
from bench.systems import (
    QUEUE,
    RAW_PG_ACK,
    RAW_PG_CLAIM,
    RAW_SQLITE_ACK,
    RAW_SQLITE_CLAIM,
    AlkstoreAsyncPostgres,
    AlkstoreAsyncSQLite,
    AlkstorePostgres,
    AlkstoreSQLite,
    AlkstoreSystem,
    Env,
    RawPostgres,
    RawSQLite,
    Sample,
    System,
    Unavailable,
)

__all__ = [
    "ENGINES",
    "FULL_RUNTIME",
    "QUICK_RUNTIME",
    "RuntimePlan",
    "RuntimeResult",
    "render",
    "run_runtime",
]

#: The engines, with the raw limit of each: the names ``--only`` matches
#: are ``wd-<engine>``, ``w4-<engine>`` and ``w6-<engine>``.
ENGINES = ["sqlite-full", "sqlite-normal", "postgres"]
#: W4's worker processes and their concurrency (alkstore's default).
W4_WORKERS = 2
W4_CONCURRENCY = 4
#: The raw W4 workers' poll interval while the queue is empty.
RAW_POLL_S = 0.001
RAW_SQLITE_PEEK = "SELECT 1 FROM jobs WHERE queue = ? AND ready_at <= ? LIMIT 1"
#: W6: the pause before each enqueue, so that the waiter is blocked by then.
W6_GAP_S = 0.03
#: No measurement waits longer than this for its jobs.
DEADLINE_S = 120.0


@dataclass(frozen=True)
class RuntimePlan:
    reps: int
    drain_jobs: int
    concurrencies: tuple[int, ...]
    w4_rate: float
    w4_paced_jobs: int
    w4_flat_jobs: int
    w6_wakes: int


FULL_RUNTIME = RuntimePlan(
    reps=5,
    drain_jobs=10_000,
    concurrencies=(1, 4, 32, 64),
    w4_rate=500.0,
    w4_paced_jobs=1_500,
    w4_flat_jobs=3_000,
    w6_wakes=40,
)
QUICK_RUNTIME = RuntimePlan(
    reps=2,
    drain_jobs=1_000,
    concurrencies=(1, 4, 32, 64),
    w4_rate=500.0,
    w4_paced_jobs=250,
    w4_flat_jobs=600,
    w6_wakes=8,
)


@dataclass
class Latency:
    """One W4 or W6 measurement: per-job latencies in seconds."""

    jobs: int
    seconds: float
    latencies_s: list[float]
    #: W4: CPU seconds of the producer (this process, while it enqueued)
    #: and of the worker processes (from ready to stopped, start-up excluded).
    producer_cpu_s: float = 0.0
    workers_cpu_s: float = 0.0
    #: W4: the workers' claim calls, and how many of them found nothing
    #: (raw: polls, most of them on SQLite stopped by the read).
    claims: int = 0
    empty_claims: int = 0

    @property
    def rate(self) -> float:
        return self.jobs / self.seconds if self.seconds > 0 else 0.0

    def percentile(self, p: float) -> float:
        values = sorted(self.latencies_s)
        if not values:
            return float("nan")
        k = min(len(values) - 1, max(0, round(p / 100 * len(values) + 0.5) - 1))
        return values[k]


@dataclass
class RuntimeResult:
    """Everything measured for one engine."""

    engine: str
    drain: dict[str, list[Sample]] = field(default_factory=dict)
    w4: dict[str, list[Latency]] = field(default_factory=dict)
    w6: dict[str, list[Latency]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def drain_rate(self, case: str) -> float | None:
        rates = [s.rate for s in self.drain.get(case, []) if s.jobs]
        return statistics.median(rates) if rates else None

    def drain_spread(self, case: str) -> float | None:
        rates = [s.rate for s in self.drain.get(case, []) if s.jobs]
        if len(rates) < 2:
            return None
        return (max(rates) - min(rates)) / 2 / statistics.median(rates)


# ------------------------------------------------------------------ systems


@dataclass
class EngineSystems:
    """The systems one engine's cases run on, started once per run."""

    raw: System
    sync: AlkstoreSystem
    asynk: AlkstoreAsyncSQLite | AlkstoreAsyncPostgres


def _systems(engine: str) -> EngineSystems:
    if engine == "postgres":
        return EngineSystems(RawPostgres(), AlkstorePostgres(), AlkstoreAsyncPostgres())
    durability = engine.split("-", 1)[1]
    return EngineSystems(
        RawSQLite(durability), AlkstoreSQLite(durability), AlkstoreAsyncSQLite(durability)
    )


def _prefill(system: System, n: int) -> None:
    system.reset()
    system.prefill(n)
    system.after_prefill()


# ------------------------------------------------------------------- Wd


def _noop(job: alkstore.Job) -> None:
    return None


async def _anoop(job: alkstore.AsyncJob) -> None:
    return None


def _drain_raw(raw: System, n: int) -> Sample:
    _prefill(raw, n)
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    jobs = 0
    while raw.claim_ack(1):
        jobs += 1
    return Sample(jobs, time.perf_counter() - t0, time.process_time() - cpu0)


def _drain_worker(sync: AlkstoreSystem, n: int, c: int) -> Sample:
    _prefill(sync, n)
    worker = alkstore.Worker(sync.store, QUEUE, _noop, concurrency=c)
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    jobs = worker.run_until_empty()
    return Sample(jobs, time.perf_counter() - t0, time.process_time() - cpu0)


def _drain_async(asynk: AlkstoreAsyncSQLite | AlkstoreAsyncPostgres, n: int, c: int) -> Sample:
    _prefill(asynk, n)

    async def go() -> Sample:
        worker = AsyncWorker(asynk.store, QUEUE, _anoop, concurrency=c)
        cpu0 = time.process_time()
        t0 = time.perf_counter()
        jobs = await worker.run_until_empty()
        return Sample(jobs, time.perf_counter() - t0, time.process_time() - cpu0)

    sample: Sample = asynk.run(go())
    return sample


def drain_cases(plan: RuntimePlan) -> list[str]:
    return [
        "raw",
        *(f"worker-c{c}" for c in plan.concurrencies),
        *(f"async-worker-c{c}" for c in plan.concurrencies),
    ]


def _drain_one(systems: EngineSystems, case: str, n: int) -> Sample:
    if case == "raw":
        return _drain_raw(systems.raw, n)
    kind, c = case.rsplit("-c", 1)
    if kind == "worker":
        return _drain_worker(systems.sync, n, int(c))
    return _drain_async(systems.asynk, n, int(c))


# ------------------------------------------------------------ W4 and W6


@dataclass(frozen=True)
class Target:
    """What a child process opens: picklable (spawned children)."""

    kind: str  # "raw" or "alkstore"
    engine: str
    url: str  # a sqlite:/// URL or a PostgreSQL URL
    opts: dict[str, Any]


def _target(system: System, env: Env) -> Target:
    if isinstance(system, RawSQLite):
        return Target("raw", "sqlite", system.path, {"synchronous": system.synchronous})
    if isinstance(system, RawPostgres):
        assert env.pg_url is not None
        return Target("raw", "postgres", env.pg_url, {})
    if isinstance(system, AlkstoreSQLite):
        return Target(
            "alkstore", "sqlite", f"sqlite:///{system.path}", {"synchronous": system.synchronous}
        )
    if isinstance(system, AlkstorePostgres):
        assert env.pg_url is not None
        return Target("alkstore", "postgres", env.pg_url, {"schema": AlkstorePostgres.SCHEMA})
    raise TypeError(system)


def _counted(counter: Any) -> None:
    with counter.get_lock():
        counter.value += 1


class CountingQueue:
    """A queue handle that counts the worker's claims (W4's diagnostics):
    how many, and how many came back empty. Everything else is the queue's."""

    def __init__(self, queue: alkstore.Queue) -> None:
        self._queue = queue
        self.claims = 0
        self.empty = 0

    def claim_batch(self, *args: Any, **kwargs: Any) -> list[alkstore.Job]:
        jobs = self._queue.claim_batch(*args, **kwargs)
        self.claims += 1
        self.empty += not jobs
        return jobs

    def __getattr__(self, name: str) -> Any:
        return getattr(self._queue, name)


def w4_worker_main(
    target: Target,
    ready: Any,
    stop: Any,
    counter: Any,
    out: multiprocessing.connection.Connection,
) -> None:
    """A W4 worker process: run until *stop*, then send the start times."""
    starts: list[tuple[int, float]] = []
    claims = empty = 0
    if target.kind == "alkstore":
        store = alkstore.open(target.url, **target.opts)

        def handler(job: alkstore.Job) -> None:
            starts.append((job.payload["n"], time.monotonic()))
            _counted(counter)

        counted = CountingQueue(store.queue(QUEUE))
        worker = alkstore.Worker(None, counted, handler, concurrency=W4_CONCURRENCY)
        stopping = threading.Event()

        def watch() -> None:
            stop.wait()
            stopping.set()

        threading.Thread(target=watch, daemon=True).start()
        cpu0 = time.process_time()
        ready.set()
        worker.run(stop=stopping)
        claims, empty = counted.claims, counted.empty
        store.close()
    else:
        claim, ack, close = _raw_ops(target)
        cpu0 = time.process_time()
        ready.set()
        while True:
            rows = claim()
            claims += 1
            if not rows:
                empty += 1
                if stop.is_set():
                    break
                time.sleep(RAW_POLL_S)
                continue
            job_id, text, attempts = rows[0]
            starts.append((json.loads(text)["n"], time.monotonic()))
            _counted(counter)
            ack(job_id, attempts)
        close()
    out.send((starts, time.process_time() - cpu0, claims, empty))
    out.close()


def _raw_ops(
    target: Target,
) -> tuple[Callable[[], list[Any]], Callable[[int, int], None], Callable[[], None]]:
    """The raw system's claim of one job and fenced delete, for a child."""
    if target.engine == "sqlite":
        conn = sqlite3.connect(target.url, isolation_level=None, timeout=10)
        conn.execute(f"PRAGMA synchronous = {target.opts['synchronous'].upper()}")

        def claim() -> list[Any]:
            now = time.time_ns() // 1000
            # A read first, so that an empty poll takes no write lock away
            # from the producer (SQLite has one writer at a time).
            if conn.execute(RAW_SQLITE_PEEK, (QUEUE, now)).fetchone() is None:
                return []
            params = {
                "queue": QUEUE,
                "now": now,
                "deadline": now + 300_000_000,
                "worker": "w",
                "n": 1,
            }
            return conn.execute(RAW_SQLITE_CLAIM, params).fetchall()

        def ack(job_id: int, attempts: int) -> None:
            conn.execute(RAW_SQLITE_ACK, (job_id, attempts))

        return claim, ack, conn.close
    pg = psycopg.connect(target.url, autocommit=True)

    def pg_claim() -> list[Any]:
        return pg.execute(RAW_PG_CLAIM, {"worker": "w", "queue": QUEUE, "n": 1}).fetchall()

    def pg_ack(job_id: int, attempts: int) -> None:
        pg.execute(RAW_PG_ACK, (job_id, attempts))

    return pg_claim, pg_ack, pg.close


def _context() -> multiprocessing.context.SpawnContext:
    # Spawned, never forked: the parent holds open connections and threads.
    return multiprocessing.get_context("spawn")


def _w4_one(system: System, env: Env, jobs: int, rate: float | None) -> Latency:
    ctx = _context()
    system.reset()
    target = _target(system, env)
    stop = ctx.Event()
    counter = ctx.Value("q", 0)
    procs = []
    pipes = []
    readies = []
    for _ in range(W4_WORKERS):
        ready = ctx.Event()
        receive, send = ctx.Pipe(duplex=False)
        proc = ctx.Process(
            target=w4_worker_main, args=(target, ready, stop, counter, send), daemon=True
        )
        proc.start()
        send.close()
        procs.append(proc)
        pipes.append(receive)
        readies.append(ready)
    try:
        for ready in readies:
            if not ready.wait(60):
                raise RuntimeError("a W4 worker process did not start")
        time.sleep(0.3)  # the workers are in their first blocking claim by now
        called = [0.0] * jobs
        returned = [0.0] * jobs
        cpu0 = time.process_time()
        t0 = time.monotonic()
        for i in range(jobs):
            if rate is not None:
                due = t0 + i / rate
                pause = due - time.monotonic()
                if pause > 0:
                    time.sleep(pause)
            called[i] = time.monotonic()
            system.enqueue_one(i)
            returned[i] = time.monotonic()
        producer_cpu = time.process_time() - cpu0
        deadline = time.monotonic() + DEADLINE_S
        while counter.value < jobs and time.monotonic() < deadline:
            time.sleep(0.005)
        stop.set()
        starts: dict[int, float] = {}
        workers_cpu = 0.0
        claims = empty = 0
        for receive in pipes:
            their_starts, their_cpu, their_claims, their_empty = receive.recv()
            workers_cpu += their_cpu
            claims += their_claims
            empty += their_empty
            for n, t in their_starts:
                starts[n] = min(t, starts.get(n, t))  # a job run twice: its first start
    finally:
        stop.set()
        for proc in procs:
            proc.join(30)
            if proc.is_alive():
                proc.kill()
                proc.join()
    if len(starts) < jobs:
        raise RuntimeError(f"W4: {len(starts)} of {jobs} jobs started")
    latencies = [starts[i] - returned[i] for i in range(jobs)]
    return Latency(
        jobs, max(starts.values()) - called[0], latencies, producer_cpu, workers_cpu, claims, empty
    )


def w6_waiter_main(target: Target, face: str, conn: multiprocessing.connection.Connection) -> None:
    """A W6 waiter: block in a claim, report when it returned, ack, repeat
    until the job numbered -1."""
    if face == "sync":
        store = alkstore.open(target.url, **target.opts)
        q = store.queue(QUEUE)
        conn.send("ready")
        while True:
            job = q.claim("w6", wait_s=5)
            woke = time.monotonic()
            if job is None:
                continue
            n = job.payload["n"]
            job.ack()
            if n < 0:
                break
            conn.send((n, woke))
        store.close()
    else:

        async def go() -> None:
            store = await alkstore.open_async(target.url, **target.opts)
            q = store.queue(QUEUE)
            conn.send("ready")
            while True:
                job = await q.claim("w6", wait_s=5)
                woke = time.monotonic()
                if job is None:
                    continue
                n = job.payload["n"]
                await job.ack()
                if n < 0:
                    break
                conn.send((n, woke))
            await store.close()

        asyncio.run(go())
    conn.close()


def _w6_one(system: AlkstoreSystem, env: Env, face: str, wakes: int) -> Latency:
    ctx = _context()
    system.reset()
    q = system.store.queue(QUEUE) if system.store is not None else None
    assert q is not None
    mine, theirs = ctx.Pipe()
    proc = ctx.Process(target=w6_waiter_main, args=(_target(system, env), face, theirs))
    proc.start()
    theirs.close()
    latencies: list[float] = []
    t_first = t_last = 0.0
    try:
        if not mine.poll(60) or mine.recv() != "ready":
            raise RuntimeError("the W6 waiter did not start")
        time.sleep(0.3)
        for i in range(wakes):
            time.sleep(W6_GAP_S)
            q.enqueue({"n": i})
            returned = time.monotonic()
            if i == 0:
                t_first = returned
            if not mine.poll(30):
                raise RuntimeError("the W6 waiter did not wake within 30 s")
            n, woke = mine.recv()
            assert n == i, (n, i)
            latencies.append(woke - returned)
            t_last = woke
        q.enqueue({"n": -1})
        proc.join(30)
    finally:
        if proc.is_alive():
            proc.kill()
            proc.join()
    return Latency(wakes, t_last - t_first, latencies)


def w4_cases() -> list[str]:
    return ["raw-paced", "raw-flat", "alkstore-paced", "alkstore-flat"]


def _w4_case(systems: EngineSystems, env: Env, case: str, plan: RuntimePlan) -> Latency:
    kind, mode = case.split("-")
    system = systems.raw if kind == "raw" else systems.sync
    if mode == "paced":
        return _w4_one(system, env, plan.w4_paced_jobs, plan.w4_rate)
    return _w4_one(system, env, plan.w4_flat_jobs, None)


# ------------------------------------------------------------------ run


Log = Callable[[str], None]


@contextlib.contextmanager
def _started(systems: EngineSystems, env: Env) -> Iterator[None]:
    started: list[System] = []
    try:
        for s in (systems.raw, systems.sync, systems.asynk):
            s.start(env)
            started.append(s)
        yield
    finally:
        for s in started:
            with contextlib.suppress(Exception):
                s.stop()


def run_runtime(
    engines: dict[str, set[str]],
    env: Env,
    plan: RuntimePlan,
    log: Log,
    reps: int | None = None,
) -> list[RuntimeResult]:
    """Measure the workloads ``engines[engine]`` (a subset of Wd, W4, W6)
    of each engine, round-robin over engines and cases for *reps* rounds."""
    results = {e: RuntimeResult(e) for e in engines}
    systems = {e: _systems(e) for e in engines}
    stack = contextlib.ExitStack()
    live: list[str] = []
    with stack:
        for engine in engines:
            try:
                stack.enter_context(_started(systems[engine], env))
                live.append(engine)
            except Unavailable as exc:
                results[engine].errors.append(f"not run: {exc}")
            except Exception as exc:
                traceback.print_exc()
                results[engine].errors.append(f"failed to start: {type(exc).__name__}: {exc}")
        for rep in range(reps or plan.reps):
            for engine in live:
                result, s = results[engine], systems[engine]
                line: list[str] = []
                for workload, cases in (
                    ("Wd", drain_cases(plan)),
                    ("W4", w4_cases()),
                    ("W6", ["sync", "async"]),
                ):
                    if workload not in engines[engine]:
                        continue
                    for case in cases:
                        try:
                            if workload == "Wd":
                                sample = _drain_one(s, case, plan.drain_jobs)
                                if sample.jobs != plan.drain_jobs:
                                    raise RuntimeError(
                                        f"drained {sample.jobs} of {plan.drain_jobs} jobs"
                                    )
                                result.drain.setdefault(case, []).append(sample)
                                line.append(f"Wd {case} {sample.rate:,.0f}/s")
                            elif workload == "W4":
                                lat = _w4_case(s, env, case, plan)
                                result.w4.setdefault(case, []).append(lat)
                                line.append(
                                    f"W4 {case} {lat.rate:,.0f}/s "
                                    f"p50 {lat.percentile(50) * 1e3:.2f} ms"
                                )
                            else:
                                lat = _w6_one(s.sync, env, case, plan.w6_wakes)
                                result.w6.setdefault(case, []).append(lat)
                                line.append(f"W6 {case} p50 {lat.percentile(50) * 1e3:.2f} ms")
                        except Exception as exc:
                            traceback.print_exc()
                            result.errors.append(
                                f"{workload} {case} failed in rep {rep + 1}: "
                                f"{type(exc).__name__}: {exc}"
                            )
                log(f"runtime rep {rep + 1}/{reps or plan.reps} {engine}: " + ", ".join(line))
    return [results[e] for e in engines]


# --------------------------------------------------------------- report


def _pooled(samples: Sequence[Latency], p: float) -> float:
    """A percentile of every latency of every repetition pooled together."""
    pooled = Latency(0, 0.0, [x for s in samples for x in s.latencies_s])
    return pooled.percentile(p)


def _median_of(samples: Sequence[Latency], p: float) -> float:
    """The median over repetitions of each repetition's percentile: a burst
    of load from other processes spoils one repetition, not the figure."""
    return statistics.median(s.percentile(p) for s in samples)


def describe(result: RuntimeResult) -> dict[str, Any]:
    return {
        "engine": result.engine,
        "errors": result.errors,
        "drain": {
            case: {
                "median_jobs_per_s": result.drain_rate(case),
                "spread": result.drain_spread(case),
                "samples": [dataclasses.asdict(s) for s in samples],
            }
            for case, samples in result.drain.items()
        },
        "w4": {
            case: {
                "median_jobs_per_s": statistics.median(s.rate for s in samples),
                "p50_ms": 1e3 * _median_of(samples, 50),
                "p99_ms": 1e3 * _median_of(samples, 99),
                "pooled_p50_ms": 1e3 * _pooled(samples, 50),
                "pooled_p99_ms": 1e3 * _pooled(samples, 99),
                "samples": [
                    {
                        "jobs": s.jobs,
                        "seconds": s.seconds,
                        "p50_ms": 1e3 * s.percentile(50),
                        "p99_ms": 1e3 * s.percentile(99),
                        "max_ms": 1e3 * max(s.latencies_s),
                        "producer_cpu_us_per_job": 1e6 * s.producer_cpu_s / s.jobs,
                        "workers_cpu_us_per_job": 1e6 * s.workers_cpu_s / s.jobs,
                        "claims_per_job": s.claims / s.jobs,
                        "empty_claims_per_job": s.empty_claims / s.jobs,
                    }
                    for s in samples
                ],
            }
            for case, samples in result.w4.items()
        },
        "w6": {
            case: {
                "p50_ms": 1e3 * _median_of(samples, 50),
                "p99_ms": 1e3 * _median_of(samples, 99),
                "pooled_p50_ms": 1e3 * _pooled(samples, 50),
                "pooled_p99_ms": 1e3 * _pooled(samples, 99),
                "latencies_ms": [[1e3 * x for x in s.latencies_s] for s in samples],
            }
            for case, samples in result.w6.items()
        },
    }


def _ms(value: float) -> str:
    return f"{value:.2f}"


def render(results: list[RuntimeResult], plan: RuntimePlan, reps: int) -> list[str]:
    """The Markdown section of the runtime workloads."""
    md: list[str] = []
    drained = [r for r in results if r.drain]
    if drained:
        cs = plan.concurrencies
        md.append(
            f"**Wd worker drain**: {plan.drain_jobs:,} jobs enqueued beforehand, jobs/s "
            "from the first claim to empty (median of "
            f"{reps}, ± half the spread); no-op handlers (sync for `Worker`, a coroutine "
            "for `AsyncWorker`). The raw limit is the raw system's claim of one job + "
            "fenced delete in a loop over the same backlog."
        )
        md.append("")
        md.append(
            "| engine | raw claim1+ack1 | "
            + " | ".join(f"Worker c={c}" for c in cs)
            + " | "
            + " | ".join(f"AsyncWorker c={c}" for c in cs)
            + " |"
        )
        md.append("|---|---:|" + "---:|" * (2 * len(cs)))
        for r in drained:
            cells = []
            for case in drain_cases(plan):
                rate, spread = r.drain_rate(case), r.drain_spread(case)
                cell = "n/a" if rate is None else f"{rate:,.0f}"
                if rate is not None and spread is not None:
                    cell += f" ±{spread * 100:.0f}%"
                cells.append(cell)
            md.append(f"| {r.engine} | " + " | ".join(cells) + " |")
        md.append("")
        md.append(
            "Wd against the raw limit (÷ raw claim1+ack1; target, issue 9: Worker c=32 "
            "at least 5x on SQLite FULL and PostgreSQL, 1.5x on SQLite NORMAL; throughput "
            "never falls as c grows):"
        )
        md.append("")
        md.append(
            "| engine | "
            + " | ".join(f"Worker c={c}" for c in cs)
            + " | "
            + " | ".join(f"AsyncWorker c={c}" for c in cs)
            + " | Worker c=64 ÷ c=1 | AsyncWorker ÷ Worker, c=32 |"
        )
        md.append("|---|" + "---:|" * (2 * len(cs) + 2))
        for r in drained:
            raw = r.drain_rate("raw")
            cells = []
            for case in drain_cases(plan)[1:]:
                rate = r.drain_rate(case)
                cells.append("n/a" if rate is None or not raw else f"{rate / raw:.2f}")
            hi, lo = r.drain_rate(f"worker-c{cs[-1]}"), r.drain_rate(f"worker-c{cs[0]}")
            cells.append("n/a" if hi is None or not lo else f"{hi / lo:.2f}")
            a32, s32 = r.drain_rate("async-worker-c32"), r.drain_rate("worker-c32")
            cells.append("n/a" if a32 is None or not s32 else f"{a32 / s32:.2f}")
            md.append(f"| {r.engine} | " + " | ".join(cells) + " |")
        md.append("")
    with_w4 = [r for r in results if r.w4]
    if with_w4:
        md.append(
            f"**W4 producer + {W4_WORKERS} worker processes**: this process enqueues one job "
            f"per transaction, paced at {plan.w4_rate:.0f} jobs/s ({plan.w4_paced_jobs:,} "
            f"jobs) or flat out ({plan.w4_flat_jobs:,} jobs); each worker process runs "
            f"`Worker(concurrency={W4_CONCURRENCY})` (raw: a claim + delete loop polling "
            f"every {RAW_POLL_S * 1e3:g} ms when empty). Latency from the enqueue's return "
            "(its commit) to the handler's start: the median over repetitions of each "
            "repetition's percentile (one burst of load spoils one repetition, not the "
            "figure; every sample is in the JSON); throughput from the first enqueue to "
            "the last start (median). "
            "Target (issue 9): paced p50 ≤ 5 ms and p99 ≤ 50 ms; flat out at least 0.8x "
            "the raw W4 limit."
        )
        md.append("")
        md.append(
            "| engine | system | paced jobs/s | paced p50 ms | paced p99 ms | "
            "flat jobs/s | flat p50 ms | flat p99 ms | flat ÷ raw flat | "
            "flat CPU µs/job: producer | workers |"
        )
        md.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in with_w4:
            raw_flat = r.w4.get("raw-flat")
            raw_rate = statistics.median(s.rate for s in raw_flat) if raw_flat else None
            for kind in ("raw", "alkstore"):
                cells = []
                flat_rate = None
                cpu = ["n/a", "n/a"]
                for mode in ("paced", "flat"):
                    samples = r.w4.get(f"{kind}-{mode}")
                    if not samples:
                        cells += ["n/a"] * 3
                        continue
                    if mode == "flat":
                        producer = statistics.median(s.producer_cpu_s / s.jobs for s in samples)
                        workers = statistics.median(s.workers_cpu_s / s.jobs for s in samples)
                        cpu = [f"{1e6 * producer:,.0f}", f"{1e6 * workers:,.0f}"]
                    rate = statistics.median(s.rate for s in samples)
                    if mode == "flat":
                        flat_rate = rate
                    cells += [
                        f"{rate:,.0f}",
                        _ms(1e3 * _median_of(samples, 50)),
                        _ms(1e3 * _median_of(samples, 99)),
                    ]
                vs = "n/a" if flat_rate is None or not raw_rate else f"{flat_rate / raw_rate:.2f}"
                md.append(
                    f"| {r.engine} | {kind} | "
                    + " | ".join(cells)
                    + f" | {vs} | "
                    + " | ".join(cpu)
                    + " |"
                )
        md.append("")
    with_w6 = [r for r in results if r.w6]
    if with_w6:
        md.append(
            f"**W6 cross-process wake**: a waiter process blocked in `claim(wait_s=5)`; "
            f"{plan.w6_wakes} wakes per repetition, {W6_GAP_S * 1e3:g} ms apart; latency "
            "from `enqueue`'s return in this process to `claim`'s return in the waiter "
            "(median over repetitions of each repetition's percentile; pooled: over every "
            "wake of every repetition). Target (issue 9): p50 ≤ 3 ms."
        )
        md.append("")
        md.append("| engine | face | wakes | p50 ms | p99 ms | pooled p99 ms | max ms |")
        md.append("|---|---|---:|---:|---:|---:|---:|")
        for r in with_w6:
            for face, samples in r.w6.items():
                every = [x for s in samples for x in s.latencies_s]
                md.append(
                    f"| {r.engine} | {face} | {len(every)} | {_ms(1e3 * _median_of(samples, 50))} "
                    f"| {_ms(1e3 * _median_of(samples, 99))} | {_ms(1e3 * _pooled(samples, 99))} "
                    f"| {_ms(1e3 * max(every))} |"
                )
        md.append("")
    failed = [(r.engine, e) for r in results for e in r.errors]
    if failed:
        md.append("**Runtime workloads not measured, or not completely:**")
        md.append("")
        for engine, error in failed:
            md.append(f"- {engine}: {error}")
        md.append("")
    return md
