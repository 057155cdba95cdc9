"""Every documented way to run a Worker, side by side (issue 24, docs/adr/0029).

Each form drains *jobs* pre-enqueued jobs with a no-op handler and is timed
from its call to its return (for the CLI: from the first job seen finished
to the queue found empty, so that the process start is not counted). The
forms run interleaved, round by round, on one store per engine, and each is
reported as the median of its ratios to the ``store+name`` form of the same
round:

- ``store+name``: ``Worker(store, "name", noop, concurrency=c).run_until_empty()``
- ``store+handle``: ``Worker(store, store.queue("name"), ...)``
- ``handle``: ``Worker(None, store.queue("name"), ...)`` (the documented
  handle form, and the one the outbox's delivery uses)
- ``async``: ``AsyncWorker(astore, "name", async_noop, concurrency=c)``
- ``async-handle``: ``AsyncWorker(None, astore.queue("name"), ...)``
- ``cli``: ``alkstore worker bench.worker_forms:noop --queue name
  --concurrency c`` in a process of its own, stopped by SIGTERM once the
  queue is empty
- ``outbox``: ``store.outbox("name").run(deliver, stop)``, one delivery after
  the other by design (Q-20); its ratio is to ``c1``, ``Worker(store,
  "name", noop, concurrency=1)``, the same round.

Besides the rate, each in-process form counts the commits its worker made
through the store's settling calls (``ack_each``) against the jobs' own
``ack`` calls: a form that misses the group commit shows one ``ack`` per job.
Run it from the repository root::

    .venv/bin/python -m bench.worker_forms                     # both engines
    .venv/bin/python -m bench.worker_forms --engines sqlite-full --reps 3
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import psycopg

import alkstore
from alkstore.engine.jobs import KitJob
from alkstore.engine.jobs_async import AsyncKitJob
from alkstore.engine.store import KitStore
from alkstore.engine.store_async import AsyncKitStore

PG_URL = os.environ.get("ALKSTORE_BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
FORMS = ["store+name", "store+handle", "handle", "async", "async-handle", "cli", "c1", "outbox"]
PAYLOAD = {"to": "user@example.com"}


def noop(job: object) -> None:
    """The CLI form's handler (``bench.worker_forms:noop``)."""


async def anoop(job: object) -> None:
    pass


@dataclass
class Counts:
    """Settling calls seen during one drain, process-wide (the kit's classes)."""

    ack_each: int = 0
    job_ack: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def bump(self, name: str) -> None:
        with self.lock:
            setattr(self, name, getattr(self, name) + 1)


COUNTS = Counts()


def _spy() -> None:
    """Count ``ack_each`` and single ``ack`` calls on the kit's classes (both faces)."""

    def wrap(cls: type, name: str, key: str, is_async: bool) -> None:
        inner: Callable[..., Any] = getattr(cls, name)
        if is_async:

            async def aw(*a: Any, **kw: Any) -> Any:
                COUNTS.bump(key)
                return await inner(*a, **kw)

            setattr(cls, name, aw)
        else:

            def w(*a: Any, **kw: Any) -> Any:
                COUNTS.bump(key)
                return inner(*a, **kw)

            setattr(cls, name, w)

    wrap(KitStore, "ack_each", "ack_each", False)
    wrap(AsyncKitStore, "ack_each", "ack_each", True)
    wrap(KitJob, "ack", "job_ack", False)
    wrap(AsyncKitJob, "ack", "job_ack", True)


@dataclass
class Run:
    jobs: int
    seconds: float
    commits: int  # ack_each calls + single acks

    @property
    def rate(self) -> float:
        return self.jobs / self.seconds


def _fill(store: alkstore.Store, n: int) -> str:
    name = f"bench-{uuid.uuid4().hex[:8]}"
    q = store.queue(name)
    for start in range(0, n, 500):
        q.enqueue_many([{"n": i, **PAYLOAD} for i in range(start, min(start + 500, n))])
    return name


def _check_empty(store: alkstore.Store, name: str) -> None:
    st = store.queue(name).stats()
    assert st.pending == 0 and st.processing == 0, (name, st)


def _timed(fn: Callable[[], object], n: int) -> Run:
    with COUNTS.lock:
        COUNTS.ack_each = COUNTS.job_ack = 0
    t0 = time.perf_counter()
    fn()
    seconds = time.perf_counter() - t0
    return Run(n, seconds, COUNTS.ack_each + COUNTS.job_ack)


def _run_form(
    form: str, url: str, opts: dict[str, Any], store: alkstore.Store, n: int, c: int
) -> Run:
    if form == "outbox":
        box_name = f"bench-{uuid.uuid4().hex[:8]}"
        outbox = store.outbox(box_name)
        for i in range(n):
            if i % 500 == 0:
                with store.transaction() as tx:
                    for j in range(i, min(i + 500, n)):
                        outbox.put({"n": j, **PAYLOAD}, tx=tx)
        stop = threading.Event()
        seen = 0

        def deliver(payload: object) -> None:
            nonlocal seen
            seen += 1
            if seen == n:
                stop.set()

        run = _timed(lambda: outbox.run(deliver, stop), n)
        st = outbox.queue.stats()
        assert st.pending == 0 and st.processing == 0, st
        return run
    name = _fill(store, n)
    if form == "cli":
        run = _cli(url, store, name, n, c)
    elif form in ("store+name", "c1"):
        w = alkstore.Worker(store, name, noop, concurrency=1 if form == "c1" else c)
        run = _timed(w.run_until_empty, n)
    elif form == "store+handle":
        w = alkstore.Worker(store, store.queue(name), noop, concurrency=c)
        run = _timed(w.run_until_empty, n)
    elif form == "handle":
        w = alkstore.Worker(None, store.queue(name), noop, concurrency=c)
        run = _timed(w.run_until_empty, n)
    else:

        async def drain() -> None:
            astore = await alkstore.open_async(url, **opts)
            try:
                target: Any = name if form == "async" else astore.queue(name)
                owner = astore if form == "async" else None
                w = alkstore.AsyncWorker(owner, target, anoop, concurrency=c)
                with COUNTS.lock:
                    COUNTS.ack_each = COUNTS.job_ack = 0
                t0 = time.perf_counter()
                await w.run_until_empty()
                box[0] = time.perf_counter() - t0
            finally:
                await astore.close()

        box = [0.0]
        asyncio.run(drain())
        run = Run(n, box[0], COUNTS.ack_each + COUNTS.job_ack)
    _check_empty(store, name)
    return run


def _cli(url: str, store: alkstore.Store, name: str, n: int, c: int, poll_s: float = 0.002) -> Run:
    q = store.queue(name)
    env = dict(os.environ, PYTHONPATH=os.getcwd() + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [sys.executable, "-m", "alkstore", "worker", "bench.worker_forms:noop", "--url", url]
    cmd += ["--queue", name, "--concurrency", str(c), "--log-level", "warning"]
    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.DEVNULL)
    try:
        start = None
        left = n
        while True:
            st = q.stats()
            left = st.pending + st.processing
            now = time.perf_counter()
            if start is None and left < n:
                start, first_left = now, left
            if left == 0:
                break
            if proc.poll() is not None:
                raise RuntimeError(f"the CLI worker exited with {proc.returncode}")
            time.sleep(poll_s)
        assert start is not None
        return Run(first_left, now - start, 0)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)


@contextmanager
def _engine(engine: str) -> Iterator[tuple[str, dict[str, Any]]]:
    if engine.startswith("sqlite"):
        sync = engine.split("-")[1]
        with tempfile.TemporaryDirectory() as tmp:
            yield f"sqlite:///{tmp}/bench.db?synchronous={sync}", {}
        return
    db = f"bench_forms_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{db}"')
    try:
        yield PG_URL.rsplit("/", 1)[0] + "/" + db, {}
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=10000)
    parser.add_argument("--outbox-jobs", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--engines", nargs="+", default=["sqlite-full", "postgres"])
    parser.add_argument("--forms", nargs="+", default=FORMS, choices=FORMS)
    args = parser.parse_args()
    _spy()
    for engine in args.engines:
        runs: dict[str, list[Run]] = {f: [] for f in args.forms}
        with _engine(engine) as (url, opts), alkstore.open(url, **opts) as store:
            for form in args.forms:  # warm-up, not counted
                _run_form(form, url, opts, store, 300, args.concurrency)
            for _ in range(args.reps):
                for form in args.forms:
                    size = args.outbox_jobs if form in ("outbox", "c1") else args.jobs
                    runs[form].append(_run_form(form, url, opts, store, size, args.concurrency))
        print(
            f"\n{engine}: {args.jobs:,} jobs (outbox, c1: {args.outbox_jobs:,}), "
            f"concurrency {args.concurrency}, {args.reps} rounds"
        )
        print("| form | jobs/s (median) | ratio | spread | commits / 1,000 jobs |")
        print("|---|---:|---:|---:|---:|")
        for form, rs in runs.items():
            base_form = "c1" if form == "outbox" else "store+name"
            rates = [r.rate for r in rs]
            med = statistics.median(rates)
            spread = (max(rates) - min(rates)) / 2 / med
            if base_form in runs:
                ratio = statistics.median(
                    r.rate / b.rate for r, b in zip(rs, runs[base_form], strict=True)
                )
                ratio_text = f"{ratio:.2f} (÷ {base_form})"
            else:
                ratio_text = "-"
            commits = (
                "-"
                if form == "cli"
                else f"{statistics.median(1000 * r.commits / r.jobs for r in rs):.1f}"
            )
            print(f"| {form} | {med:,.0f} | {ratio_text} | ±{spread:.0%} | {commits} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
