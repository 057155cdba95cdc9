"""The server's planning time of PostgreSQL's prepared claim, with 1 and with
1,000 queues in the ``queue`` column's statistics (C-8, docs/adr/0029).

For each store (``q`` with 3,000 ready jobs; the second also 999 other
queues of ten jobs each; ``VACUUM ANALYZE``d) the claim statement (batch 1)
is prepared with SQL ``PREPARE`` twice: as the claim was before issue 24
(the queue name a plain parameter) and as it is now (``Statements.claim``,
the name read through a one-time subquery). Each is run ``--runs`` times
under ``EXPLAIN (ANALYZE, TIMING OFF) EXECUTE`` in a transaction rolled
back; after the first ten runs (PostgreSQL tries five custom plans), the
medians of the reported planning and execution times are printed with the
statement's generic and custom plan counts. Run from the repository root::

    .venv/bin/python -m bench.claim_plans
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
from typing import Any

import psycopg

import alkstore
from alkstore_postgres._sql import CLAIM, Statements
from bench.systems import throwaway_database

PG_URL = os.environ.get("ALKSTORE_BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres")


def _build(url: str, schema: str, queues: int) -> None:
    with alkstore.open(url, schema=schema) as store:
        store.queue("q").enqueue_many(list(range(3000)))
        for i in range(queues - 1):
            store.queue(f"other-{i:04d}").enqueue_many(list(range(10)))


def _measure(conn: psycopg.Connection[Any], text: str, runs: int) -> tuple[float, float, int, int]:
    text = text.replace("%(queue)s", "$1").replace("%(worker_id)s", "$2")
    conn.execute(f"PREPARE claim_probe(text, text) AS {text}")
    planning: list[float] = []
    execution: list[float] = []
    try:
        for i in range(runs):
            conn.execute("BEGIN")
            rows = conn.execute("EXPLAIN (ANALYZE, TIMING OFF) EXECUTE claim_probe('q', 'w')")
            shown = "\n".join(str(r[0]) for r in rows.fetchall())
            conn.execute("ROLLBACK")
            if i < 10:
                continue
            plan = re.search(r"Planning Time: ([\d.]+)", shown)
            run = re.search(r"Execution Time: ([\d.]+)", shown)
            assert plan is not None and run is not None, shown
            planning.append(float(plan.group(1)))
            execution.append(float(run.group(1)))
        row = conn.execute(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements "
            "WHERE name = 'claim_probe'"
        ).fetchone()
        assert row is not None
    finally:
        conn.execute("DEALLOCATE claim_probe")
    return statistics.median(planning), statistics.median(execution), int(row[0]), int(row[1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pg-url", default=PG_URL)
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    with throwaway_database(args.pg_url) as (url, why):
        if url is None:
            raise SystemExit(why)
        print("| store | claim | planning ms | execution ms | generic / custom plans |")
        print("|---|---|---:|---:|---:|")
        with psycopg.connect(url, autocommit=True) as conn:
            for queues in (1, 1000):
                schema = f"plans_{queues}"
                _build(url, schema, queues)
                conn.execute(f'VACUUM ANALYZE "{schema}".jobs')
                texts = {
                    "before": CLAIM.replace("{schema}", f'"{schema}"').replace("{limit}", "1"),
                    "after": Statements(schema).claim(1),
                }
                for label, text in texts.items():
                    plan, run, generic, custom = _measure(conn, text, args.runs)
                    print(
                        f"| {queues:,} queue{'s' if queues > 1 else ''} | {label} | {plan:.3f} "
                        f"| {run:.3f} | {generic} / {custom} |"
                    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
