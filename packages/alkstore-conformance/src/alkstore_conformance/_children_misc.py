"""Child-process entry points of the stream and notification tests.

They run under the ``spawn`` start method, so each is a module-level function
taking picklable arguments: a :class:`StoreFactory` and plain values. Every
child reports through a multiprocessing queue as tuples whose first item is
``"ready"``, ``"ok"``, ``"note"`` or ``"error"``; an ``"error"`` carries the
exception text so that the parent fails the test with it.

:func:`publish_mixed` is also called from threads by the stream tests, so the
threaded and the cross-process variants of S-2 run the same workload.
"""

from __future__ import annotations

import time
from multiprocessing.queues import Queue as MPQueue
from multiprocessing.synchronize import Event as MPEvent
from typing import Any

from alkstore import Store

from ._children import in_store, wait_for_go
from ._factory import StoreFactory

__all__ = [
    "listen_and_report",
    "publish_mixed",
    "publish_stream_events",
    "read_stream_events",
]

#: How long a publish inside a transaction keeps the transaction open before
#: it commits or rolls back: long enough for a concurrent plain publish to
#: commit meanwhile, which is what exposes an engine that hands out offsets
#: from a sequence (a later offset visible before an earlier one, S-2).
HOLD_OPEN_S = 0.004


class _Rollback(Exception):
    """Raised inside a transaction to roll it back."""


def publish_mixed(store: Store, stream: str, tag: str, n: int) -> list[tuple[int, Any]]:
    """Publish *n* events on *stream* in a fixed mix and return ``(offset,
    payload)`` of every committed one (S-2, S-4).

    Of every four: a plain publish, a publish in a transaction held open and
    rolled back (payload marked ``"ghost"``), a publish in a transaction held
    open and committed, and a plain publish with a key.
    """
    s = store.stream(stream)
    committed: list[tuple[int, Any]] = []
    for i in range(n):
        payload: dict[str, Any] = {"tag": tag, "i": i}
        mode = i % 4
        if mode == 0:
            committed.append((s.publish(payload), payload))
        elif mode == 1:
            try:
                with store.transaction() as tx:
                    s.publish({**payload, "ghost": True}, tx=tx)
                    time.sleep(HOLD_OPEN_S)
                    raise _Rollback
            except _Rollback:
                pass
        elif mode == 2:
            with store.transaction() as tx:
                offset = s.publish(payload, key=tag, tx=tx)
                time.sleep(HOLD_OPEN_S)
            committed.append((offset, payload))
        else:
            committed.append((s.publish(payload, key=tag), payload))
    return committed


def publish_stream_events(
    factory: StoreFactory,
    stream: str,
    tag: str,
    n: int,
    go: MPEvent,
    results: MPQueue[Any],
) -> None:
    """S-2 across processes: open a store, report ``("ready", tag)``, wait for
    *go*, run :func:`publish_mixed`, report ``("ok", tag, committed)``."""

    def body(store: Store) -> tuple[Any, ...]:
        results.put(("ready", tag))
        wait_for_go(go, 60)
        return ("ok", tag, publish_mixed(store, stream, tag, n))

    in_store(factory, results, body)


def read_stream_events(
    factory: StoreFactory,
    stream: str,
    n: int,
    ready: MPEvent,
    results: MPQueue[Any],
    timeout_s: float = 60.0,
) -> None:
    """S-2 across processes: follow *stream* from offset 0 with ``wait`` and
    ``read`` until *n* events arrived; report ``("ok", [(offset, key,
    payload), ...])`` in the order read, or ``("error", text)`` at the first
    gap or out-of-order offset."""

    def body(store: Store) -> tuple[Any, ...]:
        s = store.stream(stream)
        ready.set()
        after = 0
        seen: list[tuple[int, str | None, Any]] = []
        deadline = time.monotonic() + timeout_s
        while len(seen) < n and time.monotonic() < deadline:
            if not s.wait(after, 1.0):
                continue
            for event in s.read(after, limit=7):
                if event.offset != after + 1:
                    raise AssertionError(f"read offset {event.offset} right after {after}")
                after = event.offset
                seen.append((event.offset, event.key, event.payload))
        return ("ok", seen)

    in_store(factory, results, body)


def listen_and_report(
    factory: StoreFactory,
    channel: str,
    count: int,
    ready: MPEvent,
    results: MPQueue[Any],
    timeout_s: float = 30.0,
) -> None:
    """N-1 across processes: listen on *channel*, set *ready*, then report
    each of *count* notifications as ``("note", channel, payload)`` the moment
    it arrives (``("note", None, None)`` when none came within *timeout_s*)."""

    def body(store: Store) -> None:
        with store.listen(channel) as listener:
            ready.set()
            for _ in range(count):
                note = listener.get(timeout_s)
                if note is None:
                    results.put(("note", None, None))
                    break
                results.put(("note", note.channel, note.payload))

    in_store(factory, results, body)
