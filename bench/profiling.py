#!/usr/bin/env python3
"""Where one workload's time goes: cProfile over a bench system, per job.

    python3 bench/profiling.py alkstore-sqlite-normal W1
    python3 bench/profiling.py alkstore-postgres W3b1 --jobs 3000 --top 25
    python3 bench/profiling.py alkstore-sqlite-full Wd32        # Worker drain, c=32

Runs in the bench venv (``python3 bench/run.py`` makes it; run this with
``bench/.venv/bin/python``) or any interpreter with the engines installed.
Prints, for the functions with the most own time, the calls per job and the
microseconds per job spent in the function itself (``tottime``) and under it
(``cumtime``), plus the wall time per job with and without the profiler
(cProfile's own cost inflates small Python functions; the unprofiled figure
is the one to compare with bench/run.py). Threads other than the caller's are
not profiled: for Wd the figures cover the thread that claims and flushes.
PostgreSQL uses ``--pg-url`` (default as in run.py) to make and drop a
throwaway database.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/postgres"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench/profiling.py", description=__doc__)
    parser.add_argument("system", help="a system name of bench/run.py (alkstore-sqlite-normal)")
    parser.add_argument("workload", help="W1, W2, W3b1, W3b32, W1c, or Wd<c> (Wd32)")
    parser.add_argument("--jobs", type=int, default=5_000)
    parser.add_argument("--top", type=int, default=20)
    parser.add_argument("--pg-url", default=os.environ.get("ALKSTORE_BENCH_PG_URL", DEFAULT_PG_URL))
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from bench import runtime
    from bench.systems import AlkstoreSystem, Env, all_systems, throwaway_database

    systems = {s.name: s for s in all_systems()}
    system = systems[args.system]
    tmpdir = tempfile.mkdtemp(prefix="alkstore-profile-")
    try:
        with throwaway_database(args.pg_url) as (pg_url, reason):
            system.start(Env(tmpdir=tmpdir, pg_url=pg_url, pg_reason=reason))
            batch = {"W2": 100, "W3b32": 32}.get(args.workload, 1)

            def once(profiler: cProfile.Profile | None) -> float:
                system.reset()
                w = args.workload
                if w.startswith(("W3", "Wd")):
                    system.prefill(args.jobs + 10 * batch)
                    system.after_prefill()
                if w.startswith("Wd"):
                    assert isinstance(system, AlkstoreSystem)
                    import alkstore

                    worker = alkstore.Worker(
                        system.store, "bench", runtime._noop, concurrency=int(w[2:])
                    )
                    t0 = time.perf_counter()
                    if profiler is not None:
                        profiler.enable()
                    jobs = worker.run_until_empty()
                else:
                    system.measure(w, batch, 10, 0, 0.0)  # warm-up only
                    t0 = time.perf_counter()
                    if profiler is not None:
                        profiler.enable()
                    jobs = system.measure(w, batch, 0, args.jobs, 1e9).jobs
                if profiler is not None:
                    profiler.disable()
                return (time.perf_counter() - t0) / max(jobs, 1)

            plain = min(once(None) for _ in range(3))
            profiler = cProfile.Profile()
            profiled = once(profiler)
            system.stop()
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
    jobs = args.jobs
    print(
        f"{args.system} {args.workload}: {plain * 1e6:.1f} µs per job unprofiled "
        f"(best of 3), {profiled * 1e6:.1f} µs profiled; {jobs:,} jobs"
    )
    stats = pstats.Stats(profiler)
    rows = []
    for (file, line, name), (_cc, nc, tt, ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        where = f"{Path(file).name}:{line}({name})" if line else name
        rows.append((tt, ct, nc, where))
    rows.sort(reverse=True)
    print(f"Python calls per job, every function: {sum(r[2] for r in rows) / jobs:.1f}")
    print(f"{'calls/job':>9} {'own µs/job':>10} {'cum µs/job':>10}  function")
    for tt, ct, nc, where in rows[: args.top]:
        print(f"{nc / jobs:9.2f} {tt * 1e6 / jobs:10.2f} {ct * 1e6 / jobs:10.2f}  {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
