"""Wd with and without the workers' registry (O-5, docs/adr/0024).

``Worker.run`` drains *jobs* pre-enqueued jobs (no-op handler, concurrency
4) and stops when the last one was handled; the time runs from the call to
the return of ``run`` (the last flush and the registry's last refresh
included). Three cases, interleaved round by round on each engine:

- ``off``: ``register_every_s=None``, no registry row;
- ``10s``: the default, one refresh every 10 s;
- ``50ms``: a refresh every 50 ms, 200 times the default, so that a cost
  per refresh would show.

Besides the rate, each run counts the worker's settle calls (``ack_each``)
and its refreshes (``report_worker``): the registry adds refreshes by time,
never a write per job. Run it from the repository root::

    .venv/bin/python -m bench.registry             # both engines, 5 rounds
    .venv/bin/python -m bench.registry --jobs 2000 --reps 3 --engines sqlite
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg

import alkstore

CASES: dict[str, float | None] = {"off": None, "10s": 10.0, "50ms": 0.05}
PG_URL = "postgresql://postgres@127.0.0.1:5432/postgres"


@dataclass
class Run:
    jobs: int
    seconds: float
    settles: int
    refreshes: int

    @property
    def rate(self) -> float:
        return self.jobs / self.seconds


def _drain(store: alkstore.Store, n: int, every_s: float | None) -> Run:
    name = f"bench-{uuid.uuid4().hex[:8]}"
    q = store.queue(name)
    for start in range(0, n, 500):
        q.enqueue_many([{"n": i, "to": "user@example.com"} for i in range(start, start + 500)])
    calls = {"ack_each": 0, "report_worker": 0}
    ack_each, report_worker = store.ack_each, store.report_worker

    def counting_ack(*args: Any, **kw: Any) -> list[bool]:
        calls["ack_each"] += 1
        return ack_each(*args, **kw)

    def counting_report(*args: Any, **kw: Any) -> None:
        calls["report_worker"] += 1
        report_worker(*args, **kw)

    store.ack_each = counting_ack  # type: ignore[method-assign]
    store.report_worker = counting_report  # type: ignore[method-assign]
    stop = threading.Event()
    handled = 0
    lock = threading.Lock()

    def handler(job: alkstore.Job) -> None:
        nonlocal handled
        with lock:
            handled += 1
            if handled == n:
                stop.set()

    worker = alkstore.Worker(store, q, handler, concurrency=4, register_every_s=every_s)
    try:
        t0 = time.perf_counter()
        worker.run(stop)
        seconds = time.perf_counter() - t0
    finally:
        del store.ack_each, store.report_worker
    assert q.stats().pending == 0 and q.stats().processing == 0
    return Run(handled, seconds, calls["ack_each"], calls["report_worker"])


@contextmanager
def _store(engine: str) -> Iterator[alkstore.Store]:
    if engine == "sqlite":
        with tempfile.TemporaryDirectory() as tmp:
            with alkstore.open(f"sqlite:///{tmp}/bench.db", synchronous="normal") as store:
                yield store
        return
    schema = f"bench_registry_{uuid.uuid4().hex[:8]}"
    try:
        with alkstore.open(PG_URL, schema=schema) as store:
            yield store
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--engines", nargs="+", default=["sqlite", "postgres"])
    args = parser.parse_args()
    for engine in args.engines:
        runs: dict[str, list[Run]] = {case: [] for case in CASES}
        with _store(engine) as store:
            _drain(store, min(args.jobs, 500), None)  # warm-up, not counted
            for _ in range(args.reps):
                for case, every in CASES.items():
                    runs[case].append(_drain(store, args.jobs, every))
        base = statistics.median(r.rate for r in runs["off"])
        print(f"\n{engine}: {args.jobs} jobs, concurrency 4, {args.reps} rounds (median)")
        print("| registry | jobs/s | vs off | spread | settles / 1000 jobs | refreshes / run |")
        print("|---|---:|---:|---:|---:|---:|")
        for case, rs in runs.items():
            rates = [r.rate for r in rs]
            med = statistics.median(rates)
            spread = (max(rates) - min(rates)) / 2 / med
            settles = statistics.median(1000 * r.settles / r.jobs for r in rs)
            refreshes = statistics.median(r.refreshes for r in rs)
            print(
                f"| {case} | {med:,.0f} | {med / base:.2f} | ±{spread:.0%} "
                f"| {settles:.1f} | {refreshes:g} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
