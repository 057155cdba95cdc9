#!/usr/bin/env python3
"""Q-27 against C-8: what a claim costs with 1,000 paused queues, against
the same store with none (SPEC §21: "claim cost within C-8 with 1,000
paused queues"; C-8's bound here is the suite's 1.2x).

    .venv/bin/python bench/pause.py                  both engines
    .venv/bin/python bench/pause.py --engines sqlite --claims 500 --reps 3

For each engine two stores are built before any timing: ``none`` (the
queue ``q`` with ``--waiting`` ready jobs) and ``paused`` (the same, plus
1,000 paused queues holding ten ready jobs each). Each timed step is one
``claim()`` + ``ack()`` on ``q``, ``--claims`` times, the two stores measured
in turn ``--reps`` times (so machine noise hits both alike), topped back up
untimed between rounds. SQLite runs with ``synchronous=normal`` (the
statements' cost, not the fsync); PostgreSQL tables are ``VACUUM ANALYZE``d
after each build and top-up, on throwaway schemas dropped at the end.
Run with the repository's ``.venv`` (``scripts/dev.py setup``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg import sql

import alkstore

DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
PAUSED_QUEUES = 1000
JOBS_PER_PAUSED_QUEUE = 10
SCENARIOS = ("none", "paused")


def _build(store: alkstore.Store, scenario: str, waiting: int) -> alkstore.Queue:
    q = store.queue("q")
    for start in range(0, waiting, 1000):
        q.enqueue_many([{"n": i} for i in range(start, min(waiting, start + 1000))])
    if scenario == "paused":
        for i in range(PAUSED_QUEUES):
            held = store.queue(f"paused-{i:04d}")
            held.enqueue_many([{"n": n} for n in range(JOBS_PER_PAUSED_QUEUE)])
            held.pause()
    return q


def _claims(q: alkstore.Queue, n: int) -> float:
    """Seconds per claim() + ack() over *n* steps."""
    started = time.perf_counter()
    for _ in range(n):
        job = q.claim("bench")
        if job is None:
            raise AssertionError("the queue ran dry: raise --waiting")
        job.ack()
    return (time.perf_counter() - started) / n


@contextmanager
def _stores(engine: str, pg_url: str, tmpdir: str) -> Iterator[dict[str, alkstore.Store]]:
    stores: dict[str, alkstore.Store] = {}
    try:
        for key in SCENARIOS:
            if engine == "sqlite":
                path = os.path.join(tmpdir, f"pause-{key}.db")
                stores[key] = alkstore.open(f"sqlite:///{path}", synchronous="normal")
            else:
                stores[key] = alkstore.open(pg_url, schema=f"alkstore_bench_pause_{key}")
        yield stores
    finally:
        for store in stores.values():
            store.close()
        if engine == "postgres":
            with psycopg.connect(pg_url, autocommit=True) as conn:
                for key in SCENARIOS:
                    name = sql.Identifier(f"alkstore_bench_pause_{key}")
                    conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(name))


def _settle(engine: str, pg_url: str, key: str) -> None:
    if engine != "postgres":
        return
    schema = sql.Identifier(f"alkstore_bench_pause_{key}")
    with psycopg.connect(pg_url, autocommit=True) as conn:
        for table in ("jobs", "paused"):
            conn.execute(sql.SQL("VACUUM ANALYZE {}.{}").format(schema, sql.Identifier(table)))


def run(engine: str, pg_url: str, waiting: int, claims: int, reps: int) -> dict[str, float]:
    """Median µs per claim() + ack() of each scenario on *engine*."""
    samples: dict[str, list[float]] = {key: [] for key in SCENARIOS}
    with tempfile.TemporaryDirectory() as tmpdir, _stores(engine, pg_url, tmpdir) as stores:
        queues = {}
        for key, store in stores.items():
            t0 = time.perf_counter()
            queues[key] = _build(store, key, waiting)
            _settle(engine, pg_url, key)
            print(f"  {engine} {key}: built in {time.perf_counter() - t0:.1f} s", flush=True)
        for rep in range(reps):
            for key, q in queues.items():
                _claims(q, 20)  # warm the connection and statement caches
                samples[key].append(_claims(q, claims) * 1e6)
                q.enqueue_many([{"n": i} for i in range(claims + 20)])  # back to the start
                _settle(engine, pg_url, key)
            shown = ", ".join(f"{k} {v[-1]:.0f} us" for k, v in samples.items())
            print(f"  {engine} rep {rep + 1}/{reps}: {shown}", flush=True)
    return {key: statistics.median(v) for key, v in samples.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engines", nargs="+", default=["sqlite", "postgres"])
    parser.add_argument("--pg-url", default=os.environ.get("ALKSTORE_BENCH_PG_URL", DEFAULT_PG_URL))
    parser.add_argument("--waiting", type=int, default=5000, help="ready jobs in q")
    parser.add_argument("--claims", type=int, default=1000, help="timed steps per round")
    parser.add_argument("--reps", type=int, default=5, help="rounds per scenario")
    args = parser.parse_args()
    rows = []
    for engine in args.engines:
        got = run(engine, args.pg_url, args.waiting, args.claims, args.reps)
        ratio = got["paused"] / got["none"]
        rows.append(f"| {engine} | {got['none']:.0f} | {got['paused']:.0f} | {ratio:.2f} |")
    print("\n| engine | no paused queue, µs | 1,000 paused queues, µs | ratio |")
    print("| --- | ---: | ---: | ---: |")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
