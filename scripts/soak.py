"""Soak: steady load for an hour, and whether anything grows (issue 23).

    python3 scripts/soak.py --url sqlite:///soak.db --minutes 60
    python3 scripts/soak.py --url 'postgresql://postgres@127.0.0.1:5432/scratch_soak?schema=soak' \\
        --minutes 60 --json soak-pg.json
    python3 scripts/soak.py --url URL --minutes 30 --hold-xmin-minutes 10 --hold-at-minute 10

What runs, all in this process, through the public API:

1. Capacity: for ``--capacity-s`` seconds a producer enqueues as fast as it
   can (the backlog bounded to a few thousand jobs) while the soak's own
   Workers drain; capacity is the jobs completed per second over the last
   four fifths of that window, at most its last 3 minutes. By default the
   window is as long as the kept results and dead letters take to reach
   their steady size (``max(TTL, retention) + 2 sweeps``, 12 minutes): a
   capacity measured on an empty store overstates what the same store
   sustains with a million kept results beside it (measured: 2,950 jobs/s
   empty, 1,900 sustained on PostgreSQL), and the store the hour starts on
   is then already at its steady contents. The backlog is drained before the
   soak starts.
2. Soak: a producer offers ``--load`` (0.7) of that capacity, credited on
   real elapsed wall-clock time (a late loop catches up, it never drifts).
   The Worker (``alkstore.Worker``, ``--concurrency`` handlers) acks by
   returning; 1 % of the jobs are enqueued with ``max_attempts=1`` and raise,
   so they die into dead letters kept ``--dead-retention-s`` (600); every
   other job's result is kept ``--result-ttl-s`` (600, RS-1). Each enqueue
   batch also publishes a stream event and a notification: a consumer reads
   the stream, commits its offset and trims what it committed (S: ``trim``
   is the streams API's only retention; nothing trims by itself), and a
   listener counts the notifications.
3. Maintenance, the documented recipe (docs/deployment.md "Maintenance";
   alkstore sweeps nothing on its own, Q-18): a schedule ``@every 60s``
   (``--sweep-every-s``) on the
   queue ``soak-maintenance``, the scheduler loop (``run_schedules``) and a
   Worker whose handler calls ``sweep_expired()`` on the soak queue. It is
   what purges dead letters past retention and expired results.

Every ``--sample-s`` seconds it samples each table's and its indexes' sizes
(PostgreSQL: ``pg_relation_size`` and ``pg_indexes_size`` of every table of
the store's schema, partitions summed under their parent, and
``n_dead_tup``; SQLite: ``dbstat`` per table with its indexes, the freelist,
the file and WAL sizes), the claim p50/p99 over the interval, this process's
RSS, the connections (PostgreSQL: ``pg_stat_activity`` rows of the
database; SQLite: this process's open descriptors on the database files),
the queue depth and completed/s.

Claim cost: the Worker is given a wrapped queue handle whose
``claim_batch`` first makes the same claim with ``wait_s=0`` and times it;
only when that finds nothing does it make the Worker's blocking claim (so a
timed claim never includes waiting for work). The p50/p99 are over the
timed claims that returned jobs.

Check: the sample at ``--warmup-minutes`` (5) is the baseline; every size
(each table, each table's indexes, the SQLite file and WAL) and the claim
p50 must stay within ``--limit`` (1.2x) of it in every later sample. Sizes
under ``--size-floor-kib`` (256 KiB) are compared as that much (the few
pages of the jobs table follow the queue depth: that is not bloat). With
the default capacity run the kept results and dead letters are at their
steady size when the clock starts; with a shorter ``--capacity-s`` (or
``--rate``, which has no capacity run) they grow until the oldest reach
their TTL and a sweep ran, so the summary also gives the same check from
minute ``max(TTL, retention) + 2 sweeps`` (12 with the defaults) when the
run is that long: the ``steady`` figures. With ``--hold-xmin-minutes M --hold-at-minute K`` another
session holds a snapshot from minute K for M minutes (PostgreSQL: a
REPEATABLE READ transaction that has read a row and holds a txid; SQLite: a
read transaction, which stops checkpoints from passing it); the run then
passes on the held-xmin targets instead (claim p50 during <= 2x before, and
back within 1.2x of before within 5 minutes of the release), the sizes
being reported, not judged (a held snapshot makes tables grow by design).
On SQLite the WAL grows by megabytes a second while the reader holds it:
the hold ends early once the WAL passes ``--max-wal-mib`` (8 GiB), and is
judged from that release.

The last line printed begins ``soak:``; the exit status is 0 only on a pass.
``--json FILE`` writes every sample and the summary.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sqlite3
import statistics
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

import alkstore
from alkstore import EnqueueOpts, QueueOpts, Worker

QUEUE = "soak"
MAINTENANCE = "soak-maintenance"
STREAM = "soak-events"
CHANNEL = "soak"
BATCH = 20
FAILURE = "soak: a permanent failure (1 %)"
#: Below this, a size is compared as this (--size-floor-kib): a table of a
#: few pages whose size follows the queue depth is not bloat.
SIZE_FLOOR_KIB = 256
#: Held xmin: the release must be followed by recovery within this.
RECOVERY_S = 300.0
#: Held xmin: during the hold the claim p50 may reach this multiple.
HOLD_LIMIT = 2.0
#: Capacity is measured over at most the last this many seconds of its run.
CAPACITY_WINDOW_S = 180.0


class _DropExpected(logging.Filter):
    """The Worker logs each failed job with its traceback; the soak's 1 %
    are expected, so their records are dropped (everything else is kept)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return FAILURE not in record.getMessage()


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def pct(values: Sequence[float], p: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))]


# ----------------------------------------------------------------- claims


class ClaimTimes:
    """Durations of the Worker's claims that returned jobs, per interval."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._full: list[float] = []
        self._empty = 0

    def add(self, seconds: float, got: int) -> None:
        with self._lock:
            if got:
                self._full.append(seconds)
            else:
                self._empty += 1

    def take(self) -> tuple[list[float], int]:
        with self._lock:
            full, empty = self._full, self._empty
            self._full, self._empty = [], 0
        return full, empty


class TimedQueue:
    """A queue handle for the Worker: each claim is first made without
    waiting, and timed; only if it finds nothing is the Worker's blocking
    claim made (untimed). Everything else is the wrapped handle's."""

    def __init__(self, inner: Any, times: ClaimTimes) -> None:
        self._inner = inner
        self._times = times

    def claim_batch(self, worker_id: str, n: int, wait_s: float = 0, **extra: Any) -> list[Any]:
        t0 = time.perf_counter()
        jobs: list[Any] = self._inner.claim_batch(worker_id, n, 0, **extra)
        self._times.add(time.perf_counter() - t0, len(jobs))
        if jobs or wait_s <= 0:
            return jobs
        more: list[Any] = self._inner.claim_batch(worker_id, n, wait_s, **extra)
        return more

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


# ----------------------------------------------------------------- probes


class Probe:
    """Engine figures: sizes, dead rows, connections."""

    engine = ""

    def sizes(self) -> dict[str, int]:
        raise NotImplementedError

    def extra(self) -> dict[str, Any]:
        raise NotImplementedError

    def connections(self) -> int:
        raise NotImplementedError

    def close(self) -> None:
        pass


class PostgresProbe(Probe):
    engine = "postgresql"

    def __init__(self, url: str) -> None:
        import psycopg

        from alkstore_postgres._options import DEFAULT_SCHEMA
        from alkstore_postgres._url import parse_url

        parsed = parse_url(url)
        self.schema = str(parsed.options.get("schema", DEFAULT_SCHEMA))
        self.conninfo = parsed.conninfo
        self.conn = psycopg.connect(self.conninfo, autocommit=True)
        row = self.conn.execute("SHOW autovacuum").fetchone()
        self.autovacuum = bool(row and row[0] == "on")

    def vacuum_loop(self, every_s: float, stop: threading.Event) -> None:
        """``--vacuum-every-s``: a plain ``VACUUM`` of every table of the
        schema, on a connection of its own, for a server whose autovacuum is
        off (a stand-in for it, not the production path)."""
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.conninfo, autocommit=True) as conn:
            while not stop.wait(every_s):
                tables = conn.execute(
                    "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                    " WHERE n.nspname = %s AND c.relkind = 'r'",
                    (self.schema,),
                ).fetchall()
                for (name,) in tables:
                    conn.execute(
                        sql.SQL("VACUUM {}.{}").format(
                            sql.Identifier(self.schema), sql.Identifier(name)
                        )
                    )

    def _rows(self) -> list[tuple[Any, ...]]:
        return self.conn.execute(
            """
            SELECT coalesce(parent.relname, c.relname),
                   sum(pg_relation_size(c.oid))::bigint,
                   sum(pg_indexes_size(c.oid))::bigint,
                   sum(coalesce(s.n_dead_tup, 0))::bigint,
                   sum(coalesce(s.n_live_tup, 0))::bigint
              FROM pg_class c
              JOIN pg_namespace n ON n.oid = c.relnamespace
              LEFT JOIN pg_inherits i ON i.inhrelid = c.oid
              LEFT JOIN pg_class parent ON parent.oid = i.inhparent
              LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
             WHERE n.nspname = %s AND c.relkind IN ('r', 'p')
             GROUP BY 1 ORDER BY 1
            """,
            (self.schema,),
        ).fetchall()

    def sizes(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for name, heap, idx, _dead, _live in self._rows():
            out[f"{name}"] = int(heap)
            out[f"{name} indexes"] = int(idx)
        return out

    def extra(self) -> dict[str, Any]:
        rows = self._rows()
        # The snapshots of this database's sessions hold back its vacuum
        # horizon; a long transaction with a txid in ANY database of the
        # server ages them all (snapshots see every database's txids), so
        # both are sampled: this database's oldest, and the server's.
        here, server = self.conn.execute(
            """
            SELECT max(age(backend_xmin)) FILTER (WHERE datname = current_database()),
                   greatest(max(age(backend_xmin)), max(age(backend_xid)))
              FROM pg_stat_activity
            """
        ).fetchone() or (None, None)
        return {
            "dead_tuples": {r[0]: int(r[3]) for r in rows},
            "live_tuples": {r[0]: int(r[4]) for r in rows},
            "oldest_xmin_age": here,
            "oldest_xid_age_server": server,
        }

    def connections(self) -> int:
        row = self.conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        ).fetchone()
        return int(row[0]) if row else 0

    def close(self) -> None:
        self.conn.close()


def sqlite_path(url: str) -> str:
    parts = urlsplit(url)
    path = unquote(parts.path)
    if parts.netloc:  # sqlite://host/path is not a form the engine takes; keep it whole
        path = parts.netloc + path
    return path[1:] if path.startswith("//") else path


class SqliteProbe(Probe):
    engine = "sqlite"

    def __init__(self, url: str) -> None:
        self.path = os.path.abspath(sqlite_path(url))
        self.conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self.conn.execute("PRAGMA busy_timeout = 5000")
        try:
            self.conn.execute("SELECT count(*) FROM dbstat").fetchone()
            self.dbstat = True
        except sqlite3.Error:
            self.dbstat = False

    def sizes(self) -> dict[str, int]:
        owner = dict(
            self.conn.execute(
                "SELECT name, tbl_name FROM sqlite_master WHERE type IN ('table', 'index')"
            ).fetchall()
        )
        out: dict[str, int] = {}
        if self.dbstat:
            for name, size in self.conn.execute(
                "SELECT name, sum(pgsize) FROM dbstat GROUP BY name"
            ).fetchall():
                table = owner.get(name, name)
                key = table if name == table else f"{table} indexes"
                out[key] = out.get(key, 0) + int(size)
        else:  # no dbstat in this build: the whole file only
            page = self.conn.execute("PRAGMA page_size").fetchone()[0]
            count = self.conn.execute("PRAGMA page_count").fetchone()[0]
            out["all pages"] = int(page) * int(count)
        out["file"] = os.path.getsize(self.path)
        wal = self.path + "-wal"
        out["wal file"] = os.path.getsize(wal) if os.path.exists(wal) else 0
        return out

    def extra(self) -> dict[str, Any]:
        free = self.conn.execute("PRAGMA freelist_count").fetchone()[0]
        pages = self.conn.execute("PRAGMA page_count").fetchone()[0]
        return {"freelist_pages": int(free), "page_count": int(pages), "dbstat": self.dbstat}

    def connections(self) -> int:
        names = {self.path, self.path + "-wal", self.path + "-shm"}
        n = 0
        for fd in os.listdir("/proc/self/fd"):
            try:
                if os.readlink(f"/proc/self/fd/{fd}") in names:
                    n += 1
            except OSError:
                pass
        return n

    def close(self) -> None:
        self.conn.close()


def wal_bytes(probe: Probe) -> int:
    path = getattr(probe, "path", "") + "-wal"
    return os.path.getsize(path) if os.path.exists(path) else 0


def rss_bytes() -> int:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


# ----------------------------------------------------------------- holder


class Holder:
    """Another session holding a snapshot open (PostgreSQL: xmin; SQLite:
    a read transaction that checkpoints cannot pass)."""

    def __init__(self, url: str, engine: str) -> None:
        self.url = url
        self.engine = engine
        self.conn: Any = None

    def hold(self) -> None:
        if self.engine == "postgresql":
            import psycopg

            from alkstore_postgres._url import parse_url

            self.conn = psycopg.connect(parse_url(self.url).conninfo)
            self.conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            row = self.conn.execute("SELECT txid_current(), count(*) FROM pg_class").fetchone()
            log(f"held xmin: txid {row[0]} holds its snapshot")
        else:
            self.conn = sqlite3.connect(
                os.path.abspath(sqlite_path(self.url)), isolation_level=None
            )
            self.conn.execute("BEGIN")
            self.conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            log("held read transaction: checkpoints cannot pass it")

    def release(self) -> None:
        if self.conn is not None:
            self.conn.rollback() if self.engine == "postgresql" else self.conn.execute("ROLLBACK")
            self.conn.close()
            self.conn = None
            log("snapshot released")


# ----------------------------------------------------------------- the load


@dataclass
class Counters:
    lock: threading.Lock = field(default_factory=threading.Lock)
    produced: int = 0
    completed: int = 0
    failed: int = 0
    events_read: int = 0
    notifications: int = 0
    sweeps: int = 0
    purged: int = 0
    results_deleted: int = 0
    trimmed: int = 0


class Load:
    def __init__(self, store: alkstore.Store, args: argparse.Namespace) -> None:
        self.store = store
        self.args = args
        self.c = Counters()
        self.times = ClaimTimes()
        self.queue = store.queue(
            QUEUE,
            QueueOpts(
                result_ttl_s=args.result_ttl_s,
                dead_letter_retention_s=args.dead_retention_s,
                max_attempts=3,
                visibility_timeout_s=60,
            ),
        )
        self.stream = store.stream(STREAM)
        self.stop = threading.Event()
        self.rate = 0.0  # jobs/s offered; 0: flat out (capacity)
        self.rate_t0 = time.monotonic()
        self.rate_base = 0
        self.threads: list[threading.Thread] = []
        self.errors: list[str] = []

    # handlers run on Worker threads
    def handle(self, job: Any) -> Any:
        payload = job.payload
        if payload.get("fail"):
            with self.c.lock:
                self.c.failed += 1
            raise RuntimeError(FAILURE)
        with self.c.lock:
            self.c.completed += 1
        return {"n": payload["n"], "ok": True}

    def sweep(self, job: Any) -> None:
        res = self.queue.sweep_expired()
        with self.c.lock:
            self.c.sweeps += 1
            self.c.purged += res.purged
            self.c.results_deleted += getattr(res, "results", 0)

    def set_rate(self, rate: float) -> None:
        with self.c.lock:
            self.rate_base = self.c.produced
        self.rate_t0 = time.monotonic()
        self.rate = rate

    def produce(self) -> None:
        fail = EnqueueOpts(max_attempts=1)
        n = 0
        while not self.stop.is_set():
            if self.rate > 0:
                owed = int(self.rate * (time.monotonic() - self.rate_t0)) - (
                    self.c.produced - self.rate_base
                )
                if owed <= 0:
                    time.sleep(0.005)
                    continue
                k = min(owed, BATCH)
            else:
                if self.c.produced - self.c.completed - self.c.failed > 4000:
                    time.sleep(0.01)
                    continue
                k = BATCH
            ok = [i for i in range(n, n + k) if i % 100 != 99]
            bad = [i for i in range(n, n + k) if i % 100 == 99]
            with self.store.transaction() as tx:
                if ok:
                    self.queue.enqueue_many([{"n": i} for i in ok], tx=tx)
                if bad:
                    self.queue.enqueue_many([{"n": i, "fail": True} for i in bad], fail, tx=tx)
                self.stream.publish({"first": n, "jobs": k}, tx=tx)
                self.store.notify(CHANNEL, {"first": n}, tx=tx)
            n += k
            with self.c.lock:
                self.c.produced += k

    def consume(self) -> None:
        consumer = "soak-consumer"
        offset = self.stream.offset(consumer)
        last_trim = time.monotonic()
        while not self.stop.is_set():
            events = self.stream.read(after=offset, limit=500)
            if events:
                offset = events[-1].offset
                self.stream.commit(consumer, offset)
                with self.c.lock:
                    self.c.events_read += len(events)
            else:
                self.stream.wait(offset, 0.5)
            if time.monotonic() - last_trim > 1:
                gone = self.stream.trim(offset + 1)
                with self.c.lock:
                    self.c.trimmed += gone
                last_trim = time.monotonic()

    def listen(self) -> None:
        with self.store.listen(CHANNEL) as listener:
            while not self.stop.is_set():
                if listener.get(timeout_s=0.5) is not None:
                    with self.c.lock:
                        self.c.notifications += 1

    def start(self) -> None:
        self.store.schedule(MAINTENANCE, f"@every {self.args.sweep_every_s}s", queue=MAINTENANCE)
        worker = Worker(
            self.store,  # with its store, the Worker acks in group commits (W-6)
            TimedQueue(self.queue, self.times),  # type: ignore[arg-type]
            self.handle,
            concurrency=self.args.concurrency,
        )
        keeper = Worker(self.store, MAINTENANCE, self.sweep, concurrency=1)
        self.workers = [worker, keeper]
        for name, target in [
            ("worker", lambda: worker.run(self.stop)),
            ("maintenance", lambda: keeper.run(self.stop)),
            ("scheduler", lambda: self.store.run_schedules(self.stop)),
            ("consumer", self.consume),
            ("listener", self.listen),
        ]:
            t = threading.Thread(target=self._guard(name, target), name=name, daemon=True)
            t.start()
            self.threads.append(t)

    def start_producer(self) -> None:
        t = threading.Thread(target=self._guard("producer", self.produce), daemon=True)
        t.start()
        self.threads.append(t)

    def _guard(self, name: str, target: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                target()
            except BaseException as exc:  # a dead thread must not pass silently
                log(f"{name} thread failed: {exc!r}")
                self.errors.append(f"{name}: {exc!r}")
                self.stop.set()

        return run

    def shutdown(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(60)


# ----------------------------------------------------------------- soak


def measure_capacity(load: Load, seconds: float) -> float:
    """Flat out for *seconds*; jobs finished per second over the last four
    fifths of them, at most the last ``CAPACITY_WINDOW_S``."""
    window = min(seconds * 4 / 5, CAPACITY_WINDOW_S)
    load.set_rate(0)
    load.start_producer()
    time.sleep(seconds - window)
    with load.c.lock:
        done0 = load.c.completed + load.c.failed
    t0 = time.monotonic()
    time.sleep(window)
    with load.c.lock:
        done1 = load.c.completed + load.c.failed
    return (done1 - done0) / (time.monotonic() - t0)


def drain(load: Load, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with load.c.lock:
            left = load.c.produced - load.c.completed - load.c.failed
        if left <= 0:
            return
        time.sleep(0.2)
    log(f"capacity backlog not drained in {timeout_s:.0f} s; going on")


def settle_seconds(args: argparse.Namespace) -> float:
    """How long kept results and dead letters take to reach their steady
    size: the oldest must reach their TTL/retention and a sweep run."""
    return float(max(args.result_ttl_s, args.dead_retention_s) + 2 * args.sweep_every_s)


def take_sample(load: Load, probe: Probe, t: float, last: dict[str, Any]) -> dict[str, Any]:
    full, empty = load.times.take()
    with load.c.lock:
        counts = {k: v for k, v in vars(load.c).items() if k != "lock"}
    now = time.monotonic()
    dt = now - last.get("mono", now - 1)
    st = load.queue.stats()
    sample: dict[str, Any] = {
        "t_s": round(t, 1),
        "sizes": probe.sizes(),
        **probe.extra(),
        "claims": len(full),
        "empty_claims": empty,
        "claim_p50_ms": None if not full else round(pct(full, 0.5) * 1000, 3),  # type: ignore[operator]
        "claim_p99_ms": None if not full else round(pct(full, 0.99) * 1000, 3),  # type: ignore[operator]
        "rss_bytes": rss_bytes(),
        "connections": probe.connections(),
        "depth": st.pending + st.scheduled + st.processing,
        "pending": st.pending + st.scheduled,
        "processing": st.processing,
        "dead": st.dead,
        "completed_per_s": round((counts["completed"] - last.get("completed", 0)) / dt, 1),
        "counts": counts,
    }
    last.update(mono=now, completed=counts["completed"])
    return sample


def ratio(value: float, base: float, floor: float = 0.0) -> float:
    value, base = max(value, floor), max(base, floor)
    if base <= 0:
        return 1.0 if value <= 0 else float("inf")
    return value / base


def judge_flat(
    samples: list[dict[str, Any]], base_i: int, floor: float, claims: bool = True
) -> tuple[float, str, int, dict[str, float]]:
    """Worst ratio to the baseline sample among the sizes (and the claim
    p50 unless *claims* is false): the ratio, its figure, the sample it was
    in, and every figure's worst ratio."""
    base = samples[base_i]
    worst, which, at = 0.0, "nothing", base_i
    each: dict[str, float] = {}

    def seen(r: float, figure: str, i: int) -> None:
        nonlocal worst, which, at
        each[figure] = round(max(each.get(figure, 0.0), r), 3)
        if r > worst:
            worst, which, at = r, figure, i

    for i in range(base_i, len(samples)):
        s = samples[i]
        for key, value in s["sizes"].items():
            seen(ratio(value, base["sizes"].get(key, 0), floor), f"size of {key}", i)
        if claims and s["claim_p50_ms"] is not None and base["claim_p50_ms"]:
            seen(s["claim_p50_ms"] / base["claim_p50_ms"], "claim p50", i)
    return worst, which, at, each


def judge_hold(
    samples: list[dict[str, Any]], start_s: float, end_s: float, sample_s: float
) -> dict[str, Any]:
    def p50s(lo: float, hi: float) -> list[float]:
        return [
            s["claim_p50_ms"]
            for s in samples
            if lo < s["t_s"] <= hi + 1e-6 and s["claim_p50_ms"] is not None
        ]

    before = p50s(start_s - min(300.0, start_s), start_s)
    # The intervals sampled while the snapshot was held (at least the first
    # one after it was taken, for a hold shorter than an interval).
    during = [x["claim_p50_ms"] for x in samples if x.get("held") and x["claim_p50_ms"]]
    if not during:
        during = p50s(start_s, start_s + sample_s)[:1]
    out: dict[str, Any] = {"before_p50_ms": None, "during_p50_ms": None}
    if not before or not during:
        out["error"] = "not enough samples before or during the hold"
        return out
    ref = statistics.median(before)
    out["before_p50_ms"] = ref
    out["during_p50_ms"] = statistics.median(during)
    out["during_worst_p50_ms"] = max(during)
    out["during_ratio"] = max(during) / ref
    recovered = None
    after = []
    for s in samples:
        if s["t_s"] > end_s + sample_s / 2 and s["claim_p50_ms"] is not None:
            after.append(s["claim_p50_ms"])
            if recovered is None and s["claim_p50_ms"] <= 1.2 * ref:
                recovered = s["t_s"] - end_s
    out["after_p50_ms"] = statistics.median(after) if after else None
    out["recovered_after_s"] = recovered
    out["pass"] = (
        out["during_ratio"] <= HOLD_LIMIT and recovered is not None and recovered <= RECOVERY_S
    )
    return out


def fmt_size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def describe(s: dict[str, Any]) -> str:
    sizes = s["sizes"]
    dead = s.get("dead_tuples")
    if dead is not None:
        where = (
            f"tables+indexes {fmt_size(sum(sizes.values()))}  dead tuples {sum(dead.values()):,}  "
            f"xmin age {s.get('oldest_xmin_age')} (server {s.get('oldest_xid_age_server')})"
        )
    else:
        where = (
            f"file {fmt_size(sizes['file'])}  wal {fmt_size(sizes['wal file'])}  "
            f"freelist {s.get('freelist_pages', 0):,} pages"
        )
    return (
        f"t={s['t_s'] / 60:5.1f} min  {where}  "
        f"claim p50 {s['claim_p50_ms']} ms p99 {s['claim_p99_ms']} ms  "
        f"rss {fmt_size(s['rss_bytes'])}  conns {s['connections']}  depth {s['depth']:,}  "
        f"dead {s['dead']:,}  {s['completed_per_s']:,.0f} done/s"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", required=True)
    p.add_argument("--minutes", type=float, required=True)
    p.add_argument("--warmup-minutes", type=float, default=5.0)
    p.add_argument("--sample-s", type=float, default=60.0)
    p.add_argument("--hold-xmin-minutes", type=float, default=None)
    p.add_argument("--hold-at-minute", type=float, default=None)
    p.add_argument("--json", default=None)
    p.add_argument(
        "--capacity-s",
        type=float,
        default=None,
        help="the flat-out capacity run (default: max(TTL, retention) + 2 sweeps)",
    )
    p.add_argument("--load", type=float, default=0.7, help="fraction of capacity offered")
    p.add_argument(
        "--rate",
        type=float,
        default=None,
        help="offer this many jobs/s instead (no capacity phase)",
    )
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--result-ttl-s", type=float, default=600.0)
    p.add_argument("--dead-retention-s", type=float, default=600.0)
    p.add_argument("--limit", type=float, default=1.2)
    p.add_argument(
        "--max-wal-mib",
        type=float,
        default=8192,
        help="SQLite: a held read transaction is released early once the WAL passes this",
    )
    p.add_argument(
        "--vacuum-every-s",
        type=float,
        default=None,
        help="PostgreSQL: VACUUM the store's tables this often (for a server whose autovacuum "
        "is off; not the production path)",
    )
    p.add_argument("--size-floor-kib", type=float, default=SIZE_FLOOR_KIB)
    p.add_argument("--sweep-every-s", type=int, default=60, help="the maintenance schedule")
    args = p.parse_args(argv)
    if (args.hold_xmin_minutes is None) != (args.hold_at_minute is None):
        p.error("--hold-xmin-minutes and --hold-at-minute go together")
    if args.warmup_minutes >= args.minutes:
        p.error("--warmup-minutes must be shorter than --minutes")
    if args.sample_s <= 0 or args.minutes <= 0:
        p.error("--minutes and --sample-s must be positive")
    if args.capacity_s is None:
        args.capacity_s = settle_seconds(args)
    if args.capacity_s <= 0:
        p.error("--capacity-s must be positive")

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("alkstore.worker").addFilter(_DropExpected())
    store = alkstore.open(args.url)
    probe: Probe = (
        PostgresProbe(args.url) if args.url.startswith("postgres") else SqliteProbe(args.url)
    )
    load = Load(store, args)
    samples: list[dict[str, Any]] = []
    summary: dict[str, Any] = {"engine": probe.engine, "args": vars(args)}
    holder = Holder(args.url, probe.engine)
    if isinstance(probe, PostgresProbe):
        summary["autovacuum"] = probe.autovacuum
        summary["vacuum_every_s"] = args.vacuum_every_s
        if not probe.autovacuum:
            log(
                "WARNING: autovacuum is off on this server: dead rows are never removed"
                + ("" if args.vacuum_every_s else " (see --vacuum-every-s)")
            )
        if args.vacuum_every_s:
            vac = threading.Thread(
                target=load._guard(
                    "vacuum", lambda: probe.vacuum_loop(args.vacuum_every_s, load.stop)
                ),
                name="vacuum",
                daemon=True,
            )
            vac.start()
            load.threads.append(vac)
    try:
        load.start()
        if args.rate is None:
            capacity = measure_capacity(load, args.capacity_s)
            load.set_rate(0.0001)  # stop producing while the backlog drains
            drain(load, 120)
            rate = capacity * args.load
        else:  # a fixed offered load: no capacity phase
            rate = args.rate
            capacity = rate / args.load
            load.set_rate(rate)  # before the producer starts: never flat out
            load.start_producer()
        summary["capacity_per_s"] = round(capacity, 1) if args.rate is None else None
        summary["offered_per_s"] = round(rate, 1)
        log(f"{probe.engine}: capacity {capacity:,.0f} jobs/s; offering {rate:,.0f} jobs/s")
        load.times.take()
        t0 = time.monotonic()
        load.set_rate(rate)
        last: dict[str, Any] = {"mono": t0, "completed": load.c.completed}
        end = t0 + args.minutes * 60
        hold_start = hold_end = None
        if args.hold_at_minute is not None:
            hold_start = args.hold_at_minute * 60
            hold_end = hold_start + args.hold_xmin_minutes * 60
        held = False
        released_s: float | None = None
        wal_cap = args.max_wal_mib * 1024 * 1024
        i = 1
        while not load.stop.is_set():
            nxt = t0 + i * args.sample_s
            while time.monotonic() < nxt and not load.stop.is_set():
                el = time.monotonic() - t0
                if hold_start is not None and not held and hold_end and hold_start <= el < hold_end:
                    holder.hold()
                    held = True
                if held and probe.engine == "sqlite" and wal_bytes(probe) > wal_cap:
                    log(f"the WAL passed --max-wal-mib {args.max_wal_mib:g}: releasing early")
                    summary["hold_cut_short_at_s"] = round(el, 1)
                    hold_end = el
                if held and hold_end is not None and el >= hold_end:
                    holder.release()
                    released_s = el
                    held = False
                    hold_end = None
                time.sleep(min(0.2, max(0.0, nxt - time.monotonic())))
            if load.stop.is_set():
                break
            s = take_sample(load, probe, time.monotonic() - t0, last)
            s["held"] = held
            samples.append(s)
            log(describe(s))
            if time.monotonic() >= end - 0.5:
                break
            i += 1
    finally:
        holder.release()
        load.shutdown()
        store.close()
        probe.close()

    if load.errors:
        summary["errors"] = load.errors
    base_i = next(
        (k for k, s in enumerate(samples) if s["t_s"] >= args.warmup_minutes * 60 - 0.5), None
    )
    passed = not load.errors
    if base_i is None or base_i >= len(samples) - 1:
        line = "soak: FAIL (no samples after the warm-up)"
        passed = False
    else:
        holding = args.hold_at_minute is not None
        floor = args.size_floor_kib * 1024
        worst, which, at, each = judge_flat(samples, base_i, floor, claims=not holding)
        summary.update(
            baseline_t_s=samples[base_i]["t_s"],
            worst_ratio=round(worst, 3),
            worst_figure=which,
            worst_at_t_s=samples[at]["t_s"],
            ratios=each,
            rss_first_last=[samples[0]["rss_bytes"], samples[-1]["rss_bytes"]],
            connections_max=max(x["connections"] for x in samples),
        )
        # Kept results and dead letters only stop growing once the oldest
        # reach their TTL/retention and a sweep ran: the same check from then.
        settle_s = settle_seconds(args)
        settled = next((k for k, x in enumerate(samples) if x["t_s"] >= settle_s - 0.5), None)
        steady = ""
        if settled is not None and settled > base_i and settled < len(samples) - 1:
            sw, swhich, sat, _ = judge_flat(samples, settled, floor, claims=not holding)
            summary["from_steady"] = {
                "baseline_t_s": samples[settled]["t_s"],
                "worst_ratio": round(sw, 3),
                "worst_figure": swhich,
                "worst_at_t_s": samples[sat]["t_s"],
            }
            steady = (
                f"; from minute {samples[settled]['t_s'] / 60:g} (retention + 2 sweeps) worst "
                f"{sw:.2f}x ({swhich})"
            )
        mib = 1024 * 1024
        first, final = samples[base_i], samples[-1]
        done_per_s = sum(final["counts"][k] - first["counts"][k] for k in ("completed", "failed"))
        done_per_s /= max(final["t_s"] - first["t_s"], 1e-9)
        summary["finished_per_s_after_warmup"] = round(done_per_s, 1)
        tail = (
            f"; depth {samples[base_i]['depth']:,}->{samples[-1]['depth']:,} "
            f"(finished {done_per_s:,.0f}/s of {rate:,.0f} offered after the warm-up)"
            f"; rss {samples[0]['rss_bytes'] / mib:.0f}->{samples[-1]['rss_bytes'] / mib:.0f} "
            f"MiB, connections <= {summary['connections_max']}"
        )
        flat = worst <= args.limit
        summary["flat"] = flat
        done = samples[-1]["counts"]
        cap = f"capacity {capacity:,.0f}/s" if args.rate is None else "fixed rate"
        if summary.get("autovacuum") is False:
            cap += (
                f", autovacuum OFF, VACUUM every {args.vacuum_every_s:g} s by the soak"
                if args.vacuum_every_s
                else ", autovacuum OFF"
            )
        head = (
            f"{probe.engine}, {args.minutes:g} min, {cap}, offered "
            f"{rate:,.0f}/s, {done['completed']:,} done, {done['failed']:,} dead"
        )
        if args.hold_at_minute is not None:
            assert args.hold_xmin_minutes is not None
            planned_end = (args.hold_at_minute + args.hold_xmin_minutes) * 60
            h = judge_hold(
                samples,
                args.hold_at_minute * 60,
                released_s if released_s is not None else planned_end,
                args.sample_s,
            )
            summary["hold"] = h
            passed = passed and bool(h.get("pass"))
            rec = h.get("recovered_after_s")
            back = f"after {rec:.0f} s" if rec is not None else "never"
            during = h.get("during_ratio", float("nan"))
            line = (
                f"soak: FAIL held from minute {args.hold_at_minute:g}: {h['error']}; {head}"
                if "error" in h
                else f"soak: {'PASS' if passed else 'FAIL'} held {args.hold_xmin_minutes:g} min "
                f"from minute {args.hold_at_minute:g}: claim p50 before {h.get('before_p50_ms')} "
                f"ms, during {h.get('during_p50_ms')} ms (worst {during:.2f}x, limit "
                f"{HOLD_LIMIT:g}x), after {h.get('after_p50_ms')} ms, back within 1.2x {back}; "
                f"sizes (not judged) worst {worst:.2f}x ({which}); {head}{tail}"
            )
        else:
            passed = passed and flat
            line = (
                f"soak: {'PASS' if passed else 'FAIL'} worst {worst:.2f}x of the "
                f"{samples[base_i]['t_s'] / 60:g}-minute value ({which}, at minute "
                f"{samples[at]['t_s'] / 60:.1f}; limit {args.limit:g}x){steady}; {head}{tail}"
            )
        if load.errors:
            line += "; errors: " + "; ".join(load.errors)
    summary["pass"] = passed
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"summary": summary, "samples": samples}, f, indent=1, default=str)
    print(line, flush=True)
    return 0 if passed else 1


if __name__ == "__main__":
    raise SystemExit(main())
