"""The ``alkstore`` command (SPEC §13); also ``python -m alkstore``.

The store URL comes from ``--url``, else ``$ALKSTORE_URL``, else the embedded
SQLite default ``sqlite:///alkstore.db``. Listings print a table, or JSON with
``--json`` (datetimes in ISO 8601). Mistakes print one line on stderr and
exit 2 (usage, bad arguments); other failures exit 1; no tracebacks.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import logging
import os
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from enum import Enum
from typing import Any, NoReturn

from . import _open
from ._open import DEFAULT_URL
from .engine import OUTBOX_PREFIX
from .errors import AlkstoreError, InvalidArgument
from .protocols import Capability, Job, Queue, Store
from .types import EnqueueOpts, JobInfo, JobState, QueueOpts, check_duration

__all__ = ["main"]

#: Exit codes.
EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

_LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_PAYLOAD_WIDTH = 60
_ERROR_WIDTH = 50


class UsageError(Exception):
    """A mistake in the command line: exit 2 with one line."""


class _Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line, raised to :func:`main`."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see '{self.prog} --help')")


# ------------------------------------------------------------------ formatting


def _jsonable(value: Any) -> Any:
    """*value* with datetimes as ISO 8601 text, enums as their values and
    dataclasses as objects, ready for ``json.dumps``."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, frozenset, set)):
        return [_jsonable(v) for v in value]
    return value


def _print_json(value: Any) -> None:
    print(json.dumps(_jsonable(value), indent=2, ensure_ascii=False))


def _when(value: datetime | None) -> str:
    if value is None:
        return "-"
    return value.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _short(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


def _payload_text(payload: Any, width: int = _PAYLOAD_WIDTH) -> str:
    return _short(json.dumps(payload, ensure_ascii=False), width)


def _print_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    cells = [[str(c) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip())
    for row in cells:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


# ------------------------------------------------------------------- plumbing


def _resolve_url(args: argparse.Namespace) -> str:
    url: str | None = args.url
    return url or os.environ.get("ALKSTORE_URL") or DEFAULT_URL


def _open_store(url: str) -> Store:
    """Open *url*; failures become one readable line."""
    try:
        return _open.open(url)
    except InvalidArgument:
        raise
    except AlkstoreError as exc:
        raise AlkstoreError(f"cannot open {url}: {exc}") from exc
    except Exception as exc:  # a broken or half-installed engine package
        raise AlkstoreError(
            f"cannot load the engine for {_open.url_scheme(url)!r} URLs: "
            f"{type(exc).__name__}: {exc}"
        ) from exc


@contextmanager
def _store(args: argparse.Namespace) -> Iterator[Store]:
    store = _open_store(_resolve_url(args))
    try:
        yield store
    finally:
        store.close()


def _queue(store: Store, name: str) -> Queue:
    """The queue *name*; an outbox's backing queue is reached by its full name."""
    if name.startswith(OUTBOX_PREFIX):
        return store.outbox(name[len(OUTBOX_PREFIX) :]).queue
    return store.queue(name)


def _parse_json(text: str, what: str = "payload") -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{what} is not valid JSON ({exc.msg} at column {exc.colno})") from exc


@contextmanager
def _stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """SIGINT/SIGTERM set *stop* while the block runs (main thread only)."""
    previous: dict[signal.Signals, Any] = {}
    if threading.current_thread() is threading.main_thread():

        def on_signal(signum: int, frame: object) -> None:
            stop.set()

        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, on_signal)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _configure_logging(level: str) -> None:
    logging.basicConfig(level=level.upper(), format=_LOG_FORMAT, stream=sys.stderr)


# ------------------------------------------------------------------- commands


def cmd_migrate(args: argparse.Namespace) -> int:
    with _store(args) as store:
        engine = type(store).__module__.partition(".")[0]
        caps = sorted(str(c) for c in store.capabilities)
        if args.json:
            _print_json({"url": store.url, "engine": engine, "capabilities": caps})
        else:
            print(f"schema is up to date: {store.url} (engine {engine})")
            print(f"capabilities: {', '.join(caps)}")
    return EXIT_OK


def cmd_queues(args: argparse.Namespace) -> int:
    with _store(args) as store:
        stats = store.queue_stats()
    if args.json:
        _print_json(stats)
    elif not stats:
        print("(no queues)")
    else:
        _print_table(
            ["QUEUE", "PENDING", "SCHEDULED", "PROCESSING", "DEAD"],
            [[s.queue, s.pending, s.scheduled, s.processing, s.dead] for s in stats],
        )
    return EXIT_OK


def _job_row(info: JobInfo) -> list[object]:
    if info.state is JobState.DEAD:
        when, note = _when(info.died_at), _short(info.last_error or "", _ERROR_WIDTH)
    elif info.state is JobState.PROCESSING:
        when, note = _when(info.deadline), info.worker_id or ""
    else:
        when, note = _when(info.run_at), ""
    return [
        info.id,
        info.state.value,
        f"{info.attempts}/{info.max_attempts}",
        info.priority,
        when,
        _payload_text(info.payload),
        note,
    ]


_WHEN_HEADER = {
    JobState.PENDING: "RUN_AT",
    JobState.PROCESSING: "DEADLINE",
    JobState.DEAD: "DIED_AT",
}
_NOTE_HEADER = {JobState.PENDING: "", JobState.PROCESSING: "WORKER", JobState.DEAD: "LAST_ERROR"}


def cmd_jobs(args: argparse.Namespace) -> int:
    state = JobState(args.state)
    with _store(args) as store:
        jobs = _queue(store, args.queue).list_jobs(state, limit=args.limit, after_id=args.after)
    if args.json:
        _print_json(jobs)
        return EXIT_OK
    if not jobs:
        print(f"(no {state.value} jobs in {args.queue})")
        return EXIT_OK
    headers = ["ID", "STATE", "ATTEMPTS", "PRIORITY", _WHEN_HEADER[state], "PAYLOAD"]
    if _NOTE_HEADER[state]:
        headers.append(_NOTE_HEADER[state])
    _print_table(headers, [_job_row(j)[: len(headers)] for j in jobs])
    if len(jobs) == args.limit:
        print(f"(more may follow: --after {jobs[-1].id})")
    return EXIT_OK


def cmd_job(args: argparse.Namespace) -> int:
    with _store(args) as store:
        info = _queue(store, args.queue).get_job(args.id)
    if info is None:
        raise AlkstoreError(f"no job {args.id} in queue {args.queue!r}")
    if args.json:
        _print_json(info)
        return EXIT_OK
    fields = _jsonable(info)
    width = max(len(k) for k in fields)
    for key, value in fields.items():
        text = json.dumps(value, ensure_ascii=False) if key == "payload" else value
        print(f"{key.ljust(width)}  {'-' if text is None else text}")
    return EXIT_OK


def cmd_enqueue(args: argparse.Namespace) -> int:
    payload = _parse_json(args.payload)
    queue_opts = QueueOpts(
        **{
            k: v
            for k, v in (
                ("visibility_timeout_s", args.visibility_timeout),
                ("backoff_base_s", args.backoff_base),
            )
            if v is not None
        }
    )
    opts = EnqueueOpts(
        priority=args.priority,
        delay_s=args.delay,
        max_attempts=args.max_attempts,
        expires_s=args.expires,
    )
    with _store(args) as store:
        queue = (
            store.queue(args.queue, queue_opts)
            if not args.queue.startswith(OUTBOX_PREFIX)
            else _queue(store, args.queue)
        )
        job_id = queue.enqueue(payload, opts)
    if args.json:
        _print_json({"queue": args.queue, "id": job_id})
    else:
        print(job_id)
    return EXIT_OK


def cmd_cancel(args: argparse.Namespace) -> int:
    with _store(args) as store:
        cancelled = _queue(store, args.queue).cancel(args.id)
    if args.json:
        _print_json({"queue": args.queue, "id": args.id, "cancelled": cancelled})
    elif cancelled:
        print(f"cancelled job {args.id} of queue {args.queue}")
    if not cancelled:
        if not args.json:
            print(
                f"alkstore: job {args.id} of queue {args.queue!r} is not pending or "
                "processing; nothing cancelled",
                file=sys.stderr,
            )
        return EXIT_FAILURE
    return EXIT_OK


def cmd_sweep(args: argparse.Namespace) -> int:
    if args.all == (args.queue is not None):
        raise UsageError("sweep needs a QUEUE or --all, not both")
    results: list[dict[str, Any]] = []
    with _store(args) as store:
        names = [s.queue for s in store.queue_stats()] if args.all else [args.queue]
        for name in names:
            res = _queue(store, name).sweep_expired()
            results.append({"queue": name, **_jsonable(res)})
    if args.json:
        _print_json(results)
    elif not results:
        print("(no queues)")
    else:
        _print_table(
            ["QUEUE", "EXPIRED", "EXHAUSTED", "PURGED"],
            [[r["queue"], r["expired"], r["exhausted"], r["purged"]] for r in results],
        )
    return EXIT_OK


def cmd_schedules(args: argparse.Namespace) -> int:
    with _store(args) as store:
        schedules = store.schedules()
    if args.json:
        _print_json(schedules)
    elif not schedules:
        print("(no schedules)")
    else:
        _print_table(
            ["NAME", "SPEC", "TZ", "QUEUE", "NEXT_FIRE", "LAST_FIRE", "PAYLOAD"],
            [
                [
                    s.name,
                    s.spec,
                    s.tz,
                    s.queue,
                    _when(s.next_fire_at),
                    _when(s.last_fire_at),
                    _payload_text(s.payload, 40),
                ]
                for s in schedules
            ],
        )
    return EXIT_OK


def cmd_schedule(args: argparse.Namespace) -> int:
    payload = _parse_json(args.payload) if args.payload is not None else None
    opts = EnqueueOpts(priority=args.priority) if args.priority else None
    with _store(args) as store:
        sched = store.schedule(args.name, args.spec, args.queue, payload, opts, tz=args.tz)
    if args.json:
        _print_json(sched)
    else:
        print(f"schedule {sched.name}: next fire {_when(sched.next_fire_at)}")
    return EXIT_OK


def cmd_unschedule(args: argparse.Namespace) -> int:
    with _store(args) as store:
        removed = store.unschedule(args.name)
    if args.json:
        _print_json({"name": args.name, "removed": removed})
    elif removed:
        print(f"removed schedule {args.name}")
    if not removed:
        if not args.json:
            print(f"alkstore: no schedule named {args.name!r}", file=sys.stderr)
        return EXIT_FAILURE
    return EXIT_OK


def load_handler(spec: str) -> Callable[[Job], object]:
    """Import ``module:function`` (``module:object.method`` works too).

    The working directory is importable, as with ``python -m``.
    """
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise UsageError(f"handler must be MODULE:FUNCTION, got {spec!r}")
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
    try:
        obj: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (
            module_name == exc.name or module_name.startswith(exc.name + ".")
        ):
            raise UsageError(f"cannot import handler module {module_name!r}: {exc}") from exc
        raise AlkstoreError(
            f"importing {module_name!r} failed: {type(exc).__name__}: {exc}"
        ) from exc
    except Exception as exc:
        raise AlkstoreError(
            f"importing {module_name!r} failed: {type(exc).__name__}: {exc}"
        ) from exc
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError as exc:
            raise UsageError(f"module {module_name!r} has no attribute {attr!r}") from exc
    if not callable(obj):
        raise UsageError(f"{spec} is not callable")
    handler: Callable[[Job], object] = obj
    return handler


def cmd_worker(args: argparse.Namespace) -> int:
    from .worker import Worker

    handler = load_handler(args.handler)
    _configure_logging(args.log_level)
    with _store(args) as store:
        worker = Worker(
            store,
            _queue(store, args.queue),
            handler,
            concurrency=args.concurrency,
            worker_id=args.worker_id,
            grace_s=args.grace,
        )
        print(
            f"alkstore worker {worker.worker_id}: {args.handler} on queue {args.queue} "
            f"({store.url}, {args.concurrency} threads); Ctrl-C or SIGTERM stops it",
            file=sys.stderr,
        )
        worker.run()
    return EXIT_OK


def cmd_scheduler(args: argparse.Namespace) -> int:
    check_duration("--lock-ttl", args.lock_ttl, allow_zero=False)
    _configure_logging(args.log_level)
    stop = threading.Event()
    with _store(args) as store:
        print(
            f"alkstore scheduler on {store.url}; Ctrl-C or SIGTERM stops it",
            file=sys.stderr,
        )
        with _stop_on_signals(stop):
            store.run_schedules(stop=stop, owner=args.owner, lock_ttl_s=args.lock_ttl)
    return EXIT_OK


def cmd_demo(args: argparse.Namespace) -> int:
    url: str | None = args.url
    if url is not None:
        with _store(args) as store:
            _Demo(store, tag=f"demo-{os.urandom(3).hex()}").run()
        return EXIT_OK
    with tempfile.TemporaryDirectory(prefix="alkstore-demo-") as tmp:
        store = _open_store(f"sqlite:///{os.path.join(tmp, 'demo.db')}")
        try:
            _Demo(store, tag="demo").run()
        finally:
            store.close()
    print(f"\nThe temporary store in {tmp} is gone; nothing was left behind.")
    return EXIT_OK


# ----------------------------------------------------------------------- demo


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

    def heading(self, title: str) -> None:
        self.step += 1
        print(f"\n{self.step}. {title}")

    def say(self, text: str = "") -> None:
        print(f"   {text}".rstrip())

    def run(self) -> None:
        print(f"alkstore demo on {self.store.url}")
        self.schema()
        if Capability.QUEUES in self.caps:
            self.jobs()
        if Capability.OUTBOX in self.caps:
            self.outbox()
        if Capability.STREAMS in self.caps:
            self.streams()
        if Capability.LOCKS in self.caps:
            self.locks()
        if Capability.SCHEDULER in self.caps:
            self.scheduler()
        if Capability.NOTIFICATIONS in self.caps:
            self.notifications()

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
        q = self.store.queue(
            f"{self.tag}.orders",
            QueueOpts(visibility_timeout_s=30, max_attempts=3, backoff_base_s=0),
        )
        stream = (
            self.store.stream(f"{self.tag}.order-events")
            if Capability.STREAMS in self.caps
            else None
        )
        create = self._sql(
            f"CREATE TABLE IF NOT EXISTS {self.table} (id {{id}}, item TEXT NOT NULL)"
        )
        insert = self._sql(f"INSERT INTO {self.table} (item) VALUES ({{p}}) RETURNING id")
        with self.store.transaction() as tx:
            if create is not None:
                tx.execute(create)
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


def _build_parser() -> _Parser:
    url_opt = _Parser(add_help=False)
    url_opt.add_argument(
        "--url",
        default=argparse.SUPPRESS,
        help=f"store URL (default: $ALKSTORE_URL, else {DEFAULT_URL})",
    )
    json_opt = _Parser(add_help=False)
    json_opt.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="machine-readable output"
    )
    log_opt = _Parser(add_help=False)
    log_opt.add_argument(
        "--log-level",
        default="info",
        choices=["debug", "info", "warning", "error"],
        help="logging level (default: info)",
    )
    both = [url_opt, json_opt]

    parser = _Parser(
        prog="alkstore",
        description="Durable jobs, streams, locks and schedules inside your own database.",
    )
    parser.add_argument(
        "--url", default=None, help=f"store URL (default: $ALKSTORE_URL, else {DEFAULT_URL})"
    )
    parser.add_argument("--json", action="store_true", default=False, help=argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    def add(
        name: str, func: Callable[[argparse.Namespace], int], help_text: str, parents: Any
    ) -> _Parser:
        p: _Parser = sub.add_parser(name, help=help_text, description=help_text, parents=parents)
        p.set_defaults(func=func)
        return p

    add(
        "demo",
        cmd_demo,
        "a tour of alkstore on a temporary SQLite file (or on --url)",
        [url_opt],
    )
    add("migrate", cmd_migrate, "create or upgrade the schema of the store", both)
    add("queues", cmd_queues, "counts by state for every queue", both)

    p = add("jobs", cmd_jobs, "list the jobs of a queue in one state", both)
    p.add_argument("queue", metavar="QUEUE")
    p.add_argument(
        "--state", choices=[s.value for s in JobState], default="pending", help="default: pending"
    )
    p.add_argument("--limit", type=int, default=100, help="at most this many (default: 100)")
    p.add_argument("--after", type=int, default=0, metavar="ID", help="only ids above ID (paging)")

    p = add("job", cmd_job, "show one job, in any state", both)
    p.add_argument("queue", metavar="QUEUE")
    p.add_argument("id", metavar="ID", type=int)

    p = add("enqueue", cmd_enqueue, "enqueue one job with a JSON payload; prints its id", both)
    p.add_argument("queue", metavar="QUEUE")
    p.add_argument("payload", metavar="JSON")
    p.add_argument("--delay", type=float, metavar="S", help="seconds before it is claimable")
    p.add_argument("--priority", type=int, default=0, metavar="P", help="higher runs first")
    p.add_argument("--max-attempts", type=int, metavar="N", help="attempt budget of this job")
    p.add_argument("--expires", type=float, metavar="S", help="never run after S seconds")
    p.add_argument(
        "--visibility-timeout", type=float, metavar="S", help="claim lease (default: 300)"
    )
    p.add_argument("--backoff-base", type=float, metavar="S", help="retry curve base (default: 5)")

    p = add("cancel", cmd_cancel, "delete a pending or processing job", both)
    p.add_argument("queue", metavar="QUEUE")
    p.add_argument("id", metavar="ID", type=int)

    p = add("sweep", cmd_sweep, "dead-letter expired jobs and purge old dead letters", both)
    p.add_argument("queue", metavar="QUEUE", nargs="?")
    p.add_argument("--all", action="store_true", help="every queue")

    p = add(
        "worker",
        cmd_worker,
        "run MODULE:FUNC over a queue until SIGINT/SIGTERM",
        [url_opt, log_opt],
    )
    p.add_argument("handler", metavar="MODULE:FUNC")
    p.add_argument("--queue", required=True, metavar="Q")
    p.add_argument("--concurrency", type=int, default=4, metavar="N", help="threads (default: 4)")
    p.add_argument("--worker-id", metavar="ID", help="default: host:pid:random")
    p.add_argument(
        "--grace",
        type=float,
        default=30.0,
        metavar="S",
        help="on stop, wait this long for running handlers (default: 30)",
    )

    add("schedules", cmd_schedules, "list the schedules", both)

    p = add("schedule", cmd_schedule, "create or update a schedule", both)
    p.add_argument("name", metavar="NAME")
    p.add_argument("spec", metavar="SPEC", help="cron (5 or 6 fields), @daily, @every 1h30m, ...")
    p.add_argument("queue", metavar="QUEUE")
    p.add_argument("payload", metavar="JSON", nargs="?")
    p.add_argument("--tz", default="UTC", help="IANA time zone (default: UTC)")
    p.add_argument("--priority", type=int, default=0, metavar="P")

    p = add("unschedule", cmd_unschedule, "remove a schedule", both)
    p.add_argument("name", metavar="NAME")

    p = add(
        "scheduler",
        cmd_scheduler,
        "run the leader-elected scheduler until SIGINT/SIGTERM",
        [url_opt, log_opt],
    )
    p.add_argument("--owner", metavar="ID", help="leader lock owner (default: host:pid:random)")
    p.add_argument(
        "--lock-ttl", type=float, default=30.0, metavar="S", help="leader lock TTL (default: 30)"
    )
    return parser


def _one_line(message: object) -> str:
    return " ".join(str(message).split()) or "unknown error"


def main(argv: list[str] | None = None) -> int:
    """Run the ``alkstore`` command with *argv* (default: ``sys.argv[1:]``);
    return the exit status."""
    parser = _build_parser()
    try:
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:  # --help, --version
            return exc.code if isinstance(exc.code, int) else EXIT_OK
        status: int = args.func(args)
        return status
    except UsageError as exc:
        _error(exc)
        return EXIT_USAGE
    except InvalidArgument as exc:
        _error(exc)
        return EXIT_USAGE
    except AlkstoreError as exc:
        _error(exc)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # `alkstore jobs q | head`: the reader left; not an error worth a line.
        _quiet_stdout()
        return EXIT_FAILURE
    except OSError as exc:
        _error(f"{type(exc).__name__}: {exc}")
        return EXIT_FAILURE


def _error(message: object) -> None:
    print(f"alkstore: error: {_one_line(message)}", file=sys.stderr)


def _quiet_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # pragma: no cover - stdout is not a real file
        pass
