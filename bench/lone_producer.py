"""Where a lone PostgreSQL producer's enqueue goes, against raw SQL (W1;
issue 24, docs/adr/0029).

One process, one producer, ``--jobs`` enqueues per case, the cases
interleaved ``--reps`` times on one throwaway database:

- ``raw``: the raw-SQL limit of ``run.py`` (an ``INSERT`` into its minimal
  table on a plain autocommit connection);
- ``queue.enqueue``: alkstore's plain enqueue (through the producer
  combiner);
- ``executor, no combiner``: the engine's insert called past the combiner;
- ``ENQUEUE text``: the engine's statement on a plain autocommit connection
  (no pool, no plan driver);
- ``ENQUEUE text, no NOTIFY``: the same with its ``pg_notify`` cut out.

Printed: µs per enqueue (median), raw ÷ this (the median of the ratios
paired within each repetition) and the client CPU per enqueue (fastest
repetition). Run from the repository root::

    .venv/bin/python -m bench.lone_producer
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import psycopg

import alkstore
from alkstore.engine.prepare import prepare_job
from bench.systems import RAW_PG_DDL, RAW_PG_INSERT, throwaway_database

PG_URL = os.environ.get("ALKSTORE_BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
NOTIFY = "pg_notify(%(wake)s::text, %(queue)s::text)"


def _payload(i: int) -> dict[str, Any]:
    return {"n": i, "to": "user@example.com"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pg-url", default=PG_URL)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    with throwaway_database(args.pg_url) as (url, why):
        if url is None:
            raise SystemExit(why)
        with (
            alkstore.open(url) as store,
            psycopg.connect(url, autocommit=True) as raw,
            psycopg.connect(url, autocommit=True) as plain,
        ):
            for stmt in RAW_PG_DDL:
                raw.execute(stmt)
            q = store.queue("q")
            ex: Any = store.executor  # type: ignore[attr-defined]
            text: str = ex._ops.st.enqueue
            quiet = text.replace(NOTIFY, "1")
            assert quiet != text, "the enqueue statement no longer carries its NOTIFY"

            def statement(sent: str) -> Callable[[int], None]:
                def run(i: int) -> None:
                    job = prepare_job(q.opts, _payload(i), None)
                    params = ex._ops._job_params("q", job)
                    params["payload"] = job.payload
                    plain.execute(sent, params).fetchall()

                return run

            def past_combiner(i: int) -> None:
                ex._insert_alone("q", [prepare_job(q.opts, _payload(i), None)])

            cases: dict[str, Callable[[int], object]] = {
                "raw": lambda i: raw.execute(RAW_PG_INSERT, ("q", json.dumps(_payload(i)))),
                "queue.enqueue": lambda i: q.enqueue(_payload(i)),
                "executor, no combiner": past_combiner,
                "ENQUEUE text": statement(text),
                "ENQUEUE text, no NOTIFY": statement(quiet),
            }
            wall: dict[str, list[float]] = {k: [] for k in cases}
            cpu: dict[str, list[float]] = {k: [] for k in cases}
            for run in cases.values():  # warm-up: prepared statements, pool
                for i in range(50):
                    run(i)
            for _ in range(args.reps):
                for name, run in cases.items():
                    t, c = time.perf_counter(), time.process_time()
                    for i in range(args.jobs):
                        run(i)
                    wall[name].append((time.perf_counter() - t) / args.jobs * 1e6)
                    cpu[name].append((time.process_time() - c) / args.jobs * 1e6)
        print("| case | µs per enqueue | raw ÷ this | client CPU µs |")
        print("|---|---:|---:|---:|")
        for name in cases:
            paired = statistics.median(r / x for r, x in zip(wall["raw"], wall[name], strict=True))
            print(
                f"| {name} | {statistics.median(wall[name]):,.0f} | {paired:.2f} "
                f"| {min(cpu[name]):.0f} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
