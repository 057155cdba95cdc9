"""What the engine's tests share: a server they need, the stores they open."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NamedTuple, TypeVar

import pytest

from alkstore import Queue
from alkstore.errors import TransientError
from alkstore_postgres import PostgresStore
from alkstore_postgres.testing import ServerSearch

Opener = Callable[..., PostgresStore]
T = TypeVar("T")


def found_url(found: ServerSearch, what: str) -> str:
    """The URL *found*; without one the test is skipped, or failed under CI
    (which must have *what*)."""
    if found.url is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI needs {what}: {found.reason}", pytrace=False)
        pytest.skip(found.reason)
    return found.url


@contextmanager
def opener(url: str, opts: dict[str, Any]) -> Iterator[Opener]:
    """Opens stores on *url* with *opts* (keywords may override them);
    closes them all on the way out."""
    opened: list[PostgresStore] = []

    def factory(**more: Any) -> PostgresStore:
        store = PostgresStore(url, **{**opts, **more})
        opened.append(store)
        return store

    try:
        yield factory
    finally:
        for store in opened:
            store.close()


def once_back(call: Callable[[], T], timeout_s: float) -> T:
    """*call*'s result once it stops failing with ``TransientError`` (a
    server coming back); the test fails after *timeout_s*."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return call()
        except TransientError:
            if time.monotonic() > deadline:
                pytest.fail(f"the store did not recover within {timeout_s} s")
            time.sleep(0.1)


class Woken(NamedTuple):
    """How a blocked claim came back: its result, and the seconds it took
    from before it began and from the moment *meanwhile* was called."""

    result: object
    from_start: float
    from_meanwhile: float


def blocked_claim(
    q: Queue, meanwhile: Callable[[], object], *, wait_s: float, pause_s: float
) -> Woken:
    """A claim on *q* blocked for up to *wait_s* in a thread while this one
    sleeps *pause_s* and then calls *meanwhile* (to enqueue, to break
    something)."""
    result: list[object] = []
    started = time.monotonic()
    claimer = threading.Thread(target=lambda: result.append(q.claim("w", wait_s=wait_s)))
    claimer.start()
    time.sleep(pause_s)
    called = time.monotonic()
    meanwhile()
    claimer.join(wait_s + 5)
    done = time.monotonic()
    assert result, "the claim did not return"
    return Woken(result[0], done - started, done - called)
