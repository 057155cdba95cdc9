#!/usr/bin/env python3
"""What the progress column (Q-28) costs a claim of jobs that have none.

    python3 bench/progress_claim.py sqlite
    python3 bench/progress_claim.py postgres --blocks 30 --per 200

In one process, on one database, it alternates blocks of single claims
between the engine's claim statement as shipped (``progress`` in its
``RETURNING``) and the same statement without that column, and prints the
median microseconds per claim of each and their ratio. Alternating in one
process shares the machine's load, the caches and the database between the
two, so the ratio is meaningful on a noisy machine where two separate runs
are not (docs/adr/0022). SQLite runs with ``synchronous=normal`` (no fsync
per claim, which would drown the difference); PostgreSQL uses ``--pg-url``
(default as in run.py) with a throwaway schema.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
for _src in ("alkstore", "alkstore-sqlite", "alkstore-postgres"):
    sys.path.insert(0, str(ROOT / "packages" / _src / "src"))

import alkstore  # noqa: E402
from alkstore_sqlite import _sql as sqlite_sql  # noqa: E402

DEFAULT_PG_URL = os.environ.get(
    "ALKSTORE_BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)


class _Switch:
    """Puts the claim statement with or without ``progress`` in place."""

    def __init__(self, engine: str, store: Any) -> None:
        self._engine = engine
        if engine == "sqlite":
            self._with = sqlite_sql.CLAIM_FLAGGED
            self._without = self._with.replace(", result_ttl_s, progress,", ", result_ttl_s,")
        else:
            self._st = store.executor._ops.st
            self._with = self._st._claim_template
            self._without = self._with.replace(",\n        j.progress::text AS progress)", ")")
        if self._without == self._with:
            raise SystemExit("the claim statement changed: update bench/progress_claim.py")

    def use(self, progress: bool) -> None:
        text = self._with if progress else self._without
        if self._engine == "sqlite":
            sqlite_sql.CLAIM_FLAGGED = text
        else:
            self._st._claim_template = text
            self._st._claims.clear()


def measure(engine: str, blocks: int, per: int, pg_url: str) -> tuple[float, float]:
    """Median µs per claim with and without the column."""
    schema = f"progress_bench_{uuid.uuid4().hex[:8]}"
    if engine == "sqlite":
        url = f"sqlite:///{tempfile.mkdtemp()}/bench.db?synchronous=normal"
    else:
        sep = "&" if "?" in pg_url else "?"
        url = f"{pg_url}{sep}schema={schema}"
    store = alkstore.open(url)
    switch = _Switch(engine, store)
    q = store.queue("bench")
    q.enqueue_many([{"n": i} for i in range(blocks * per * 2 + 10)])
    times: dict[bool, list[float]] = {True: [], False: []}
    try:
        for block in range(blocks):
            for progress in (True, False) if block % 2 else (False, True):
                switch.use(progress)
                got = []
                started = time.perf_counter()
                for _ in range(per):
                    got.append(q.claim("bench"))
                times[progress].append((time.perf_counter() - started) / per * 1e6)
                if any(job is None for job in got):
                    raise SystemExit("a claim found nothing: the queue ran dry")
                q.ack_batch([job for job in got if job is not None])
    finally:
        switch.use(True)
        if engine != "sqlite":
            with store.transaction() as tx:
                tx.execute(f"DROP SCHEMA {schema} CASCADE")
        store.close()
    return statistics.median(times[True]), statistics.median(times[False])


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("engine", choices=("sqlite", "postgres"))
    parser.add_argument("--blocks", type=int, default=20, help="blocks of each variant")
    parser.add_argument("--per", type=int, default=200, help="claims per block")
    parser.add_argument("--pg-url", default=DEFAULT_PG_URL)
    args = parser.parse_args(argv)
    with_col, without = measure(args.engine, args.blocks, args.per, args.pg_url)
    print(
        f"{args.engine}: median µs per claim with progress {with_col:.1f}, "
        f"without {without:.1f}, ratio {with_col / without:.3f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
