#!/usr/bin/env python3
"""The peer harness: alkstore and the PostgreSQL peers installable here, side
by side, on the method of hardbyte/postgresql-job-queue-benchmarking.

That harness cannot run on this machine as it is (it starts its own
PostgreSQL 18 with ``docker compose`` and reaches it at a fixed
``bench:bench@localhost:15555``; every adapter but awa's is a container
image), so this is our own implementation of its method (bench/README.md,
"Peer harness"): adapters are processes speaking a line protocol
(bench/harness_proto.py) that the harness paces with ``ENQ n`` tokens
(fixed rate, or a depth target), cells are phases (warm-up, measure, chaos,
recovery, drain), and for each cell it records throughput, claim latency
(insert -> handler start), recovery (time back to 90 % of the baseline,
jobs lost: every id produced that no handler completed by the end of the
drain) and bloat (dead tuples and table sizes).

Every cell gets a fresh database ``scratch_harness_<system>`` (dropped at
its end) on ``--pg-url``'s server. Run it with the bench venv (made by
``bench/run.py``: it holds procrastinate and pgqueuer) and ``npm ci`` in
``bench/harness_pgboss``::

    bench/.venv/bin/python bench/harness.py                 # everything
    bench/.venv/bin/python bench/harness.py --cells sweep latency --systems alkstore pgboss
    bench/.venv/bin/python bench/harness.py --cells crash --workers 4 16

Results: ``bench/results/harness-<UTC time>.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import platform
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
PY = sys.executable

ADAPTERS: dict[str, list[str]] = {
    "alkstore": [PY, str(BENCH / "harness_alkstore.py")],
    "alkstore-sync": [PY, str(BENCH / "harness_alkstore_sync.py")],
    "awa": [PY, str(BENCH / "harness_awa.py")],
    "procrastinate": [PY, str(BENCH / "harness_procrastinate.py")],
    "pgqueuer": [PY, str(BENCH / "harness_pgqueuer.py")],
    "pgboss": ["node", str(BENCH / "harness_pgboss" / "main.mjs")],
}

#: Peers of the upstream harness that do not run here, each with the reason
#: found on this machine (bench/README.md says how each was checked).
NOT_RUN: dict[str, str] = {}


def log(message: str) -> None:
    print(f"[harness {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------ replicas


class Tally:
    """What the adapters of one cell reported, in one place."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.t0 = time.monotonic()
        self.produced: set[int] = set()
        self.done: set[int] = set()
        self.completions = 0
        self.per_second: list[int] = []
        self.lat: list[tuple[float, float]] = []  # (receipt time, ms)
        self.errors: list[str] = []

    def second(self, now: float) -> int:
        return int(now - self.t0)

    def add_done(self, job_id: int, lat: float) -> None:
        now = time.monotonic()
        with self.lock:
            self.done.add(job_id)
            self.produced.add(job_id)  # an enqueue whose report a kill cut off
            self.completions += 1
            s = self.second(now)
            while len(self.per_second) <= s:
                self.per_second.append(0)
            self.per_second[s] += 1
            self.lat.append((now - self.t0, lat))


class Replica:
    """One adapter process: its pipes, its reader thread, its token account."""

    def __init__(
        self,
        system: str,
        index: int,
        url: str,
        workers: int,
        tally: Tally,
        logdir: Path,
        env: dict[str, str],
    ) -> None:
        self.system = system
        self.index = index
        self.url = url
        self.workers = workers
        self.tally = tally
        self.logdir = logdir
        self.env = env
        self.incarnation = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.ready = threading.Event()
        self.issued = 0  # tokens sent to the live process
        self.confirmed = 0  # of those, reported enqueued
        self.info: dict[str, Any] = {}
        self.wlock = threading.Lock()

    def start(self, install: bool = True) -> None:
        self.incarnation += 1
        self.ready = threading.Event()
        self.issued = self.confirmed = 0
        env = {
            **os.environ,
            **self.env,
            "DATABASE_URL": self.url,
            "WORKER_COUNT": str(self.workers),
            "ID_BASE": str((self.index * 1000 + self.incarnation) * 10_000_000),
            "ADAPTER_NAME": f"{self.system}-{self.index}",
            "BENCH_INSTALL": "1" if install else "0",
        }
        err = open(self.logdir / f"{self.system}-{self.index}.log", "ab")  # noqa: SIM115
        self.proc = subprocess.Popen(
            ADAPTERS[self.system],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            env=env,
            cwd=str(BENCH),
            start_new_session=True,
        )
        threading.Thread(target=self._read, args=(self.proc,), daemon=True).start()

    def _read(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        tally = self.tally
        for raw in proc.stdout:
            if raw[:2] == b"D ":
                _, a, b = raw.split()
                tally.add_done(int(a), float(b))
                continue
            try:
                rec = json.loads(raw)
            except ValueError:
                continue
            kind = rec.get("k")
            if kind == "enq":
                with tally.lock:
                    tally.produced.update(rec["ids"])
                if proc is self.proc:
                    self.confirmed += len(rec["ids"])
            elif kind == "ready":
                self.info = rec
                self.ready.set()
            elif kind == "err":
                with tally.lock:
                    if len(tally.errors) < 200:
                        tally.errors.append(str(rec.get("msg")))

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def send(self, n: int) -> bool:
        if not self.alive() or not self.ready.is_set():
            return False
        assert self.proc is not None and self.proc.stdin is not None
        try:
            with self.wlock:
                self.proc.stdin.write(f"ENQ {n}\n".encode())
                self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return False
        self.issued += n
        return True

    def unconfirmed(self) -> int:
        return max(0, self.issued - self.confirmed)

    def kill(self) -> int:
        """SIGKILL the process group; returns the tokens it never enqueued."""
        lost_tokens = self.unconfirmed()
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.issued = self.confirmed = 0
        return lost_tokens

    def stop_producing(self) -> None:
        if self.alive():
            assert self.proc is not None and self.proc.stdin is not None
            try:
                with self.wlock:
                    self.proc.stdin.write(b"STOP\n")
                    self.proc.stdin.flush()
            except OSError:
                pass

    def terminate(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(8)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


class Pacer:
    """Hands out ``ENQ`` tokens: a fixed rate credited on real elapsed time,
    or a depth target (top the unfinished jobs back up to *target*)."""

    def __init__(self, replicas: list[Replica], tally: Tally) -> None:
        self.replicas = replicas
        self.tally = tally
        self.mode = "off"
        self.rate = 0.0
        self.target = 0
        self.offered = 0  # tokens the live processes hold or enqueued
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def forget(self, tokens: int) -> None:
        self.offered -= tokens

    def _give(self, n: int) -> None:
        live = [r for r in self.replicas if r.alive() and r.ready.is_set()]
        if not live or n <= 0:
            return
        share = math.ceil(n / len(live))
        for r in live:
            k = min(share, n)
            if k > 0 and r.send(k):
                self.offered += k
                n -= k

    def _run(self) -> None:
        last = time.monotonic()
        credit = 0.0
        while not self.stop.wait(0.01):
            now = time.monotonic()
            dt, last = now - last, now
            if self.mode == "fixed":
                credit += self.rate * dt
                whole = int(credit)
                if whole:
                    credit -= whole
                    self._give(whole)
            elif self.mode == "depth":
                credit = 0.0
                with self.tally.lock:
                    done = len(self.tally.done)
                depth = self.offered - done
                if depth < self.target:
                    self._give(self.target - depth)
            else:
                credit = 0.0


# ------------------------------------------------------------------ database


def admin(url: str) -> psycopg.Connection[Any]:
    return psycopg.connect(url, autocommit=True, application_name="harness-admin")


def db_url(base: str, name: str) -> str:
    """*base* (a ``postgresql://`` URL) with its database replaced by *name*."""
    parts = urlsplit(base)
    return urlunsplit(parts._replace(path="/" + name))


def table_stats(url: str) -> dict[str, Any]:
    """Dead and live tuples and sizes of every user table (each system has
    its own database, so every user table is the system's)."""
    with admin(url) as conn:
        rows = conn.execute(
            """SELECT schemaname || '.' || relname, n_live_tup, n_dead_tup,
                      pg_total_relation_size(relid), autovacuum_count + vacuum_count
               FROM pg_stat_user_tables"""
        ).fetchall()
    return {
        "live": sum(r[1] for r in rows),
        "dead": sum(r[2] for r in rows),
        "bytes": sum(r[3] for r in rows),
        "vacuums": sum(r[4] for r in rows),
        "tables": {r[0]: {"live": r[1], "dead": r[2], "bytes": r[3]} for r in rows if r[3]},
    }


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU of *pids* so far (``/proc``; processes gone count 0)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / tick


def backend_pids(url: str, dbname: str) -> list[int]:
    with admin(url) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            (dbname,),
        ).fetchall()
    return [int(r[0]) for r in rows]


# ------------------------------------------------------------------ disruptions


class Disruption:
    """A chaos or pressure action with a start and an end."""

    name = "none"

    def begin(self, cell: Cell) -> None: ...

    def end(self, cell: Cell) -> None: ...

    def info(self) -> dict[str, Any]:
        return {}


class KillOnce(Disruption):
    """SIGKILL replica 0 at the start; start it again after *down_s*."""

    name = "worker_kill"

    def __init__(self, down_s: float) -> None:
        self.down_s = down_s

    def begin(self, cell: Cell) -> None:
        cell.pacer.forget(cell.replicas[0].kill())
        cell.timer(self.down_s, lambda: cell.replicas[0].start(install=False))


class RepeatedKill(Disruption):
    """SIGKILL replica 0 every *period_s*, started again one second later."""

    name = "repeated_kills"

    def __init__(self, period_s: float) -> None:
        self.period_s = period_s
        self.kills = 0
        self.stop = threading.Event()

    def begin(self, cell: Cell) -> None:
        def loop() -> None:
            while not self.stop.is_set():
                cell.pacer.forget(cell.replicas[0].kill())
                self.kills += 1
                if self.stop.wait(1.0):
                    break
                cell.replicas[0].start(install=False)
                if self.stop.wait(self.period_s - 1.0):
                    break
            if not cell.replicas[0].alive():
                cell.replicas[0].start(install=False)

        self.thread = threading.Thread(target=loop, daemon=True)
        self.thread.start()

    def end(self, cell: Cell) -> None:
        self.stop.set()
        self.thread.join()

    def info(self) -> dict[str, Any]:
        return {"kills": self.kills}


class BackendKill(Disruption):
    """``pg_terminate_backend`` of every backend of the system's database
    (active or idle in transaction, as upstream), *rate* times a second."""

    name = "backend_kill"

    def __init__(
        self, rate: float, states: tuple[str, ...] = ("active", "idle in transaction")
    ) -> None:
        self.rate = rate
        self.states = states
        self.killed = 0
        self.stop = threading.Event()

    def begin(self, cell: Cell) -> None:
        def loop() -> None:
            with admin(cell.admin_url) as conn:
                while not self.stop.wait(1.0 / self.rate):
                    rows = conn.execute(
                        """SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                           WHERE datname = %s AND pid <> pg_backend_pid()
                             AND state = ANY(%s)""",
                        (cell.dbname, list(self.states)),
                    ).fetchall()
                    self.killed += len(rows)

        self.thread = threading.Thread(target=loop, daemon=True)
        self.thread.start()

    def end(self, cell: Cell) -> None:
        self.stop.set()
        self.thread.join()

    def info(self) -> dict[str, Any]:
        return {"backends_killed": self.killed, "per_second": self.rate}


class Outage(Disruption):
    """In place of upstream's PostgreSQL restart (the server here is shared):
    the system's database refuses connections (``ALLOW_CONNECTIONS false``)
    for *down_s* and every backend it has is terminated at once, which is
    what a restart looks like from the clients."""

    name = "db_outage"

    def __init__(self, down_s: float) -> None:
        self.down_s = down_s
        self.killed = 0

    def begin(self, cell: Cell) -> None:
        with admin(cell.admin_url) as conn:
            conn.execute(
                sql.SQL("ALTER DATABASE {} WITH ALLOW_CONNECTIONS false").format(
                    sql.Identifier(cell.dbname)
                )
            )
            self.killed = len(
                conn.execute(
                    """SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                   WHERE datname = %s AND pid <> pg_backend_pid()""",
                    (cell.dbname,),
                ).fetchall()
            )
        cell.timer(self.down_s, lambda: self.end(cell))

    def end(self, cell: Cell) -> None:
        if "outage_end" not in cell.marks:
            cell.mark("outage_end")  # recovery counts from here, not from the phase's end
        with admin(cell.admin_url) as conn:
            conn.execute(
                sql.SQL("ALTER DATABASE {} WITH ALLOW_CONNECTIONS true").format(
                    sql.Identifier(cell.dbname)
                )
            )

    def info(self) -> dict[str, Any]:
        return {"backends_killed": self.killed, "down_s": self.down_s}


class PoolHold(Disruption):
    """Hold *n* idle connections to the system's database (upstream holds
    300; the shared server here has max_connections 100, so *n* is what
    leaves 25 free for everyone else)."""

    name = "pool_exhaustion"

    def __init__(self, n: int) -> None:
        self.want = n
        self.conns: list[psycopg.Connection[Any]] = []

    def begin(self, cell: Cell) -> None:
        with admin(cell.admin_url) as conn:
            row = conn.execute(
                "SELECT current_setting('max_connections')::int, count(*) FROM pg_stat_activity"
            ).fetchone()
        assert row is not None
        room = max(0, int(row[0]) - int(row[1]) - 25)
        for _ in range(min(self.want, room)):
            try:
                self.conns.append(psycopg.connect(cell.url, autocommit=True))
            except psycopg.Error:
                break
        self.held = len(self.conns)

    def end(self, cell: Cell) -> None:
        for c in self.conns:
            c.close()
        self.conns.clear()

    def info(self) -> dict[str, Any]:
        return {"held_connections": self.held}


class HeldXmin(Disruption):
    """A session of the system's database holds a transaction with an xid
    open (``BEGIN; SELECT txid_current()``): vacuum cannot remove any row
    deleted after it began, in that database."""

    name = "held_xmin"

    def begin(self, cell: Cell) -> None:
        self.conn = psycopg.connect(cell.url, application_name="harness-xmin")
        self.conn.execute("SELECT txid_current()")

    def end(self, cell: Cell) -> None:
        self.conn.rollback()
        self.conn.close()


class Burst(Disruption):
    """The fixed rate times *factor* for the phase (an event burst)."""

    name = "burst"

    def __init__(self, factor: float) -> None:
        self.factor = factor

    def begin(self, cell: Cell) -> None:
        cell.pacer.rate *= self.factor

    def end(self, cell: Cell) -> None:
        cell.pacer.rate /= self.factor

    def info(self) -> dict[str, Any]:
        return {"factor": self.factor}


# ------------------------------------------------------------------ cells


@dataclass
class Cell:
    system: str
    kind: str
    admin_url: str
    workers: int
    replicas_n: int
    logdir: Path
    env: dict[str, str]
    dbname: str = ""
    url: str = ""
    replicas: list[Replica] = field(default_factory=list)
    tally: Tally = field(default_factory=Tally)
    pacer: Pacer = field(init=False)
    marks: dict[str, float] = field(default_factory=dict)
    timers: list[threading.Timer] = field(default_factory=list)

    def timer(self, delay: float, fn: Callable[[], None]) -> None:
        t = threading.Timer(delay, fn)
        t.daemon = True
        t.start()
        self.timers.append(t)

    def mark(self, name: str) -> None:
        self.marks[name] = time.monotonic() - self.tally.t0

    def setup(self) -> None:
        self.dbname = f"scratch_harness_{self.system.replace('-', '_')}"
        with admin(self.admin_url) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                    sql.Identifier(self.dbname)
                )
            )
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(self.dbname)))
        self.url = db_url(self.admin_url, self.dbname)
        self.tally = Tally()
        self.replicas = [
            Replica(self.system, i, self.url, self.workers, self.tally, self.logdir, self.env)
            for i in range(self.replicas_n)
        ]
        for r in self.replicas:  # one after the other: the first installs the schema
            r.start(install=r.index == 0)
            deadline = time.monotonic() + 90
            while not r.ready.wait(0.2):
                if not r.alive():
                    raise RuntimeError(
                        f"{self.system} replica {r.index} exited at start (see its log)"
                    )
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{self.system} replica {r.index} not ready in 90 s")
        self.pacer = Pacer(self.replicas, self.tally)

    def teardown(self) -> None:
        for t in self.timers:
            t.cancel()
        self.pacer.stop.set()
        for r in self.replicas:
            r.stop_producing()
        for r in self.replicas:
            r.terminate()
        with admin(self.admin_url) as conn:
            conn.execute(
                sql.SQL("ALTER DATABASE {} WITH ALLOW_CONNECTIONS true").format(
                    sql.Identifier(self.dbname)
                )
            )
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                    sql.Identifier(self.dbname)
                )
            )

    def window(self, a: str, b: str) -> dict[str, Any]:
        """Completions per second and claim latency between two marks."""
        t0, t1 = self.marks[a], self.marks[b]
        with self.tally.lock:
            secs = self.tally.per_second[int(t0) : int(t1)]
            lats = [ms for (t, ms) in self.tally.lat if t0 <= t < t1]
        n = sum(secs)
        return {
            "seconds": round(t1 - t0, 1),
            "completed": n,
            "throughput": round(n / max(t1 - t0, 1e-9), 1),
            **percentiles(lats),
        }


def percentiles(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"p50_ms": None, "p95_ms": None, "p99_ms": None}
    v = sorted(values)

    def q(p: float) -> float:
        return round(v[min(len(v) - 1, int(p * len(v)))], 1)

    return {"p50_ms": q(0.50), "p95_ms": q(0.95), "p99_ms": q(0.99)}


def sweep_cell(system: str, workers: int, a: argparse.Namespace, logdir: Path) -> dict[str, Any]:
    """Depth-target producer (the backlog kept at --depth), one replica with
    *workers* handlers: warm-up, then the measured phase."""
    cell = Cell(system, "sweep", a.pg_url, workers, 1, logdir, base_env(a))
    cell.setup()
    try:
        before = table_stats(cell.url)
        cell.pacer.target = a.depth
        cell.pacer.mode = "depth"
        cell.mark("start")
        time.sleep(a.warmup)
        client = [r.proc.pid for r in cell.replicas if r.proc is not None]
        server = backend_pids(cell.admin_url, cell.dbname)
        cpu0 = cpu_seconds(client), cpu_seconds(server)
        cell.mark("measure")
        time.sleep(a.measure)
        cell.mark("end")
        cpu1 = cpu_seconds(client), cpu_seconds(server)
        after = table_stats(cell.url)
        out = {
            "cell": "sweep",
            "system": system,
            "workers": workers,
            **cell.window("measure", "end"),
        }
        out["bloat"] = bloat(before, after)
        n = max(out["completed"], 1)
        out["client_cpu_ms_per_job"] = round((cpu1[0] - cpu0[0]) * 1000 / n, 3)
        out["server_cpu_ms_per_job"] = round((cpu1[1] - cpu0[1]) * 1000 / n, 3)
        out["server_backends"] = len(server)
        out["errors"] = cell.tally.errors[:5]
        out["version"] = cell.replicas[0].info.get("version")
        return out
    finally:
        cell.teardown()


def latency_cell(system: str, a: argparse.Namespace, logdir: Path) -> dict[str, Any]:
    """A fixed rate every system here keeps up with: claim latency."""
    cell = Cell(system, "latency", a.pg_url, a.chaos_workers, 1, logdir, base_env(a))
    cell.setup()
    try:
        cell.pacer.rate = a.latency_rate
        cell.pacer.mode = "fixed"
        cell.mark("start")
        time.sleep(a.warmup)
        cell.mark("measure")
        time.sleep(a.measure)
        cell.mark("end")
        return {
            "cell": "latency",
            "system": system,
            "workers": a.chaos_workers,
            "rate": a.latency_rate,
            **cell.window("measure", "end"),
        }
    finally:
        cell.teardown()


def disruption_cell(
    system: str,
    kind: str,
    make: Callable[[], Disruption],
    replicas: int,
    a: argparse.Namespace,
    logdir: Path,
) -> dict[str, Any]:
    """Fixed rate; warm-up, baseline, the disruption, recovery, then the
    producer stops and the drain waits for every produced id (or --drain)."""
    cell = Cell(system, kind, a.pg_url, a.chaos_workers, replicas, logdir, base_env(a))
    cell.setup()
    d = make()
    out: dict[str, Any] = {
        "cell": kind,
        "system": system,
        "scenario": d.name,
        "replicas": replicas,
        "workers": a.chaos_workers,
        "rate": a.chaos_rate,
    }
    try:
        cell.pacer.rate = a.chaos_rate
        cell.pacer.mode = "fixed"
        cell.mark("start")
        time.sleep(a.chaos_warmup)
        cell.mark("baseline")
        time.sleep(a.baseline)
        cell.mark("chaos")
        before = table_stats(cell.url)
        d.begin(cell)
        time.sleep(a.chaos)
        d.end(cell)
        after_chaos = table_stats(cell.url)
        cell.mark("recovery")
        time.sleep(a.recovery)
        cell.mark("drain")
        cell.pacer.mode = "off"
        for r in cell.replicas:  # tokens not yet used are dropped; a call under way finishes
            r.stop_producing()
        deadline = time.monotonic() + a.drain
        settled = 0  # consecutive checks with nothing missing: an enqueue can land late
        while time.monotonic() < deadline and settled < 3:
            time.sleep(0.5)
            with cell.tally.lock:
                missing = len(cell.tally.produced - cell.tally.done)
            settled = settled + 1 if missing == 0 else 0
            if settled == 1:
                cell.mark("drained")
            for (
                r
            ) in cell.replicas:  # a process the disruption ended comes back, as under a supervisor
                if not r.alive():
                    out["restarted_after_exit"] = out.get("restarted_after_exit", 0) + 1
                    r.start(install=False)
        cell.mark("end")
        out["drain_timed_out"] = settled < 3  # then "lost" counts jobs still queued, too
        after = table_stats(cell.url)
        base = cell.window("baseline", "chaos")
        out["baseline"] = base
        out["during"] = cell.window("chaos", "recovery")
        out["after"] = cell.window("recovery", "drain")
        out["info"] = d.info()
        with cell.tally.lock:
            produced, done = set(cell.tally.produced), set(cell.tally.done)
            completions = cell.tally.completions
            per_second = list(cell.tally.per_second)
        out["produced"] = len(produced)
        out["lost"] = len(produced - done)
        out["ran_twice_or_more"] = completions - len(done)
        out["drain_s"] = round(
            cell.marks.get("drained", cell.marks["end"]) - cell.marks["drain"], 1
        )
        out["recovery_s"] = recovery_time(per_second, cell.marks, base["throughput"])
        out["per_second"] = per_second[int(cell.marks["baseline"]) :]
        out["marks"] = {k: round(v - cell.marks["baseline"], 1) for k, v in cell.marks.items()}
        out["worst_second_ratio"] = worst_ratio(per_second, cell.marks, base["throughput"])
        out["exited"] = [
            r.index for r in cell.replicas if r.proc is not None and r.proc.poll() is not None
        ]
        out["bloat_during"] = bloat(before, after_chaos)
        out["bloat"] = bloat(before, after)
        out["errors"] = sorted(set(cell.tally.errors))[:5]
        return out
    finally:
        cell.teardown()


def recovery_time(per_second: list[int], marks: dict[str, float], baseline: float) -> float | None:
    """Seconds from the disruption's end to the first second (of recovery or
    drain) with completions at >= 90 % of the baseline rate (upstream's rule);
    None when it never gets there."""
    start = int(marks.get("outage_end", marks["recovery"]))
    stop = int(marks["drain"])
    for s in range(start, min(stop, len(per_second))):
        if per_second[s] >= 0.9 * baseline:
            return float(s - start)
    return None


def worst_ratio(per_second: list[int], marks: dict[str, float], baseline: float) -> float | None:
    secs = per_second[int(marks["chaos"]) : int(marks["recovery"])]
    if not secs or baseline <= 0:
        return None
    return round(min(secs) / baseline, 2)


def bloat(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    return {
        "dead_before": before["dead"],
        "dead_after": after["dead"],
        "live_after": after["live"],
        "bytes_before": before["bytes"],
        "bytes_after": after["bytes"],
        "vacuums": after["vacuums"] - before["vacuums"],
    }


def base_env(a: argparse.Namespace) -> dict[str, str]:
    return {"JOB_WORK_MS": str(a.work_ms), "PAYLOAD_BYTES": "256", "BATCH_MAX": "128"}


CRASH: dict[str, tuple[Callable[[argparse.Namespace], Disruption], int]] = {
    "worker_kill": (lambda a: KillOnce(down_s=a.chaos / 2), 2),
    "repeated_kills": (lambda a: RepeatedKill(period_s=6.0), 2),
    "backend_kill": (lambda a: BackendKill(rate=2.0), 2),
    "pool_exhaustion": (lambda a: PoolHold(300), 2),
    "db_outage": (lambda a: Outage(down_s=10.0), 2),
}
PRESSURE: dict[str, tuple[Callable[[argparse.Namespace], Disruption], int]] = {
    "held_xmin": (lambda a: HeldXmin(), 1),
    "burst": (lambda a: Burst(4.0), 1),
}


# ------------------------------------------------------------------ report


def machine() -> dict[str, Any]:
    with admin(ARGS.pg_url) as conn:
        row = conn.execute("SELECT version(), current_setting('max_connections')").fetchone()
    assert row is not None
    node = shutil.which("node")
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "postgres": row[0],
        "max_connections": row[1],
        "node": subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip()
        if node
        else None,
        "git": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
        ).stdout.strip(),
    }


def fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:,.1f}" if v < 100 else f"{v:,.0f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def table(headers: list[str], rows: list[list[Any]]) -> list[str]:
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in rows]
    return [*out, ""]


def info_text(r: dict[str, Any]) -> str:
    parts = [f"{k} {v}" for k, v in r.get("info", {}).items()]
    if r.get("exited"):
        parts.append(f"exited: replica {r['exited']}")
    if r.get("drain_timed_out"):
        parts.append("drain timed out: lost includes jobs still queued")
    if r.get("restarted_after_exit"):
        parts.append(f"restarted after exit: {r['restarted_after_exit']}")
    return ", ".join(parts)


def report(results: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    machine_text = json.dumps(meta["machine"], indent=1)
    lines = [f"# Peer harness run {meta['started']}", "", "```", machine_text]
    lines += [json.dumps(meta["settings"]), "```", ""]
    failed = [r for r in results if "error" in r]
    sweep = [r for r in results if r.get("cell") == "sweep" and "error" not in r]
    if sweep:
        systems = list(dict.fromkeys(r["system"] for r in sweep))
        by = {(r["system"], r["workers"]): r for r in sweep}
        workers = sorted({r["workers"] for r in sweep})
        lines += ["## Throughput (jobs/s), depth-target producer", ""]
        rows = [[w, *[by.get((s, w), {}).get("throughput") for s in systems]] for w in workers]
        lines += table(["workers", *systems], rows)
        head = ["system", "workers", "jobs/s", "p50 ms", "p95 ms", "p99 ms"]
        head += ["dead tuples before", "after", "table bytes before", "after", "vacuums"]
        head += ["client CPU ms/job", "server CPU ms/job"]
        rows = []
        for r in sweep:
            b = r["bloat"]
            rows.append(
                [
                    r["system"],
                    r["workers"],
                    r["throughput"],
                    r["p50_ms"],
                    r["p95_ms"],
                    r["p99_ms"],
                    b["dead_before"],
                    b["dead_after"],
                    b["bytes_before"],
                    b["bytes_after"],
                    b["vacuums"],
                    r.get("client_cpu_ms_per_job"),
                    r.get("server_cpu_ms_per_job"),
                ]
            )
        lines += table(head, rows)
    lat = [r for r in results if r.get("cell") == "latency" and "error" not in r]
    if lat:
        lines += ["## Claim latency at a fixed rate", ""]
        rows = [
            [r["system"], r["rate"], r["throughput"], r["p50_ms"], r["p95_ms"], r["p99_ms"]]
            for r in lat
        ]
        lines += table(["system", "offered/s", "jobs/s", "p50 ms", "p95 ms", "p99 ms"], rows)
    dis = [r for r in results if r.get("cell") in ("crash", "pressure") and "error" not in r]
    if dis:
        lines += ["## Crash and pressure cells", ""]
        head = ["system", "scenario", "baseline jobs/s", "worst s / baseline", "p99 ms during"]
        head += ["p99 ms after", "back to 90 % (s)", "produced", "lost", "ran twice"]
        head += ["drain s", "dead tuples before -> after", "notes"]
        rows = []
        for r in dis:
            b = r["bloat"]
            rows.append(
                [
                    r["system"],
                    r["scenario"],
                    r["baseline"]["throughput"],
                    r["worst_second_ratio"],
                    r["during"]["p99_ms"],
                    r["after"]["p99_ms"],
                    r["recovery_s"],
                    r["produced"],
                    r["lost"],
                    r["ran_twice_or_more"],
                    r["drain_s"],
                    f"{fmt(b['dead_before'])} -> {fmt(b['dead_after'])}",
                    info_text(r),
                ]
            )
        lines += table(head, rows)
    if failed:
        lines += ["## Cells that failed", ""]
        rows = [
            [r["system"], r.get("cell"), r.get("scenario") or r.get("workers"), r["error"]]
            for r in failed
        ]
        lines += table(["system", "cell", "what", "error"], rows)
    return "\n".join(lines)


ARGS: argparse.Namespace


def main(argv: list[str]) -> int:
    global ARGS
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument(
        "--pg-url",
        default=os.environ.get(
            "ALKSTORE_BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
        ),
    )
    p.add_argument("--systems", nargs="+", default=[s for s in ADAPTERS if s != "alkstore-sync"])
    p.add_argument(
        "--cells",
        nargs="+",
        default=["sweep", "latency", "crash", "pressure"],
        choices=["sweep", "latency", "crash", "pressure"],
    )
    p.add_argument("--workers", nargs="+", type=int, default=[4, 16, 64, 256])
    p.add_argument("--scenarios", nargs="+", default=[*CRASH, *PRESSURE])
    p.add_argument("--warmup", type=float, default=15.0, help="sweep/latency warm-up s")
    p.add_argument("--measure", type=float, default=30.0, help="sweep/latency measured s")
    p.add_argument("--depth", type=int, default=1000, help="depth target of the sweep")
    p.add_argument("--work-ms", type=float, default=1.0, help="handler time per job")
    p.add_argument("--latency-rate", type=float, default=200.0)
    p.add_argument("--chaos-rate", type=float, default=150.0)
    p.add_argument("--chaos-workers", type=int, default=16, help="per replica")
    p.add_argument("--chaos-warmup", type=float, default=8.0)
    p.add_argument("--baseline", type=float, default=12.0)
    p.add_argument("--chaos", type=float, default=20.0)
    p.add_argument("--recovery", type=float, default=20.0)
    p.add_argument("--drain", type=float, default=60.0)
    p.add_argument("--out", type=Path, default=BENCH / "results")
    a = ARGS = p.parse_args(argv)
    started = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    a.out.mkdir(parents=True, exist_ok=True)
    logdir = Path(os.environ.get("HARNESS_LOGDIR", f"/tmp/alkstore-harness-{started}"))
    logdir.mkdir(parents=True, exist_ok=True)
    settings = {k: v for k, v in vars(a).items() if k not in ("pg_url", "out")}  # no paths
    meta = {"started": started, "machine": machine(), "settings": settings, "not_run": NOT_RUN}
    results: list[dict[str, Any]] = []
    out_json = a.out / f"harness-{started}.json"

    def save() -> None:
        out_json.write_text(json.dumps({"meta": meta, "results": results}, indent=1))
        (a.out / f"harness-{started}.md").write_text(report(results, meta) + "\n")

    def run(label: str, fn: Callable[[], dict[str, Any]], stub: dict[str, Any]) -> None:
        log(label)
        try:
            r = fn()
        except Exception as exc:
            r = {**stub, "error": f"{type(exc).__name__}: {exc}"[:300]}
        r["loadavg_1m_after"] = round(os.getloadavg()[0], 2)  # the machine is shared
        brief = {k: v for k, v in r.items() if k not in ("bloat", "errors")}
        log(f"{label}: {json.dumps(brief)[:400]}")
        results.append(r)
        save()

    if "sweep" in a.cells:
        for w in a.workers:  # interleaved: every system at one worker count, then the next
            for s in a.systems:
                run(
                    f"sweep {s} w={w}",
                    functools.partial(sweep_cell, s, w, a, logdir),
                    {"cell": "sweep", "system": s, "workers": w},
                )
    if "latency" in a.cells:
        for s in a.systems:
            run(
                f"latency {s}",
                functools.partial(latency_cell, s, a, logdir),
                {"cell": "latency", "system": s},
            )
    for group, scenarios in (("crash", CRASH), ("pressure", PRESSURE)):
        if group not in a.cells:
            continue
        for s in a.systems:
            for name, (make, replicas) in scenarios.items():
                if name not in a.scenarios:
                    continue
                run(
                    f"{group} {s} {name}",
                    functools.partial(
                        disruption_cell, s, group, functools.partial(make, a), replicas, a, logdir
                    ),
                    {"cell": group, "system": s, "scenario": name},
                )
    save()
    print(report(results, meta))
    log(f"wrote {out_json}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
