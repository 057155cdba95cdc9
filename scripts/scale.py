"""Tens of millions of rows on PostgreSQL (issue 23; docs/adr/0026).

    python scripts/scale.py --url postgresql://user@host/scratch_db \
        [--dead 10000000] [--results 1000000] [--hours 26] [--rounds 7] \
        [--width 3600] [--keep-s 7200] [--upgrade-rows N]

Makes two scratch schemas in the database of *--url* (never use a database
holding anything you keep: both schemas are dropped at the end): ``empty``
holds only a small live queue; ``full`` holds the same queue and, inserted
server-side with ``INSERT ... SELECT generate_series`` straight into the
engine's tables, ``--dead`` dead letters and ``--results`` kept results
spread evenly over the last ``--hours`` hours (one queue, ``bulk``), in
partitions of ``--width`` seconds (both schemas are made with that
``partition_width_s``) as the sweep would have made them, then ``VACUUM ANALYZE``d (as
autovacuum would have over that day). Then it measures, interleaved round by
round on both schemas (C-8's method: a ratio to an empty store in one run):

- claim + ack of one job of the live queue, p50 over each round;
- ``get_job`` of a dead id, and ``purge_dead(job_ids=[id])`` of an absent
  one (by id: one probe of each partition's id index);

and once, on ``full``: ``purge_dead(older_than_s=KEEP)`` of every dead
letter older than ``--keep-s`` seconds, and a sweep's result expiry of every
result past its time (results are kept ``--keep-s``), each reported as
seconds per million rows removed (target: at most 1 s per million). With
``--upgrade-rows N``, also the time of upgrading a version-6 schema holding
N dead letters to version 7 (the dead table attached as a partition).

The last line begins ``scale:``; the exit status is 0 when the claim ratio
is within 1.5x and both expiries take at most 1 s per million rows.
"""

from __future__ import annotations

import argparse
import functools
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import sql

from alkstore import QueueOpts
from alkstore_postgres import PostgresStore
from alkstore_postgres import _sql as pg_sql

HOUR = 3600
LIVE = "live"
BULK = "bulk"


def _p50_ms(fn: Callable[[], object], n: int) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def _claim_ack(store: PostgresStore) -> Callable[[], object]:
    q = store.queue(LIVE, QueueOpts(max_attempts=3))

    def step() -> None:
        job = q.claim("w")
        assert job is not None
        job.ack()
        q.enqueue(1)

    return step


def _fill(
    conn: psycopg.Connection[Any],
    schema: str,
    dead: int,
    results: int,
    hours: int,
    width: int,
    keep_s: int,
) -> None:
    """Partitions of *width* for the last *hours* hours, then the rows,
    server-side; results kept *keep_s* after they finished."""
    s = sql.Identifier(schema)
    now = conn.execute("SELECT extract(epoch FROM clock_timestamp())::float8").fetchone()
    assert now is not None
    now_s = float(now[0])
    top = int(now_s // width)  # the current width: partitions up to its start
    first = top - hours * HOUR // width
    for table in ("dead", "results"):
        for k in range(first, top):
            conn.execute(
                sql.SQL(
                    "CREATE TABLE IF NOT EXISTS {} PARTITION OF {} "
                    "FOR VALUES FROM (to_timestamp({})) TO (to_timestamp({}))"
                ).format(
                    sql.Identifier(schema, f"{table}_p{k * width}_{(k + 1) * width}"),
                    sql.Identifier(schema, table),
                    sql.Literal(k * width),
                    sql.Literal((k + 1) * width),
                )
            )
    span = (top - first) * width - 1
    start = first * width
    # Ids far above the live queue's; died/finished evenly over the span.
    conn.execute(
        sql.SQL(
            "INSERT INTO {}.dead (id, queue, payload, priority, run_at, created_at, attempts, "
            "max_attempts, visibility_timeout_s, backoff_base_s, claims, last_error, died_at) "
            "SELECT 10000000000 + g, %s, '{{\"n\": 1}}', 0, t, t, 3, 3, 30, 1, 3, 'boom', t "
            "FROM generate_series(1, %s::bigint) g, "
            "LATERAL (SELECT to_timestamp(%s + g * %s::float8 / %s) AS t) x"
        ).format(s),
        (BULK, dead, start, span, dead),
    )
    # A result is kept keep_s after it finished: those older than that are
    # past their time.
    conn.execute(
        sql.SQL(
            "INSERT INTO {}.results (id, queue, payload, priority, run_at, created_at, "
            "attempts, max_attempts, visibility_timeout_s, backoff_base_s, claims, "
            "result_ttl_s, result, finished_at, keep_until) "
            "SELECT 20000000000 + g, %s, '1', 0, t, t, 1, 3, 30, 1, 1, %s::float8, '\"ok\"', t, "
            "t + %s::float8 * interval '1 second' "
            "FROM generate_series(1, %s::bigint) g, "
            "LATERAL (SELECT to_timestamp(%s + g * %s::float8 / %s) AS t) x"
        ).format(s),
        (BULK, keep_s, keep_s, results, start, span, results),
    )
    conn.execute(sql.SQL("VACUUM ANALYZE {}.dead").format(s))
    conn.execute(sql.SQL("VACUUM ANALYZE {}.results").format(s))


def _count(conn: psycopg.Connection[Any], schema: str, table: str) -> int:
    row = conn.execute(
        sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(schema, table))
    ).fetchone()
    assert row is not None
    return int(row[0])


def _upgrade(conn: psycopg.Connection[Any], url: str, schema: str, rows: int) -> None:
    """A version-6 schema holding *rows* dead letters, then the upgrade's time."""
    st = pg_sql.Statements(schema)
    conn.execute(st.create_schema, {})
    params = {"store_id": "scale", "schema": schema, "width": str(HOUR)}
    for version in range(1, 7):
        for statement in st.migrations[version]:
            conn.execute(statement, params)
    conn.execute(st.set_version, {"version": "6"})
    conn.execute(
        sql.SQL(
            "INSERT INTO {}.dead (id, queue, payload, priority, run_at, created_at, attempts, "
            "max_attempts, visibility_timeout_s, backoff_base_s, claims, last_error, died_at) "
            "SELECT g, %s, '1', 0, t, t, 3, 3, 30, 1, 3, 'boom', t "
            "FROM generate_series(1, %s::bigint) g, "
            "LATERAL (SELECT clock_timestamp() - g * interval '10 ms' AS t) x"
        ).format(sql.Identifier(schema)),
        (BULK, rows),
    )
    conn.execute(sql.SQL("VACUUM ANALYZE {}.dead").format(sql.Identifier(schema)))
    t0 = time.perf_counter()
    with PostgresStore(url, schema=schema) as store:
        took = time.perf_counter() - t0
        assert store.queue(BULK).stats().dead == rows
    print(f"upgrade 6 -> 7 with {rows:,} dead letters: {took:.1f} s")


def _count_partitions(conn: psycopg.Connection[Any], schema: str) -> int:
    row = conn.execute(
        "SELECT count(*) FROM pg_inherits i JOIN pg_class p ON p.oid = i.inhparent "
        "JOIN pg_namespace n ON n.oid = p.relnamespace "
        "WHERE n.nspname = %s AND p.relname IN ('dead', 'results')",
        (schema,),
    ).fetchone()
    assert row is not None
    return int(row[0])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--dead", type=int, default=10_000_000)
    ap.add_argument("--results", type=int, default=1_000_000)
    ap.add_argument("--hours", type=int, default=26)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--per-round", type=int, default=300)
    ap.add_argument("--live", type=int, default=1000)
    ap.add_argument("--width", type=int, default=HOUR, help="partition_width_s of both schemas")
    ap.add_argument(
        "--keep-s", type=int, default=2 * HOUR, help="results' TTL and purge_dead's older_than_s"
    )
    ap.add_argument(
        "--upgrade-rows",
        type=int,
        default=0,
        help="also time the upgrade 6 -> 7 of a schema holding this many dead letters",
    )
    args = ap.parse_args()

    tag = f"scale_{os.getpid()}"
    names = {"empty": f"{tag}_empty", "full": f"{tag}_full"}
    admin = psycopg.connect(args.url, autocommit=True)
    stores: dict[str, PostgresStore] = {}
    try:
        for key, schema in names.items():
            stores[key] = PostgresStore(args.url, schema=schema, partition_width_s=args.width)
            stores[key].queue(LIVE).enqueue_many([1] * args.live)
        steps = {k: _claim_ack(s) for k, s in stores.items()}

        def rounds(label: str) -> dict[str, float]:
            got: dict[str, list[float]] = {k: [] for k in stores}
            for _ in range(args.rounds):
                for k in stores:
                    got[k].append(_p50_ms(steps[k], args.per_round))
            med = {k: statistics.median(v) for k, v in got.items()}
            print(f"{label}: claim+ack p50 ms " + ", ".join(f"{k} {v:.3f}" for k, v in med.items()))
            return med

        before = rounds("before fill")
        t0 = time.perf_counter()
        _fill(admin, names["full"], args.dead, args.results, args.hours, args.width, args.keep_s)
        fill_s = time.perf_counter() - t0
        print(
            f"fill: {args.dead:,} dead letters, {args.results:,} results over "
            f"{args.hours} h in partitions of {args.width} s, in {fill_s:.0f} s"
        )
        after = rounds("after fill")
        ratio_before = before["full"] / before["empty"]
        ratio_after = after["full"] / after["empty"]

        # By id: a dead letter's get_job, and a purge by an id that is not there.
        full = stores["full"].queue(BULK)
        some = 10_000_000_000 + args.dead - 1  # one of the last to die: kept

        def by_id(label: str) -> None:
            probe: dict[str, float] = {}
            for k in stores:
                q = stores[k].queue(BULK)
                probe[f"get_job {k}"] = _p50_ms(functools.partial(q.get_job, some), 200)
                probe[f"purge_ids {k}"] = _p50_ms(functools.partial(q.purge_dead, job_ids=[1]), 200)
            parts = {
                k: _count_partitions(admin, schema) for k, schema in names.items() if k in stores
            }
            print(
                f"by id p50 ms {label} (partitions dead+results {parts}): "
                + ", ".join(f"{k} {v:.3f}" for k, v in probe.items())
            )

        by_id("after fill")
        # Expiry of a day's worth: purge by age (two hours kept), result expiry.
        dead_before = _count(admin, names["full"], "dead")
        t0 = time.perf_counter()
        purged = full.purge_dead(older_than_s=args.keep_s)
        purge_s = time.perf_counter() - t0
        dead_left = _count(admin, names["full"], "dead")
        assert dead_before - dead_left == purged, (dead_before, dead_left, purged)
        res_before = _count(admin, names["full"], "results")
        t0 = time.perf_counter()
        swept = full.sweep_expired().results
        sweep_s = time.perf_counter() - t0
        res_left = _count(admin, names["full"], "results")
        assert res_before - res_left == swept, (res_before, res_left, swept)
        purge_per_m = purge_s / max(purged, 1) * 1e6
        sweep_per_m = sweep_s / max(swept, 1) * 1e6
        print(
            f"purge_dead(older_than_s={args.keep_s}): {purged:,} rows in {purge_s:.3f} s "
            f"({purge_per_m:.3f} s per million); {dead_left:,} left"
        )
        print(
            f"sweep result expiry: {swept:,} rows in {sweep_s:.3f} s "
            f"({sweep_per_m:.3f} s per million); {res_left:,} left"
        )
        after_expiry = rounds("after expiry")
        by_id("after expiry")
        print(
            f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python "
            f"{platform.python_version()}, "
            + str(admin.execute("SHOW server_version").fetchone()[0])  # type: ignore[index]
        )
        if args.upgrade_rows:
            names["old"] = f"{tag}_old"
            _upgrade(admin, args.url, names["old"], args.upgrade_rows)
        ok = ratio_after <= 1.5 and purge_per_m <= 1.0 and sweep_per_m <= 1.0
        print(
            f"scale: claim ratio full/empty {ratio_before:.2f}x before fill, "
            f"{ratio_after:.2f}x with {args.dead:,} dead + {args.results:,} results, "
            f"{after_expiry['full'] / after_expiry['empty']:.2f}x after expiry; "
            f"purge by age {purge_per_m:.3f} s/M, result expiry {sweep_per_m:.3f} s/M; "
            f"{'ok' if ok else 'MISSED'}"
        )
        return 0 if ok else 1
    finally:
        for s in stores.values():
            s.close()
        for schema in names.values():
            drop = sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
            admin.execute(drop)
        admin.close()


if __name__ == "__main__":
    sys.exit(main())
