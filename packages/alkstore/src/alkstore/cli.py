"""The ``alkstore`` command (SPEC §13); also ``python -m alkstore``.

The store URL comes from ``--url``, else ``$ALKSTORE_URL``, else the embedded
SQLite default ``sqlite:///alkstore.db``. Listings print a table, or JSON with
``--json`` (datetimes in ISO 8601). Mistakes print one line on stderr and
exit 2 (usage, bad arguments); other failures exit 1; no tracebacks, but for
the handler module's own when it fails to import (E-6). A queue is spelled
``--queue`` in every subcommand; the older word form still parses.

``redrive`` and ``purge`` act on dead letters (Q-21, Q-22); ``--all`` asks
first on a terminal and needs ``--yes`` anywhere else. ``jobs`` and ``job``
show a pending job whose ``run_at`` is still ahead as ``scheduled``.

Only ``migrate`` and ``demo`` create a store: every other command, given
one that does not exist, is a one-line error, exit 1, and creates nothing
(E-6, checked once in :func:`main`). The read-only commands (``queues``,
``jobs``, ``job``, ``schedules``, ``workers``) open the store with ``migrate=False``: an
outdated one is a one-line error too. Passwords in URLs are shown as
``***`` in every message and log line (E-4).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import logging
import os
import re
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from datetime import datetime, timezone
from enum import Enum
from importlib.metadata import PackageNotFoundError, entry_points, version
from typing import Any, NoReturn, TypeVar

from . import _open
from ._open import DEFAULT_URL, ENGINE_GROUP, redact_url
from .errors import AlkstoreError, InvalidArgument, SchemaVersionError
from .names import OUTBOX_PREFIX
from .protocols import Job, Queue, RateLimit, Store
from .specs import parse_duration
from .types import EnqueueOpts, JobInfo, JobState, QueueOpts, check_duration

__all__ = ["main"]

T = TypeVar("T")

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


def _whole_number(text: str, least: int) -> int:
    try:
        value = int(text)
    except ValueError:
        value = least - 1
    if value < least:
        raise argparse.ArgumentTypeError(f"expected a whole number >= {least}, got {text!r}")
    return value


def _count(text: str) -> int:
    """An argparse type: a whole number >= 1."""
    return _whole_number(text, 1)


def _offset(text: str) -> int:
    """An argparse type: a whole number >= 0."""
    return _whole_number(text, 0)


class _Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line, raised to :func:`main`."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see '{self.prog} --help')")


#: Where a subcommand keeps the queue given the older way, as a word.
_QUEUE_WORD = "queue_word"


class _CommandParser(_Parser):
    """A subcommand's parser: options and words in any order, its own errors
    (an unknown option points at ``alkstore COMMAND --help``, not at the
    top-level help), and ``--queue`` settled (see :func:`_queue_option`)."""

    #: ``None``: the command takes no queue word; else whether it needs a queue.
    queue_needed: bool | None = None
    #: The word after the queue's place, which a word in that place becomes
    #: when ``--queue`` names the queue (``schedule NAME SPEC --queue Q JSON``).
    queue_shift: str | None = None
    _inside = False

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        if self._inside:  # parse_known_intermixed_args calls back here
            return super().parse_known_args(args, namespace)
        self._inside = True
        try:
            parsed, extras = self.parse_known_intermixed_args(args, namespace)
        finally:
            self._inside = False
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        self._settle_queue(parsed)
        return parsed, []

    def _settle_queue(self, args: argparse.Namespace) -> None:
        if self.queue_needed is None:
            return
        word: str | None = vars(args).pop(_QUEUE_WORD, None)
        if word is not None:
            if args.queue is None:
                args.queue = word  # the older spelling: QUEUE as a word
            elif self.queue_shift is not None and getattr(args, self.queue_shift) is None:
                setattr(args, self.queue_shift, word)
            else:
                self.error(f"the queue is given twice: --queue {args.queue} and {word!r}")
        if args.queue is None and self.queue_needed:
            self.error("the following arguments are required: --queue")


def _queue_option(
    p: _CommandParser, *, needed: bool = True, word: bool = True, shift: str | None = None
) -> None:
    """``--queue QUEUE``, the one spelling of a queue in every subcommand.

    With *word*, the older spelling (the queue as a word, where the command
    took it before ``--queue``) still works but is not shown in the help;
    call this where that word stood among the positional arguments.
    """
    p.add_argument(
        "--queue",
        metavar="QUEUE",
        default=None,
        help="the queue" + (" (needed)" if needed else ""),
    )
    if word:
        p.add_argument(_QUEUE_WORD, nargs="?", default=None, help=argparse.SUPPRESS)
        p.queue_needed = needed
        p.queue_shift = shift


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


#: The state ``jobs`` and ``job`` show for a pending job whose ``run_at`` is
#: still ahead (``queues`` counts them apart too).
SCHEDULED = "scheduled"


def _is_scheduled(info: JobInfo, now: datetime) -> bool:
    return info.state is JobState.PENDING and info.run_at > now


def _shown_state(info: JobInfo, now: datetime) -> str:
    return SCHEDULED if _is_scheduled(info, now) else info.state.value


def _shown(info: JobInfo, now: datetime) -> dict[str, Any]:
    """*info* as JSON, its state as the listing shows it."""
    data: dict[str, Any] = _jsonable(info)
    data["state"] = _shown_state(info, now)
    return data


def _print_listing(
    args: argparse.Namespace,
    items: Sequence[T],
    none: str,
    headers: Sequence[str],
    row: Callable[[T], Sequence[object]],
) -> None:
    """*items* as JSON with ``--json``; else one table row per item (*row*
    makes it), or the line *none* when there are no items."""
    if args.json:
        _print_json(items)
    elif not items:
        print(none)
    else:
        _print_table(headers, [row(item) for item in items])


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


class _SchemaMismatch(AlkstoreError):
    """An existing store whose schema is older or newer than the engine's."""


# What an engine's "no schema here" reason says after its first statement,
# which the CLI's own line replaces: the version it needs and how to open.
_NEEDS = re.compile(r"(?:; this engine needs .*)?(?:\s*\([^()]*migrate=False[^()]*\))?$")


def _no_store(shown: str, exc: SchemaVersionError) -> AlkstoreError:
    """E-6: the one line for a store that does not exist (no file, no schema)."""
    what = _NEEDS.sub("", exc.reason, count=1).strip() or "no alkstore schema"
    return AlkstoreError(
        f"no store at {shown} ({what}); `alkstore migrate` creates one (nothing was created)"
    )


def _open_store(url: str, *, migrate: bool) -> Store:
    """Open *url*; failures become one readable line, without the password.

    ``migrate=False`` (the read-only commands): the engine opens only an
    existing, up-to-date store and writes nothing; a store that does not
    exist at all is the E-6 line.
    """
    shown = redact_url(url)
    try:
        if migrate:
            return _open.open(url)
        return _open.open(_open.without_url_option(url, "migrate"), migrate=False)
    except InvalidArgument:
        raise
    except SchemaVersionError as exc:
        if migrate:
            raise _SchemaMismatch(f"cannot open {shown}: {exc}") from exc
        if exc.found == 0:
            raise _no_store(shown, exc) from exc
        raise _SchemaMismatch(f"cannot read {shown}: {exc}") from exc
    except AlkstoreError as exc:
        raise AlkstoreError(f"cannot open {shown}: {exc}") from exc
    except Exception as exc:  # a broken or half-installed engine package
        raise AlkstoreError(
            f"cannot load the engine for {_open.url_scheme(url)!r} URLs: "
            f"{type(exc).__name__}: {exc}"
        ) from exc


def _require_store(url: str) -> None:
    """E-6, for every command but ``migrate`` and ``demo``: a store that does
    not exist (a SQLite file not there, a database or schema without the
    alkstore tables) is one line and exit 1, and nothing is created. The
    check opens the store without migrating; a store of another version is
    left to the command (a read refuses it, a write upgrades it)."""
    with suppress(_SchemaMismatch):
        _open_store(url, migrate=False).close()


@contextmanager
def _store(args: argparse.Namespace, *, read_only: bool = False) -> Iterator[Store]:
    store = _open_store(_resolve_url(args), migrate=not read_only)
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


class _RedactingFormatter(logging.Formatter):
    """Log lines with every URL password shown as ``***`` (E-4)."""

    def format(self, record: logging.LogRecord) -> str:
        return redact_url(super().format(record))


def _configure_logging(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_RedactingFormatter(_LOG_FORMAT))
    logging.basicConfig(level=level.upper(), handlers=[handler])


def _versions() -> str:
    """``--version``: the contract package and every installed engine and
    suite distribution, with the URL schemes each engine serves."""
    lines = [f"alkstore {version('alkstore')}"]
    schemes: dict[tuple[str, str], list[str]] = {}
    for ep in entry_points(group=ENGINE_GROUP):
        dist = ep.dist
        key = (dist.name, dist.version) if dist is not None else ("(unknown)", "?")
        schemes.setdefault(key, []).append(ep.name)
    for (name, ver), names in sorted(schemes.items()):
        lines.append(f"{name} {ver} (engine for {', '.join(sorted(names))} URLs)")
    with suppress(PackageNotFoundError):
        lines.append(f"alkstore-conformance {version('alkstore-conformance')}")
    if not schemes:
        lines.append('no engine installed: pip install "alkstore[sqlite]" or "alkstore[postgres]"')
    return "\n".join(lines)


class _VersionAction(argparse.Action):
    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> None:
        print(_versions())
        parser.exit()


# ------------------------------------------------------------------- commands


def _schema_change(store: Store) -> tuple[int, int] | None:
    """The schema version the open found (0: none) and the one the store
    holds now, from an engine that records them (both built-in engines do)."""
    change = getattr(getattr(store, "executor", None), "schema_migration", None)
    if (
        isinstance(change, tuple)
        and len(change) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) for v in change)
    ):
        return change[0], change[1]
    return None


def _migration_report(change: tuple[int, int] | None) -> tuple[str, str]:
    """What ``migrate`` did: a word for ``--json`` and a phrase for people."""
    if change is None:
        return "ready", "the schema is ready (this engine does not say what it did)"
    found, now = change
    if found == 0:
        return "created", f"created the schema (version {now})"
    if found < now:
        return "upgraded", f"upgraded the schema from version {found} to {now}"
    return "up-to-date", f"the schema is up to date (version {now})"


def cmd_migrate(args: argparse.Namespace) -> int:
    with _store(args) as store:
        engine = type(store).__module__.partition(".")[0]
        caps = sorted(str(c) for c in store.capabilities)
        change = _schema_change(store)
        did, said = _migration_report(change)
        if args.json:
            _print_json(
                {
                    "url": redact_url(store.url),
                    "engine": engine,
                    "capabilities": caps,
                    "migration": did,
                    "from_version": None if change is None else change[0],
                    "version": None if change is None else change[1],
                }
            )
        else:
            print(f"{said}: {redact_url(store.url)} (engine {engine})")
            print(f"capabilities: {', '.join(caps)}")
    return EXIT_OK


def _listing_command(
    args: argparse.Namespace,
    read: Callable[[Store], Sequence[T]],
    none: str,
    headers: Sequence[str],
    row: Callable[[T], Sequence[object]],
) -> int:
    """A read-only listing: what *read* returns from the store, printed by
    :func:`_print_listing`."""
    with _store(args, read_only=True) as store:
        items = read(store)
    _print_listing(args, items, none, headers, row)
    return EXIT_OK


def cmd_queues(args: argparse.Namespace) -> int:
    return _listing_command(
        args,
        lambda store: store.queue_stats(),
        "(no queues)",
        ["QUEUE", "PENDING", "SCHEDULED", "PROCESSING", "DEAD", "PAUSED"],
        lambda s: [s.queue, s.pending, s.scheduled, s.processing, s.dead, _yes(s.paused)],
    )


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def _job_row(info: JobInfo, now: datetime) -> list[object]:
    if info.state is JobState.DEAD:
        when, note = _when(info.died_at), _short(info.last_error or "", _ERROR_WIDTH)
    elif info.state is JobState.DONE:  # RS-1: a kept result
        when, note = _when(info.finished_at), _payload_text(info.result)
    elif info.state is JobState.PROCESSING:
        when, note = _when(info.deadline), info.worker_id or ""
    elif info.state is JobState.WAITING:  # WF-1: the parents still unfinished
        when, note = _when(info.created_at), _ids_text(info.waiting_on)
    else:
        when, note = _when(info.run_at), ""
    return [
        info.id,
        _shown_state(info, now),
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
    JobState.DONE: "FINISHED_AT",
    JobState.WAITING: "CREATED_AT",
}
_NOTE_HEADER = {
    JobState.PENDING: "",
    JobState.PROCESSING: "WORKER",
    JobState.DEAD: "LAST_ERROR",
    JobState.DONE: "RESULT",
    JobState.WAITING: "WAITING_ON",
}


def _ids_text(ids: Sequence[int]) -> str:
    """Job ids as a short list: ``3, 4, 5`` (WF-1's ``waiting_on``)."""
    return _short(", ".join(str(i) for i in ids), _ERROR_WIDTH)


def _scheduled_jobs(queue: Queue, limit: int, after: int, now: datetime) -> list[JobInfo]:
    """Pending jobs whose ``run_at`` is ahead of *now*, by id, at most *limit*:
    pages of pending jobs, filtered."""
    found: list[JobInfo] = []
    while len(found) < limit:
        page = queue.list_jobs(JobState.PENDING, limit=1000, after_id=after)
        found.extend(j for j in page if _is_scheduled(j, now))
        if len(page) < 1000:
            break
        after = page[-1].id
    return found[:limit]


def cmd_jobs(args: argparse.Namespace) -> int:
    scheduled = args.state == SCHEDULED
    state = JobState.PENDING if scheduled else JobState(args.state)
    now = datetime.now(timezone.utc)
    with _store(args, read_only=True) as store:
        queue = _queue(store, args.queue)
        if scheduled:
            jobs = _scheduled_jobs(queue, args.limit, args.after, now)
        else:
            jobs = queue.list_jobs(state, limit=args.limit, after_id=args.after)
    if args.json:
        _print_json([_shown(j, now) for j in jobs])
        return EXIT_OK
    if not jobs:
        print(f"(no {args.state} jobs in {args.queue})")
        return EXIT_OK
    headers = ["ID", "STATE", "ATTEMPTS", "PRIORITY", _WHEN_HEADER[state], "PAYLOAD"]
    if _NOTE_HEADER[state]:
        headers.append(_NOTE_HEADER[state])
    _print_table(headers, [_job_row(j, now)[: len(headers)] for j in jobs])
    if len(jobs) == args.limit:
        print(f"(more may follow: --after {jobs[-1].id})")
    return EXIT_OK


def cmd_job(args: argparse.Namespace) -> int:
    with _store(args, read_only=True) as store:
        info = _queue(store, args.queue).get_job(args.id)
    if info is None:
        # RS-1: an acked job is gone unless it keeps its result; say so, or
        # a job that ran fine reads like one that never existed.
        raise AlkstoreError(
            f"no job {args.id} in queue {args.queue!r} (an acked job is kept only when "
            "stamped with result_ttl_s, and only until that time is up)"
        )
    fields = _shown(info, datetime.now(timezone.utc))
    if args.json:
        _print_json(fields)
        return EXIT_OK
    if info.state is not JobState.DONE:  # the result fields belong to done jobs
        fields = {k: v for k, v in fields.items() if k not in ("result", "finished_at")}
    if info.state is not JobState.WAITING:  # WF-1: only a waiting job has parents to show
        fields.pop("waiting_on", None)
    width = max(len(k) for k in fields)
    for key, value in fields.items():
        json_field = key in ("payload", "result")
        if key == "progress":  # a checkpoint as JSON; none as "-"
            json_field = value is not None
        text = json.dumps(value, ensure_ascii=False) if json_field else value
        if key == "waiting_on":
            text = ", ".join(str(i) for i in value)
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


def _pause_command(args: argparse.Namespace, pause: bool) -> int:
    """Q-27: ``pause`` and ``resume``; doing it twice is no error."""
    with _store(args) as store:
        queue = _queue(store, args.queue)
        changed = queue.pause() if pause else queue.resume()
    if args.json:
        _print_json({"queue": args.queue, "paused": pause, "changed": changed})
    elif changed:
        print(f"{'paused' if pause else 'resumed'} queue {args.queue}")
    else:
        print(f"queue {args.queue} was {'already paused' if pause else 'not paused'}")
    return EXIT_OK


def cmd_pause(args: argparse.Namespace) -> int:
    return _pause_command(args, True)


def cmd_resume(args: argparse.Namespace) -> int:
    return _pause_command(args, False)


def cmd_run_now(args: argparse.Namespace) -> int:
    """Q-27: a pending job, scheduled for later, is ready now. False (exit 1)
    for a job that is not pending: processing, waiting, dead or unknown."""
    with _store(args) as store:
        moved = _queue(store, args.queue).run_now(args.id)
    if args.json:
        _print_json({"queue": args.queue, "id": args.id, "ready": moved})
    elif moved:
        print(f"job {args.id} of queue {args.queue} is ready now")
    else:
        print(
            f"alkstore: job {args.id} of queue {args.queue!r} is not pending; nothing changed",
            file=sys.stderr,
        )
    return EXIT_OK if moved else EXIT_FAILURE


def cmd_sweep(args: argparse.Namespace) -> int:
    if args.all == (args.queue is not None):
        raise UsageError("sweep needs --queue QUEUE or --all, not both")
    results: list[dict[str, Any]] = []
    with _store(args) as store:
        names = [s.queue for s in store.queue_stats()] if args.all else [args.queue]
        for name in names:
            res = _queue(store, name).sweep_expired()
            results.append({"queue": name, **_jsonable(res)})
    _print_listing(
        args,
        results,
        "(no queues)",
        ["QUEUE", "EXPIRED", "EXHAUSTED", "PURGED"],
        lambda r: [r["queue"], r["expired"], r["exhausted"], r["purged"]],
    )
    return EXIT_OK


def cmd_schedules(args: argparse.Namespace) -> int:
    return _listing_command(
        args,
        lambda store: store.schedules(),
        "(no schedules)",
        ["NAME", "SPEC", "TZ", "QUEUE", "NEXT_FIRE", "LAST_FIRE", "PAYLOAD"],
        lambda s: [
            s.name,
            s.spec,
            s.tz,
            s.queue,
            _when(s.next_fire_at),
            _when(s.last_fire_at),
            _payload_text(s.payload, 40),
        ],
    )


def cmd_workers(args: argparse.Namespace) -> int:
    """O-5: the registered workers, with when each was last seen."""
    return _listing_command(
        args,
        lambda store: store.workers(),
        "(no workers)",
        ["ID", "HOST", "PID", "QUEUES", "CONCURRENCY", "STARTED", "LAST_SEEN"],
        lambda w: [
            w.id,
            w.host,
            w.pid,
            ",".join(w.queues),
            w.concurrency,
            _when(w.started_at),
            _when(w.last_seen),
        ],
    )


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


def _dead_letter_target(store: Store, args: argparse.Namespace) -> tuple[str, Queue, list[int]]:
    """``--queue QUEUE ID...`` (or the older ``QUEUE ID...``) or ``--outbox
    NAME ID...``: the queue's name as shown, its handle, and the ids (C-2
    refuses only names a consumer spells: an outbox's backing queue is
    reached through the outbox)."""
    words: list[str] = list(args.target)
    if args.outbox is not None:
        if args.queue is not None:
            raise UsageError(f"{args.command} takes --queue or --outbox, not both")
        name, queue = f"outbox {args.outbox}", store.outbox(args.outbox).queue
    elif args.queue is not None:
        name = args.queue
        queue = _queue(store, name)
    elif not words:
        raise UsageError(f"{args.command} needs --queue QUEUE (or --outbox NAME)")
    else:
        name = words.pop(0)  # the older spelling: the queue as the first word
        queue = _queue(store, name)
    ids: list[int] = []
    for word in words:
        try:
            ids.append(int(word))
        except ValueError:
            raise UsageError(f"job ids are whole numbers, got {word!r}") from None
    return name, queue, ids


def _confirm(question: str, args: argparse.Namespace) -> bool:
    """``--all`` asks first: ``--yes`` answers for the caller; on a terminal
    the caller answers; anywhere else (a script, a pipe) it is a usage
    mistake, never a silent yes."""
    if args.yes:
        return True
    if not sys.stdin.isatty():
        raise UsageError(
            f"{args.command} --all asks for confirmation: add --yes to run it unattended"
        )
    try:
        answer = input(f"{question} [y/N] ")
    except EOFError:
        answer = ""
    return answer.strip().lower() in ("y", "yes")


def _dead_count(queue: Queue) -> int:
    return queue.stats().dead


def cmd_redrive(args: argparse.Namespace) -> int:
    with _store(args) as store:
        name, queue, ids = _dead_letter_target(store, args)
        if args.all == bool(ids):
            raise UsageError("redrive needs job IDs or --all, not both")
        if args.all and not _confirm(
            f"Redrive every dead job of {name} ({_dead_count(queue)} now)?", args
        ):
            print("nothing redriven", file=sys.stderr)
            return EXIT_FAILURE
        moved = queue.redrive(None if args.all else ids)
    if args.json:
        _print_json({"queue": queue.name, "redriven": moved})
    else:
        print(f"redrove {moved} dead job{'s' if moved != 1 else ''} of {name}")
    return EXIT_OK


def cmd_purge(args: argparse.Namespace) -> int:
    older = None if args.older_than is None else parse_duration(args.older_than)
    with _store(args) as store:
        name, queue, ids = _dead_letter_target(store, args)
        if args.all and (ids or older is not None):
            raise UsageError("purge --all takes no job IDs and no --older-than")
        if not (args.all or ids or older is not None):
            raise UsageError("purge needs job IDs, --all or --older-than DURATION")
        if args.all and not _confirm(
            f"Delete every dead job of {name} ({_dead_count(queue)} now)?", args
        ):
            print("nothing purged", file=sys.stderr)
            return EXIT_FAILURE
        purged = queue.purge_dead(ids or None, older_than_s=older)
    if args.json:
        _print_json({"queue": queue.name, "purged": purged})
    else:
        print(f"purged {purged} dead job{'s' if purged != 1 else ''} of {name}")
    return EXIT_OK


def _rate(text: str) -> tuple[float, float]:
    """``--rate RATE/PERIOD``: ``100/1s``, ``5/1m``, ``1000/1h``; a PERIOD
    without a unit is seconds."""
    rate_text, sep, period_text = text.partition("/")
    try:
        rate = float(rate_text)
    except ValueError:
        rate = -1.0
    if not sep or rate <= 0 or rate != rate:
        raise UsageError(f"--rate takes RATE/PERIOD, like 100/1s or 5/1m, got {text!r}")
    try:
        period = float(period_text)
    except ValueError:
        period = parse_duration(period_text)
    return rate, period


#: Frames of a handler module's failed import shown below the error line;
#: ``--log-level debug`` shows them all.
IMPORT_FRAMES = 5


#: Files whose frames a failed import's traceback leaves out: this module
#: and importlib's (its ``<frozen ...>`` frames too).
_MACHINERY = frozenset({__file__, importlib.__file__})


class HandlerImportError(AlkstoreError):
    """The handler's module raised while it was imported (E-6): the error
    line, then the traceback of the module's own code (importlib's frames
    left out), so the file and line that failed are shown."""

    def __init__(self, module_name: str, exc: BaseException) -> None:
        super().__init__(f"importing {module_name!r} failed: {type(exc).__name__}: {exc}")
        self.cause = exc

    def traceback_lines(self, limit: int | None = IMPORT_FRAMES) -> list[str]:
        """The traceback below the error line: the last *limit* frames of the
        module's code (all with ``None``), and for a syntax error the line
        that does not parse."""
        exc = self.cause
        frames = [
            f
            for f in traceback.extract_tb(exc.__traceback__)
            if not (f.filename.startswith("<frozen ") or f.filename in _MACHINERY)
        ]
        shown = frames if limit is None else frames[-limit:]
        lines: list[str] = []
        if shown:
            skipped = len(frames) - len(shown)
            more = f", {skipped} earlier frame(s) not shown" if skipped else ""
            lines.append(f"Traceback (most recent call last{more}):")
            lines.extend("".join(traceback.format_list(shown)).splitlines())
        if isinstance(exc, SyntaxError):
            lines.extend(traceback.format_exception_only(type(exc), exc)[:-1])
        return [line.rstrip("\n") for line in lines]


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
        raise HandlerImportError(module_name, exc) from exc
    except Exception as exc:
        raise HandlerImportError(module_name, exc) from exc
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

    rate = None if args.rate is None else _rate(args.rate)
    if rate is None and (args.burst is not None or args.rate_name is not None):
        raise UsageError("--burst and --rate-name go with --rate")
    handler = load_handler(args.handler)
    _configure_logging(args.log_level)
    names: list[str] = args.queue
    # SIGINT/SIGTERM stop the worker cleanly from the first moment: one that
    # arrives while the store opens or the metrics endpoint starts (before the
    # Worker installs its own handlers) ends the run at once, exit 0.
    stop = threading.Event()
    with (
        _stop_on_signals(stop),
        _store(args) as store,
        _worker_metrics(args.metrics_port),
    ):
        limiter: RateLimit | None = None
        if rate is not None:
            # One limiter per name in the database: every worker started with
            # the same --rate-name (by default, the first queue's) shares it.
            limiter = store.rate_limit(args.rate_name or names[0], *rate, burst=args.burst or 1)
        queues = [_queue(store, n) for n in names]
        worker = Worker(
            store,
            queues if len(queues) > 1 else queues[0],
            handler,
            concurrency=args.concurrency,
            worker_id=args.worker_id,
            grace_s=args.grace,
            timeout_s=args.timeout,
            rate_limit=limiter,
            register_every_s=None if args.no_register else args.register_every,
        )
        paced = "" if limiter is None else f", at most {args.rate} (limiter {limiter.name!r})"
        print(
            f"alkstore worker {worker.worker_id}: {args.handler} on "
            f"{'queues' if len(names) > 1 else 'queue'} {', '.join(names)} "
            f"({redact_url(store.url)}, {args.concurrency} threads{paced}); "
            "Ctrl-C or SIGTERM stops it",
            file=sys.stderr,
        )
        worker.run(stop)
    return EXIT_OK


@contextmanager
def _worker_metrics(bind: str | None) -> Iterator[None]:
    """``--metrics-port``: the worker's Prometheus endpoint while it runs (O-3)."""
    if bind is None:
        yield
        return
    from .observability._commands import start_worker_metrics

    server = start_worker_metrics(bind)
    try:
        yield
    finally:
        server.close()


def cmd_metrics(args: argparse.Namespace) -> int:
    from .observability._commands import run_metrics

    stop = threading.Event()
    with _stop_on_signals(stop):
        return run_metrics(_resolve_url(args), args.serve, stop)


def cmd_dashboard(args: argparse.Namespace) -> int:
    from .observability._commands import run_dashboard

    _configure_logging(args.log_level)
    stop = threading.Event()
    with _stop_on_signals(stop):
        return run_dashboard(
            _resolve_url(args),
            args.bind,
            stop,
            read_only=args.read_only,
            allowed_hosts=args.allow_host,
            sample_every_s=args.sample_every,
            scrape=args.scrape,
        )


def cmd_scheduler(args: argparse.Namespace) -> int:
    check_duration("--lock-ttl", args.lock_ttl, allow_zero=False)
    _configure_logging(args.log_level)
    stop = threading.Event()
    with _stop_on_signals(stop), _store(args) as store:
        print(
            f"alkstore scheduler on {redact_url(store.url)}; Ctrl-C or SIGTERM stops it",
            file=sys.stderr,
        )
        store.run_schedules(stop=stop, owner=args.owner, lock_ttl_s=args.lock_ttl)
    return EXIT_OK


def cmd_demo(args: argparse.Namespace) -> int:
    from ._demo import run_demo

    # The demo never picks up $ALKSTORE_URL: it writes only where it is told.
    run_demo(args.url, lambda url: _open_store(url, migrate=True))
    return EXIT_OK


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
    parser.add_argument(
        "--version",
        action=_VersionAction,
        help="print the versions of alkstore and of the installed engines, and exit",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_CommandParser)
    sub.required = True

    def add(
        name: str,
        func: Callable[[argparse.Namespace], int],
        help_text: str,
        parents: Any,
        *,
        creates: bool = False,
    ) -> _CommandParser:
        """A subcommand. Unless it *creates* a store, it needs one that
        exists (E-6): :func:`main` checks before it runs."""
        p: _CommandParser = sub.add_parser(
            name, help=help_text, description=help_text, parents=parents
        )
        p.set_defaults(func=func, creates_store=creates)
        return p

    add(
        "demo",
        cmd_demo,
        "a tour of alkstore on a temporary SQLite file, or on --url (removing what it made)",
        [url_opt],
        creates=True,
    )
    add("migrate", cmd_migrate, "create or upgrade the schema of the store", both, creates=True)
    add("queues", cmd_queues, "counts by state for every queue", both)

    p = add("jobs", cmd_jobs, "list the jobs of a queue in one state", both)
    _queue_option(p)
    p.add_argument(
        "--state",
        choices=[s.value for s in JobState] + [SCHEDULED],
        default="pending",
        help="default: pending (scheduled: pending jobs whose run_at is still ahead)",
    )
    p.add_argument("--limit", type=_count, default=100, help="at most this many (default: 100)")
    p.add_argument(
        "--after", type=_offset, default=0, metavar="ID", help="only ids above ID (paging)"
    )

    p = add("job", cmd_job, "show one job, in any state", both)
    _queue_option(p)
    p.add_argument("id", metavar="ID", type=int)

    p = add("enqueue", cmd_enqueue, "enqueue one job with a JSON payload; prints its id", both)
    _queue_option(p)
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
    _queue_option(p)
    p.add_argument("id", metavar="ID", type=int)

    # Q-27: --queue as everywhere (the queue as a word works too, as in cancel).
    p = add("pause", cmd_pause, "pause a queue: no claim takes its jobs until resume", both)
    _queue_option(p)
    p = add("resume", cmd_resume, "resume a paused queue, waking its waiting workers", both)
    _queue_option(p)

    p = add("run-now", cmd_run_now, "make a pending job ready now, whatever its run_at", both)
    _queue_option(p)
    p.add_argument("id", metavar="ID", type=int)

    p = add("sweep", cmd_sweep, "dead-letter expired jobs and purge old dead letters", both)
    _queue_option(p, needed=False)
    p.add_argument("--all", action="store_true", help="every queue (no --queue then)")

    # redrive and purge: the dead letters of a queue (or an outbox), by id or all.
    dead_opts = _CommandParser(add_help=False)
    _queue_option(dead_opts, word=False)
    dead_opts.add_argument(
        "--outbox", metavar="NAME", help="the dead letters of outbox NAME (no --queue then)"
    )
    dead_opts.add_argument("target", nargs="*", metavar="ID", help="job ids")
    dead_opts.add_argument(
        "--all", action="store_true", help="every dead job of the queue (asks first)"
    )
    dead_opts.add_argument("--yes", action="store_true", help="do not ask before --all")

    add(
        "redrive",
        cmd_redrive,
        "move dead jobs back to pending, same ids, fresh attempts: --queue QUEUE (ID... | --all)",
        [*both, dead_opts],
    )
    p = add(
        "purge",
        cmd_purge,
        "delete dead jobs: --queue QUEUE (ID... | --all | --older-than 7d)",
        [*both, dead_opts],
    )
    p.add_argument(
        "--older-than",
        metavar="DURATION",
        help="only jobs dead at least this long: 30s, 1h30m, 7d (units d h m s, as in @every)",
    )

    p = add(
        "worker",
        cmd_worker,
        "run MODULE:FUNC over a queue until SIGINT/SIGTERM",
        [url_opt, log_opt],
    )
    p.add_argument("handler", metavar="MODULE:FUNC")
    p.add_argument(
        "--queue",
        required=True,
        action="append",
        metavar="QUEUE",
        help="the queue to serve (needed); repeat it to serve several, earlier ones first",
    )
    p.add_argument("--concurrency", type=int, default=4, metavar="N", help="threads (default: 4)")
    p.add_argument("--worker-id", metavar="ID", help="default: host:pid:random")
    p.add_argument(
        "--grace",
        type=float,
        default=30.0,
        metavar="S",
        help="on stop, wait this long for running handlers (default: 30)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        metavar="S",
        help="retry a job whose handler runs longer than S seconds (default: no limit)",
    )
    p.add_argument(
        "--rate",
        metavar="RATE/PERIOD",
        help="claim at most RATE jobs per PERIOD, like 100/1s or 5/1m, shared by every worker "
        "using the same limiter",
    )
    p.add_argument("--burst", type=_count, metavar="N", help="with --rate: N at once (default: 1)")
    p.add_argument(
        "--rate-name", metavar="NAME", help="with --rate: the limiter's name (default: the queue)"
    )
    p.add_argument(
        "--metrics-port",
        metavar="[HOST:]PORT",
        help="serve the worker's Prometheus metrics at /metrics (HOST: 127.0.0.1)",
    )
    p.add_argument(
        "--register-every",
        type=float,
        default=10.0,
        metavar="S",
        help="refresh the worker's row in the workers' registry every S seconds (default: 10)",
    )
    p.add_argument(
        "--no-register",
        action="store_true",
        help="keep the worker out of the registry (alkstore workers, the dashboard)",
    )

    p = add(
        "metrics",
        cmd_metrics,
        "queue depths in the Prometheus text format, once or served (read-only)",
        [url_opt],
    )
    p.add_argument(
        "--serve",
        metavar="[HOST:]PORT",
        help="serve /metrics until SIGINT/SIGTERM (HOST: 127.0.0.1)",
    )

    p = add(
        "dashboard",
        cmd_dashboard,
        "the web dashboard: queues, live jobs by state, dead letters, schedules, streams, locks",
        [url_opt, log_opt],
    )
    p.add_argument(
        "--bind", default="127.0.0.1:8765", metavar="HOST:PORT", help="default: 127.0.0.1:8765"
    )
    p.add_argument("--read-only", action="store_true", help="show only; refuse every change")
    p.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="accept this Host header too (a name the dashboard is reached by)",
    )
    p.add_argument(
        "--sample-every",
        type=float,
        default=2.0,
        metavar="S",
        help="seconds between the charts' samples (default: 2)",
    )
    p.add_argument(
        "--scrape",
        action="append",
        default=[],
        metavar="URL",
        help="a worker's metrics endpoint to chart finished jobs from (repeatable)",
    )

    add("schedules", cmd_schedules, "list the schedules", both)
    add("workers", cmd_workers, "list the running workers and when each was last seen", both)

    p = add("schedule", cmd_schedule, "create or update a schedule", both)
    p.add_argument("name", metavar="NAME")
    p.add_argument("spec", metavar="SPEC", help="cron (5 or 6 fields), @daily, @every 1h30m, ...")
    _queue_option(p, shift="payload")
    p.add_argument("payload", metavar="JSON", nargs="?", help="the jobs' payload (default: null)")
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
    args: argparse.Namespace | None = None
    try:
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:  # --help, --version
            return exc.code if isinstance(exc.code, int) else EXIT_OK
        if not args.creates_store:
            _require_store(_resolve_url(args))
        status: int = args.func(args)
        return status
    except UsageError as exc:
        _error(exc)
        return EXIT_USAGE
    except InvalidArgument as exc:
        _error(exc)
        return EXIT_USAGE
    except HandlerImportError as exc:
        _error(exc)
        debug = getattr(args, "log_level", None) == "debug"
        for line in exc.traceback_lines(None if debug else IMPORT_FRAMES):
            print(redact_url(line), file=sys.stderr)
        return EXIT_FAILURE
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
    print(f"alkstore: error: {redact_url(_one_line(message))}", file=sys.stderr)


def _quiet_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # pragma: no cover - stdout is not a real file
        pass
