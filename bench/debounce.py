"""Q-29: the cost of a debounced key, against plain enqueues.

One step is 10,000 calls, each its own commit, no ``tx=``:

- ``plain``: ``q.enqueue(payload)``, 10,000 new jobs;
- ``debounced``: ``q.enqueue_unique("hot", payload, on_conflict="replace",
  debounce_s=60)`` 10,000 times on one key: the first call writes the job,
  the 9,999 others replace its payload and move its time (one UPDATE each);
- ``debounced-skip``: the same with ``on_conflict="skip"`` (only the time
  moves).

Each engine (SQLite ``synchronous=normal`` and ``full``, PostgreSQL on a
throwaway database) gets a fresh queue per step; the three steps run
round-robin, ``--reps`` times, so that machine noise hits them alike, and
the report gives the median wall time per call and the median of the
within-repetition ratios to ``plain``. It also checks the point of the rule:
after each debounced step the queue holds one job.

    bench/.venv/bin/python bench/debounce.py            # or .venv/bin/python
    bench/.venv/bin/python bench/debounce.py --reps 5 --calls 10000
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import alkstore

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
STEPS = ("plain", "debounced", "debounced-skip")


def _step(store: alkstore.Store, name: str, queue: str, calls: int) -> float:
    """Seconds for *calls* calls of step *name* on a fresh *queue*."""
    q = store.queue(queue)
    call: Callable[[int], object]
    if name == "plain":
        call = lambda i: q.enqueue({"n": i})  # noqa: E731
    else:
        mode = "replace" if name == "debounced" else "skip"
        call = lambda i: q.enqueue_unique("hot", {"n": i}, on_conflict=mode, debounce_s=60)  # noqa: E731
    started = time.perf_counter()
    for i in range(calls):
        call(i)
    took = time.perf_counter() - started
    stats = q.stats()
    jobs = stats.pending + stats.scheduled
    assert jobs == (calls if name == "plain" else 1), (name, stats)
    return took


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench/debounce.py", description=__doc__)
    parser.add_argument("--calls", type=int, default=10_000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--pg-url", default=os.environ.get("ALKSTORE_BENCH_PG_URL", DEFAULT_PG_URL))
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from bench.systems import throwaway_database

    tmpdir = tempfile.mkdtemp(prefix="alkstore-debounce-")
    results: dict[str, dict[str, list[float]]] = {}
    try:
        with throwaway_database(args.pg_url) as (pg_url, reason):
            engines: dict[str, Callable[[], alkstore.Store]] = {
                "sqlite-normal": lambda: alkstore.open(
                    f"sqlite:///{tmpdir}/normal.db", synchronous="normal"
                ),
                "sqlite-full": lambda: alkstore.open(
                    f"sqlite:///{tmpdir}/full.db", synchronous="full"
                ),
            }
            if pg_url is not None:
                engines["postgres"] = lambda: alkstore.open(pg_url)
            else:
                print(f"postgres not run: {reason}")
            for engine, opener in engines.items():
                with opener() as store:
                    times = results.setdefault(engine, {s: [] for s in STEPS})
                    for rep in range(args.reps):
                        for step in STEPS:
                            queue = f"{step}-{rep}"
                            times[step].append(_step(store, step, queue, args.calls))
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)

    print(f"\n{args.calls:,} calls per step, {args.reps} repetitions, median µs per call")
    print("(ratio: median of the per-repetition ratios to plain)\n")
    print("| engine | plain | debounced (replace) | ratio | debounced (skip) | ratio |")
    print("|---|---:|---:|---:|---:|---:|")
    for engine, times in results.items():
        cells = [engine, f"{statistics.median(times['plain']) / args.calls * 1e6:.0f}"]
        for step in STEPS[1:]:
            ratios = [d / p for d, p in zip(times[step], times["plain"], strict=True)]
            cells.append(f"{statistics.median(times[step]) / args.calls * 1e6:.0f}")
            cells.append(f"{statistics.median(ratios):.2f}")
        print("| " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
