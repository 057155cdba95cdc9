"""``alkstore demo``: a tour of the store, on a temporary SQLite file or on
a store given by URL (SPEC §13).

On a temporary store the whole directory goes away afterwards. On a store
given with ``--url``, every name the tour creates (its queues, stream, lock,
schedules, channel and business table) starts with a prefix unique to the
run, and the tour removes what it created when it ends, however it ends: the
table is dropped, the jobs (dead ones included) and stream events deleted,
the schedules removed. Running it twice never clashes.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from . import _open
from ._open import redact_url
from .errors import InvalidArgument
from .protocols import Capability, Job, Queue, Store
from .types import EnqueueOpts, JobState, QueueOpts

__all__ = ["NEEDS_SQLITE", "run_demo"]

#: Why ``alkstore demo`` without ``--url`` cannot run (P-2).
NEEDS_SQLITE = (
    "the demo runs on a temporary SQLite store, and the SQLite engine is not "
    'installed: pip install "alkstore[sqlite]", or run the demo on your own '
    "store with --url URL"
)


def run_demo(url: str | None, open_store: Callable[[str], Store]) -> None:
    """Run the tour on a temporary SQLite store, or on the store at *url*
    (removing what it created there). *open_store* opens a URL."""
    if url is not None:
        store = open_store(url)
        demo = _Demo(store, tag=f"demo-{os.urandom(3).hex()}")
        try:
            demo.run()
        finally:
            try:
                demo.clean_up()
            finally:
                store.close()
        return
    if "sqlite" not in _open.installed_schemes():
        raise InvalidArgument(NEEDS_SQLITE)
    with tempfile.TemporaryDirectory(prefix="alkstore-demo-") as tmp:
        store = open_store(f"sqlite:///{os.path.join(tmp, 'demo.db')}")
        try:
            _Demo(store, tag="demo").run()
        finally:
            store.close()
    print(f"\nThe temporary store in {tmp} is gone; nothing was left behind.")


def _when(value: datetime | None) -> str:
    if value is None:
        return "-"
    return value.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class _DemoRollback(Exception):
    """Raised inside the demo's second transaction to roll it back."""


class _DemoLog(logging.Handler):
    """Shows the worker's warnings in the demo's output, without tracebacks."""

    def emit(self, record: logging.LogRecord) -> None:
        print(f"      [log {record.levelname.lower()}] {record.getMessage()}")


#: item -> what the demo's handler does with it.
_DEMO_ITEMS = {
    "book": "ships at once",
    "lamp": "fails once (courier offline), then ships",
    "ghost": "is refused for good: Fail('no such product')",
    "vase": "breaks every time: ValueError, retried until the budget is spent",
}


class _Demo:
    """The tour behind ``alkstore demo``; every name it creates starts with *tag*."""

    def __init__(self, store: Store, tag: str) -> None:
        self.store = store
        self.tag = tag
        self.caps = store.capabilities
        self.scheme = _open.url_scheme(store.url)
        self.table = f"{tag.replace('-', '_')}_orders"
        self.step = 0
        self.table_created = False
        self.made_queues: list[Queue] = []
        self.made_streams: list[str] = []
        self.made_schedules: list[str] = []

    def heading(self, title: str) -> None:
        self.step += 1
        print(f"\n{self.step}. {title}")

    def say(self, text: str = "") -> None:
        print(f"   {text}".rstrip())

    def run(self) -> None:
        print(f"alkstore demo on {redact_url(self.store.url)}")
        self.schema()
        # Each part shows one capability, and runs only where the engine has it.
        parts = {
            Capability.QUEUES: self.jobs,
            Capability.OUTBOX: self.outbox,
            Capability.STREAMS: self.streams,
            Capability.LOCKS: self.locks,
            Capability.SCHEDULER: self.scheduler,
            Capability.NOTIFICATIONS: self.notifications,
        }
        for capability, part in parts.items():
            if capability in self.caps:
                part()

    # -- SQL of the demo's business table, in the driver's dialect
    def _sql(self, text: str) -> str | None:
        if self.scheme == "sqlite":
            return text.replace("{id}", "INTEGER PRIMARY KEY").replace("{p}", "?")
        if self.scheme in ("postgresql", "postgres"):
            return text.replace("{id}", "BIGSERIAL PRIMARY KEY").replace("{p}", "%s")
        return None

    def schema(self) -> None:
        self.heading("Opening the store creates its schema")
        engine = type(self.store).__module__.partition(".")[0]
        self.say(f"engine {engine}; capabilities: {', '.join(sorted(map(str, self.caps)))}")
        if self.scheme == "sqlite":
            with self.store.transaction() as tx:
                rows = tx.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table' "
                    "AND name LIKE '\\_\\_alkstore%' ESCAPE '\\' ORDER BY name"
                ).fetchall()
            self.say("tables in the file: " + ", ".join(str(r[0]) for r in rows))

    def jobs(self) -> None:
        from .worker import Fail, Worker

        self.heading("Jobs enqueued in the same transaction as your own rows")
        # dead_letter_retention_s=0 lets the clean-up's sweep_expired() delete
        # the dead letters too; until then they stay, like any dead job.
        q = self.store.queue(
            f"{self.tag}.orders",
            QueueOpts(
                visibility_timeout_s=30,
                max_attempts=3,
                backoff_base_s=0,
                dead_letter_retention_s=0,
            ),
        )
        self.made_queues.append(q)
        stream = None
        if Capability.STREAMS in self.caps:
            stream = self.store.stream(f"{self.tag}.order-events")
            self.made_streams.append(stream.name)
        create = self._sql(
            f"CREATE TABLE IF NOT EXISTS {self.table} (id {{id}}, item TEXT NOT NULL)"
        )
        insert = self._sql(f"INSERT INTO {self.table} (item) VALUES ({{p}}) RETURNING id")
        with self.store.transaction() as tx:
            if create is not None:
                tx.execute(create)
                self.table_created = True
            for n, item in enumerate(_DEMO_ITEMS, 1):
                order = tx.execute(insert, (item,)).fetchone()[0] if insert else n
                q.enqueue({"order": order, "item": item}, tx=tx)
                if stream is not None:
                    stream.publish({"order": order, "item": item}, key=item, tx=tx)
        where = f"table {self.table}" if create else "your tables"
        self.say(f"one transaction wrote {len(_DEMO_ITEMS)} orders to {where},")
        self.say(f"enqueued a job per order on queue {q.name} and published an event each")
        try:
            with self.store.transaction() as tx:
                if insert is not None:
                    tx.execute(insert, ("teapot",))
                q.enqueue({"item": "teapot"}, tx=tx)
                raise _DemoRollback
        except _DemoRollback:
            pass
        orders = ""
        if create is not None:
            with self.store.transaction() as tx:
                count = tx.execute(f"SELECT count(*) FROM {self.table}").fetchone()[0]
            orders = f" and {count} orders"
        self.say(
            f"a transaction that rolled back left nothing: still {q.stats().pending} "
            f"pending jobs{orders}"
        )
        later = q.enqueue({"reminder": "follow up"}, EnqueueOpts(delay_s=3600))
        self.say(f"job {later} waits an hour (delay_s=3600): it is 'scheduled', not pending")

        self.heading("A worker runs the handler: return acks, exceptions retry or dead-letter")
        for item, fate in _DEMO_ITEMS.items():
            self.say(f"{item:6} {fate}")
        self.say("(backoff_base_s=0 so that retries are immediate; the default curve")
        self.say(" waits 2.5-5 s after the first failure, doubling to an hour at most)")
        self.say()

        def ship(job: Job) -> None:
            item = job.payload["item"]
            label = f"order {job.payload['order']} ({item}), attempt {job.attempts}"
            if item == "ghost":
                self.say(f"handler: {label}: refusing it")
                raise Fail("no such product")
            if item == "vase":
                self.say(f"handler: {label}: it broke")
                raise ValueError("broke in transit")
            if item == "lamp" and job.attempts == 1:
                self.say(f"handler: {label}: courier offline")
                raise ConnectionError("courier offline")
            self.say(f"handler: {label}: shipped")

        log = logging.getLogger("alkstore.worker")
        shown = _DemoLog(logging.WARNING)
        old_propagate = log.propagate
        log.addHandler(shown)
        log.propagate = False
        try:
            ran = Worker(
                self.store, q, ship, concurrency=1, worker_id="demo-worker", grace_s=5
            ).run_until_empty()
        finally:
            log.removeHandler(shown)
            log.propagate = old_propagate
        self.say()
        self.say(f"run_until_empty() ran {ran} handler calls; the queue now:")
        st = q.stats()
        self.say(
            f"pending {st.pending}, scheduled {st.scheduled}, "
            f"processing {st.processing}, dead {st.dead}"
        )
        self.say("dead letters (kept until a person deals with them):")
        for info in q.list_jobs(JobState.DEAD):
            self.say(
                f"  job {info.id} {info.payload['item']!r}: {info.last_error} "
                f"after {info.attempts} attempt(s)"
            )
        self.say(f"cancel({later}) -> {q.cancel(later)}: the reminder is gone")

    def outbox(self) -> None:
        from .worker import Worker

        self.heading("A transactional outbox: send only what was committed")
        box = self.store.outbox(f"{self.tag}.webhooks")
        self.made_queues.append(box.queue)
        with self.store.transaction() as tx:
            box.put({"event": "order.paid", "order": 1}, tx=tx)
        try:
            with self.store.transaction() as tx:
                box.put({"event": "order.paid", "order": 99}, tx=tx)
                raise _DemoRollback
        except _DemoRollback:
            pass
        sent: list[Any] = []
        Worker(self.store, box.queue, lambda job: sent.append(job.payload)).run_until_empty()
        for payload in sent:
            self.say(f"delivered {json.dumps(payload)}")
        self.say("(the message put in a rolled-back transaction never existed)")

    def streams(self) -> None:
        self.heading("A stream: an ordered log that consumers read at their own pace")
        s = self.store.stream(f"{self.tag}.order-events")
        events = s.read(after=0)
        for ev in events:
            self.say(f"offset {ev.offset}  key {ev.key!r:8} {json.dumps(ev.payload)}")
        if events:
            s.commit("mailer", events[1].offset if len(events) > 1 else events[0].offset)
        self.say(f"consumer 'mailer' committed offset {s.offset('mailer')}; it resumes there")

    def locks(self) -> None:
        self.heading("A lock with a TTL and a fencing token")
        name = f"{self.tag}.nightly-report"
        first = self.store.lock(name, ttl_s=60, owner="host-a")
        assert first is not None
        self.say(f"host-a holds {name} (token {first.token})")
        self.say(f"host-b asks too: {self.store.lock(name, ttl_s=60, owner='host-b')}")
        first.release()
        second = self.store.lock(name, ttl_s=60, owner="host-b")
        if second is not None:
            with second:
                self.say(f"after host-a released it, host-b holds it (token {second.token})")

    def scheduler(self) -> None:
        self.heading("Schedules live in the database: every process agrees on the next fire")
        for name, spec in (("cleanup", "@every 1h30m"), ("report", "0 9 * * MON-FRI")):
            self.made_schedules.append(f"{self.tag}.{name}")
            sched = self.store.schedule(
                f"{self.tag}.{name}", spec, f"{self.tag}.maintenance", {"task": name}
            )
            self.say(f"{spec!r:18} next fires at {_when(sched.next_fire_at)} (UTC)")
            self.store.unschedule(sched.name)
        self.say("(`alkstore scheduler` runs them; any number of copies fire each once)")

    def notifications(self) -> None:
        self.heading("Notifications are delivered on commit, to whoever is listening")
        channel = f"{self.tag}.chat"
        with self.store.listen(channel) as listener:
            with self.store.transaction() as tx:
                self.store.notify(channel, {"text": "order 1 shipped"}, tx=tx)
            started = time.monotonic()
            note = listener.get(timeout_s=10)
        if note is not None:
            took = (time.monotonic() - started) * 1000
            self.say(f"received {json.dumps(note.payload)} on {note.channel} in {took:.0f} ms")

    # --------------------------------------------------------------------- parser

    # -- leaving a store given by URL as it was

    def clean_up(self) -> None:
        """Remove what the tour created; safe to call twice, and after a
        tour that stopped half-way."""
        left: list[str] = []
        for name in self.made_schedules:
            self.store.unschedule(name)
        for q in self.made_queues:
            for state in (JobState.PENDING, JobState.PROCESSING):
                after = 0
                while batch := q.list_jobs(state, limit=100, after_id=after):
                    for info in batch:
                        q.cancel(info.id)
                    after = batch[-1].id
            q.sweep_expired()  # the dead letters, stamped with retention 0
            stats = q.stats()
            if stats.pending or stats.scheduled or stats.processing or stats.dead:
                left.append(f"queue {q.name}")
        for name in self.made_streams:
            stream = self.store.stream(name)
            last = 0
            while events := stream.read(after=last, limit=1000):
                last = events[-1].offset
            if last:
                stream.trim(before=last + 1)
        if self.table_created:
            with self.store.transaction() as tx:
                tx.execute(f"DROP TABLE IF EXISTS {self.table}")
            self.table_created = False
        where = redact_url(self.store.url)
        if left:
            print(f"\nThe demo could not remove everything from {where}: {', '.join(left)}")
        else:
            print(
                f"\nCleaned up {where}: the demo's table, jobs, stream events and "
                f"schedules (all named {self.tag}...) are gone."
            )
