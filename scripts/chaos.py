#!/usr/bin/env python3
"""The full-size chaos drain: N worker processes, a SIGKILL every
``--kill-every`` seconds, a history checker over every logged operation.

    python scripts/chaos.py                       # both engines, 3 runs each
    python scripts/chaos.py --engine sqlite --runs 6 --jobs 20000 --workers 8
    python scripts/chaos.py --engine postgres --url postgresql://postgres@127.0.0.1/postgres

PostgreSQL runs get a fresh schema each, dropped afterwards. Prints one
line of figures per run and exits 1 when the checker found a violation.
The harness and the checker are ``contract_tests/chaos.py``; the figures of
the recorded runs are in ``docs/reliability.md``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from contract_tests.chaos import DrainConfig, check, run_drain  # noqa: E402

DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/postgres"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--url", default=DEFAULT_PG, help="the PostgreSQL server to use")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--kill-every", type=float, default=0.5)
    parser.add_argument("--json", action="store_true", help="one JSON object per run")
    args = parser.parse_args(argv)
    engines = ["sqlite", "postgres"] if args.engine == "both" else [args.engine]
    failed = False
    for engine in engines:
        for run in range(args.runs):
            with tempfile.TemporaryDirectory(prefix="alkstore-chaos-") as workdir:
                url, opts, cleanup = _database(engine, args.url, workdir)
                config = DrainConfig(
                    url=url,
                    opts=opts,
                    workers=args.workers,
                    jobs=args.jobs,
                    kill_every_s=args.kill_every,
                    seed=run + 1,
                    limit_s=3600,
                )
                try:
                    report = check(run_drain(config, str(Path(workdir) / "logs")))
                finally:
                    cleanup()
            failed |= not report.ok
            line = {"engine": engine, "run": run + 1, "ok": report.ok, **report.figures}
            if args.json:
                print(json.dumps(line), flush=True)
            else:
                figures = ", ".join(f"{k}={v}" for k, v in report.figures.items())
                print(f"{engine} run {run + 1}: {'OK' if report.ok else 'FAILED'}; {figures}")
            for violation in report.violations[:20]:
                print(f"  VIOLATION {violation}", flush=True)
    return 1 if failed else 0


def _database(
    engine: str, pg_url: str, workdir: str
) -> tuple[str, dict[str, object], Callable[[], None]]:
    if engine == "sqlite":
        return f"sqlite:///{workdir}/chaos.db", {}, lambda: None
    from alkstore_postgres.testing import drop_schema

    schema = f"alkstore_chaos_{uuid.uuid4().hex[:8]}"
    return pg_url, {"schema": schema}, lambda: drop_schema(pg_url, schema)


if __name__ == "__main__":
    sys.exit(main())
