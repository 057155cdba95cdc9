"""WF-5: how jobs that wait for jobs drain, beside jobs that wait for nothing.

For each engine, each shape is built in a store of its own (untimed) and
drained by one sync ``Worker`` (concurrency 8, the same settings for every
shape), in one run, shapes round-robin over the repetitions:

- ``independent``: N jobs, no ``after=`` (the reference);
- ``fan_out``: one root, N - 1 children ``after=[root]``;
- ``fan_in``: N - 1 parents, one child ``after=`` all of them; WF-1 takes at
  most 1,000 ids, so beyond that the parents are gathered by a job per
  1,000 first (10 more jobs for N = 10,000);
- ``chain``: N jobs, each ``after=`` the one before;
- ``layers``: 20 layers of N / 20; a job of layer k waits for two of layer
  k - 1 (its own index and the next, wrapping), so every layer but the first
  is released by parents finishing in any order.

The handler records when it starts and when it is done. In every shape but
``chain`` it returns, and the Worker acks in its group commit (W-6), as in
production; a job's *release-to-start* is then its start less the latest
end of its parents' handlers, so it includes the flush (``flush_s``, 5 ms).
In ``chain`` the handler acks its own job (W-9) and is done when that ack
returned: the ack's transaction is the one that releases the next step
(WF-2), so its release-to-start is the release's own latency, from commit to
the next handler's start. Rate: jobs over the time from the first start to
the last handler's end. The targets (issue 20): fan-out and fan-in drain at
>= 0.7x the rate of independent jobs; a chain step's release-to-start p50
<= 5 ms.

    python3 bench/workflows.py                 # N = 10,000, 3 repetitions
    python3 bench/workflows.py --quick         # N = 1,000, 1 repetition
    python3 bench/workflows.py --engines sqlite --n 2000 --reps 2

It runs in the current interpreter (the dev ``.venv`` has both engines) and
prints a Markdown table; ``--out`` also writes the samples as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import psycopg
from psycopg import sql

import alkstore
from alkstore import EnqueueOpts, Job, Worker
from alkstore.types import MAX_AFTER

QUEUE = "wf-bench"
SHAPES = ("independent", "fan_out", "fan_in", "chain", "layers")
LAYERS = 20
CONCURRENCY = 8
BATCH = 500


@dataclass
class Drain:
    shape: str
    jobs: int
    seconds: float
    #: Release-to-start of every job with parents, in ms.
    latencies_ms: list[float] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.jobs / self.seconds if self.seconds > 0 else float("nan")


def _build(q: alkstore.Queue, shape: str, n: int) -> dict[int, list[int]]:
    """Enqueue *shape* with *n* jobs; return each job's parents."""
    parents: dict[int, list[int]] = {}

    def many(count: int, opts: EnqueueOpts | None = None) -> list[int]:
        ids: list[int] = []
        while len(ids) < count:
            k = min(BATCH, count - len(ids))
            ids += q.enqueue_many([{"i": len(ids) + i} for i in range(k)], opts)
        return ids

    if shape == "independent":
        for job_id in many(n):
            parents[job_id] = []
    elif shape == "fan_out":
        root = q.enqueue({"root": True})
        parents[root] = []
        for job_id in many(n - 1, EnqueueOpts(after=[root])):
            parents[job_id] = [root]
    elif shape == "fan_in":
        ups = many(n - 1)
        for job_id in ups:
            parents[job_id] = []
        # WF-1 takes at most MAX_AFTER ids: beyond that, gather jobs between.
        while len(ups) > MAX_AFTER:
            gathers = []
            for i in range(0, len(ups), MAX_AFTER):
                part = ups[i : i + MAX_AFTER]
                gather = q.enqueue({"gather": i}, EnqueueOpts(after=part))
                parents[gather] = part
                gathers.append(gather)
            ups = gathers
        parents[q.enqueue({"sink": True}, EnqueueOpts(after=ups))] = ups
    elif shape == "chain":
        last = q.enqueue({"i": 0})
        parents[last] = []
        for i in range(1, n):
            step = q.enqueue({"i": i}, EnqueueOpts(after=[last]))
            parents[step] = [last]
            last = step
    elif shape == "layers":
        width = n // LAYERS
        layer = many(width)
        for job_id in layer:
            parents[job_id] = []
        for _ in range(1, LAYERS):
            nxt: list[int] = []
            for i in range(width):
                ups = [layer[i], layer[(i + 1) % width]]
                job_id = q.enqueue({"i": i}, EnqueueOpts(after=ups))
                parents[job_id] = ups
                nxt.append(job_id)
            layer = nxt
    else:
        raise ValueError(shape)
    return parents


def _drain(store: alkstore.Store, shape: str, parents: dict[int, list[int]]) -> Drain:
    started: dict[int, float] = {}
    acked: dict[int, float] = {}
    lock = threading.Lock()
    everything = threading.Event()
    total = len(parents)

    self_ack = shape == "chain"

    def handler(job: Job) -> None:
        t = time.perf_counter()
        if self_ack and not job.ack():
            raise RuntimeError(f"the ack of job {job.id} was refused")
        done = time.perf_counter()
        with lock:
            started[job.id] = t
            acked[job.id] = done
            if len(acked) == total:
                everything.set()

    stop = threading.Event()
    worker = Worker(store, QUEUE, handler, concurrency=CONCURRENCY, claim_wait_s=0.5)
    thread = threading.Thread(target=worker.run, args=(stop,), daemon=True)
    thread.start()
    try:
        if not everything.wait(600):
            raise RuntimeError(f"{shape}: {len(acked)} of {total} jobs ran in 600 s")
    finally:
        stop.set()
        thread.join(60)
    seconds = max(acked.values()) - min(started.values())
    latencies = [
        (started[j] - max(acked[p] for p in ups)) * 1000 for j, ups in parents.items() if ups
    ]
    return Drain(shape, total, seconds, latencies)


class _Stores:
    """One fresh store per (shape, repetition) on an engine."""

    def __init__(self, engine: str, pg_url: str, tmpdir: str) -> None:
        self.engine = engine
        self.pg_url = pg_url
        self.tmpdir = tmpdir
        self.schemas: list[str] = []

    def open(self, label: str) -> alkstore.Store:
        if self.engine == "sqlite":
            path = os.path.join(self.tmpdir, f"wf-{label}.db")
            return alkstore.open(f"sqlite:///{path}", synchronous="normal")
        schema = f"alkstore_wf_{label}"
        self.schemas.append(schema)
        return alkstore.open(self.pg_url, schema=schema)

    def cleanup(self) -> None:
        if not self.schemas:
            return
        with psycopg.connect(self.pg_url, autocommit=True) as conn:
            for schema in self.schemas:
                conn.execute(
                    sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
                )


def _pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))]


def run(
    engines: list[str],
    shapes: list[str],
    n: int,
    reps: int,
    pg_url: str,
    log: Callable[[str], None],
) -> dict[str, Any]:
    out: dict[str, Any] = {"n": n, "reps": reps, "concurrency": CONCURRENCY, "engines": {}}
    with tempfile.TemporaryDirectory(prefix="alkstore-wf-") as tmpdir:
        for engine in engines:
            stores = _Stores(engine, pg_url, tmpdir)
            drains: dict[str, list[Drain]] = {s: [] for s in shapes}
            try:
                for rep in range(reps):
                    for shape in shapes:
                        store = stores.open(f"{shape}_{rep}_{os.getpid()}")
                        try:
                            t0 = time.perf_counter()
                            parents = _build(store.queue(QUEUE), shape, n)
                            built = time.perf_counter() - t0
                            drain = _drain(store, shape, parents)
                        finally:
                            store.close()
                        drains[shape].append(drain)
                        log(
                            f"{engine} rep {rep + 1}/{reps} {shape}: built in {built:.1f} s, "
                            f"{drain.rate:,.0f} jobs/s, release-to-start p50 "
                            f"{_pct(drain.latencies_ms, 0.5):.2f} ms"
                        )
            finally:
                stores.cleanup()
            out["engines"][engine] = {s: [asdict(d) for d in ds] for s, ds in drains.items()}
    return out


def report(result: dict[str, Any]) -> str:
    lines = [
        f"N = {result['n']:,} jobs per shape, concurrency {result['concurrency']}, "
        f"{result['reps']} repetition(s); medians over repetitions.",
        "",
        "| engine | shape | jobs/s | x independent | release-to-start p50 ms | p99 ms |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for engine, shapes in result["engines"].items():
        rates = {
            s: statistics.median(d["jobs"] / d["seconds"] for d in ds) for s, ds in shapes.items()
        }
        for shape, ds in shapes.items():
            lat = [x for d in ds for x in d["latencies_ms"]]
            p50 = f"{_pct(lat, 0.5):.2f}" if lat else "-"
            p99 = f"{_pct(lat, 0.99):.2f}" if lat else "-"
            ratio = rates[shape] / rates["independent"]
            lines.append(
                f"| {engine} | {shape} | {rates[shape]:,.0f} | {ratio:.2f} | {p50} | {p99} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engines", nargs="+", default=["sqlite", "postgres"])
    parser.add_argument("--n", type=int, default=None)
    parser.add_argument("--reps", type=int, default=None)
    parser.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=SHAPES)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--pg-url",
        default=os.environ.get(
            "ALKSTORE_BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
        ),
    )
    parser.add_argument("--out", default=None, help="write the samples as JSON here")
    args = parser.parse_args(argv)
    n = args.n or (1_000 if args.quick else 10_000)
    reps = args.reps or (1 if args.quick else 3)
    if "independent" not in args.shapes:
        parser.error("--shapes must include independent: the other shapes' ratios are to it")
    shapes = [s for s in SHAPES if s in args.shapes]
    result = run(args.engines, shapes, n, reps, args.pg_url, lambda m: print(m, file=sys.stderr))
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(result, f)
    print(report(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
