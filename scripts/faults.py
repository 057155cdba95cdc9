#!/usr/bin/env python3
"""Fault runs at full size, with figures (docs/reliability.md).

    python scripts/faults.py pg-kill     # backends terminated every second under load
    python scripts/faults.py pg-restart  # restarts and an outage under load
    python scripts/faults.py sqlite      # 8 contending processes; kills mid-transaction
    python scripts/faults.py all

PostgreSQL runs use a throwaway cluster made here (initdb/pg_ctl), never a
shared server. Each run prints one JSON line of figures and exits 1 when a
promise broke (a non-transient error, a lost or doubled job).
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import multiprocessing
import os
import signal
import sqlite3
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "packages" / "alkstore-postgres" / "tests"))
sys.path.insert(0, str(ROOT / "packages" / "alkstore-sqlite" / "tests"))

T = TypeVar("T")


class Tally:
    """Outcomes of every call of the load threads."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.raw: list[str] = []
        self.lock = threading.Lock()

    def retry(self, call: Callable[[], T]) -> T:
        from alkstore import TransientError

        while True:
            try:
                result = call()
                with self.lock:
                    self.counts["ok"] += 1
                return result
            except TransientError:
                with self.lock:
                    self.counts["TransientError"] += 1
                time.sleep(0.02)
            except Exception as exc:
                with self.lock:
                    self.counts[type(exc).__name__] += 1
                    self.raw.append(f"{type(exc).__name__}: {exc}")
                raise


def _pg_load(url: str, seconds: float, fault: Callable[[], int], every_s: float) -> dict[str, Any]:
    """Enqueue, claim and ack from 4 threads for *seconds* while *fault*
    runs every *every_s*; then drain and count."""
    from alkstore import QueueOpts
    from alkstore_postgres import PostgresStore

    app = f"alkstore-faults-{uuid.uuid4().hex[:8]}"
    store = PostgresStore(
        url,
        schema=f"faults_{uuid.uuid4().hex[:8]}",
        application_name=app,
        max_size=6,
        connect_timeout_s=2,
        pool_timeout_s=3,
    )
    q = store.queue("load", QueueOpts(visibility_timeout_s=2, max_attempts=10_000))
    tally = Tally()
    enqueued: set[int] = set()
    acked: Counter[int] = Counter()
    stop = threading.Event()
    faults = Counter[str]()

    def produce() -> None:
        for n in itertools.count():
            if stop.is_set():
                return
            enqueued.add(tally.retry(functools.partial(q.enqueue, {"n": n})))

    def consume() -> None:
        while not stop.is_set() or tally.retry(q.stats).live:
            for job in tally.retry(lambda: q.claim_batch("w", 20, wait_s=0.2)):
                if tally.retry(job.ack):
                    acked[job.id] += 1

    def inject() -> None:
        while not stop.wait(every_s):
            faults["injected"] += 1
            faults["backends terminated"] += fault()

    threads = [
        threading.Thread(target=f, daemon=True)
        for f in (produce, produce, consume, consume, inject)
    ]
    started = time.monotonic()
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join(120)
    hung = sum(t.is_alive() for t in threads)
    stats = tally.retry(q.stats)
    store.close()
    lost = len(enqueued - set(acked))
    doubled = sum(1 for n in acked.values() if n > 1)
    return {
        "seconds": round(time.monotonic() - started, 1),
        "enqueued": len(enqueued),
        "acked": len(acked),
        "lost": lost,
        "acked twice": doubled,
        "left in queue": stats.live + stats.dead,
        "hung threads": hung,
        "calls": dict(tally.counts),
        "non-transient": tally.raw[:5],
        **dict(faults),
        "ok": not (lost or doubled or hung or tally.raw or stats.live or stats.dead),
    }


def _cluster() -> Any:
    from fix_cluster import Cluster  # type: ignore[import-not-found]

    return Cluster()


def pg_kill(seconds: float) -> dict[str, Any]:
    cluster = _cluster()
    try:
        return {"run": "pg-kill", **_pg_load(cluster.url, seconds, cluster.terminate_backends, 1.0)}
    finally:
        cluster.remove()


def pg_restart(seconds: float) -> dict[str, Any]:
    cluster = _cluster()
    outages = Counter[str]()

    def fault() -> int:
        # Alternate a fast restart with a 3 s outage.
        if outages["restarts"] <= outages["outages"]:
            outages["restarts"] += 1
            cluster.restart("fast")
        else:
            outages["outages"] += 1
            cluster.stop("fast")
            time.sleep(3)
            cluster.start()
        return 0

    try:
        figures = _pg_load(cluster.url, seconds, fault, 6.0)
        return {"run": "pg-restart", **figures, **dict(outages)}
    finally:
        cluster.remove()


def sqlite_runs(seconds: float) -> list[dict[str, Any]]:
    from test_sqlite_hardening import (  # type: ignore[import-not-found]
        _batches,
        _commit_forever,
        _contend,
    )

    from alkstore_sqlite import SQLiteStore

    ctx = multiprocessing.get_context("spawn")
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as workdir:
        path = os.path.join(workdir, "contended.db")
        SQLiteStore(path).close()
        out = ctx.Queue()
        procs = [ctx.Process(target=_contend, args=(path, seconds, i, out)) for i in range(8)]
        for p in procs:
            p.start()
        total: Counter[str] = Counter()
        for _ in procs:
            total.update(out.get(timeout=seconds + 120))
        for p in procs:
            p.join(30)
        raw = {k: v for k, v in total.items() if k.startswith(("RAW", "open:"))}
        check = sqlite3.connect(path).execute("PRAGMA integrity_check").fetchone()[0]
        results.append(
            {
                "run": "sqlite-contend",
                "processes": 8,
                "seconds": seconds,
                "calls": dict(total),
                "integrity_check": check,
                "ok": not raw and check == "ok",
            }
        )

        path = os.path.join(workdir, "killed.db")
        SQLiteStore(path).close()
        reported: set[tuple[int, int]] = set()
        kills = 0
        for child in range(20):
            committed = ctx.Queue()
            proc = ctx.Process(target=_commit_forever, args=(path, child, committed))
            proc.start()
            reported.add((child, committed.get(timeout=60)))
            time.sleep(0.05 + (child % 7) * 0.05)
            assert proc.pid is not None
            os.kill(proc.pid, signal.SIGKILL)
            kills += 1
            proc.join(10)
            while True:
                try:
                    reported.add((child, committed.get(timeout=0.5)))
                except Exception:
                    break
        found = _batches(path)
        half = sum(1 for n in found.values() if n != 20)
        lost = len(reported - set(found))
        check = sqlite3.connect(path).execute("PRAGMA integrity_check").fetchone()[0]
        results.append(
            {
                "run": "sqlite-kill-mid-commit",
                "kills": kills,
                "batches committed": len(found),
                "batches reported": len(reported),
                "half-written": half,
                "lost": lost,
                "integrity_check": check,
                "ok": not half and not lost and check == "ok",
            }
        )
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", choices=["pg-kill", "pg-restart", "sqlite", "all"])
    parser.add_argument("--seconds", type=float, default=30.0)
    args = parser.parse_args(argv)
    results: list[dict[str, Any]] = []
    if args.run in ("pg-kill", "all"):
        results.append(pg_kill(args.seconds))
    if args.run in ("pg-restart", "all"):
        results.append(pg_restart(args.seconds))
    if args.run in ("sqlite", "all"):
        results.extend(sqlite_runs(args.seconds))
    for result in results:
        print(json.dumps(result), flush=True)
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
