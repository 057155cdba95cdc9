"""The base every ``<Area>Contract`` mixin builds on: fixtures and helpers."""

from __future__ import annotations

import dataclasses
import multiprocessing
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from multiprocessing.context import SpawnProcess
from types import TracebackType
from typing import Any, ClassVar, TypeVar

import pytest

import alkstore
from alkstore import Capability, Store

from ._factory import FACES, Face, StoreFactory, bind_face, hooks_for

__all__ = [
    "JSON_PAYLOADS",
    "ContractBase",
    "StoppableCall",
    "eventually",
    "mark_each_test",
    "own_table",
    "race",
    "reap",
    "requires",
    "run_threads",
    "signals",
    "spawn",
    "start_together",
    "unique",
]

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

C = TypeVar("C", bound=type)

#: Upper bound for "eventually" checks. Generous: the suite must not flake on
#: a loaded machine, and a passing check returns as soon as it holds.
EVENTUALLY_S = 10.0

#: Payloads that must round-trip as JSON (C-3): edge numbers and strings,
#: nesting, a tuple (read back as a list) and an int key (read back as text).
JSON_PAYLOADS: tuple[Any, ...] = (
    None,
    True,
    0,
    -(2**63),
    2**70,
    1.5,
    "text",
    "",
    "ünïcødé ✓ 📬",
    'quote" backslash\\ nul\x00',
    'quote" backslash\\ nul\x00 newline\n',
    [],
    {},
    [1, [2, [3, {"k": None}]]],
    {"b": 1, "a": 2, "nested": {"list": [1.25, "x"]}},
    (1, 2),
    {1: "int key"},
)


def unique(prefix: str = "q") -> str:
    """A name no other test uses."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def eventually(
    probe: Callable[[], T], timeout_s: float = EVENTUALLY_S, interval_s: float = 0.01
) -> T:
    """Call *probe* until it returns something truthy and return that, or fail
    the test after *timeout_s*."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() >= deadline:
            pytest.fail(f"condition not met within {timeout_s} s (last value: {value!r})")
        time.sleep(interval_s)


def spawn(target: Callable[..., object], *args: Any) -> SpawnProcess:
    """Start *target(*args)* in a fresh interpreter (``spawn``: no inherited
    threads, locks or connections). *target* must be importable."""
    proc = multiprocessing.get_context("spawn").Process(target=target, args=args, daemon=True)
    proc.start()
    return proc


@contextmanager
def own_table(store: Store) -> Iterator[str]:
    """A table of the caller's own (``id``, ``note``), created and dropped
    through ``tx.execute``; the drop is skipped when the test closed *store*."""
    name = f"alkstore_conformance_{uuid.uuid4().hex[:12]}"
    with store.transaction() as tx:
        tx.execute(f"CREATE TABLE {name} (id INTEGER PRIMARY KEY, note TEXT)")
    yield name
    if not store.closed:
        with store.transaction() as tx:
            tx.execute(f"DROP TABLE {name}")


def signals() -> tuple[Any, Any]:
    """An event and a queue that spawned children can share: the start signal
    (or a child's "ready") and the channel children report on."""
    ctx = multiprocessing.get_context("spawn")
    return ctx.Event(), ctx.Queue()


def start_together(
    procs: Sequence[SpawnProcess],
    go: Any,
    results: Any,
    timeout_s: float,
    before_go: Callable[[], object] | None = None,
) -> None:
    """Wait until every child of *procs* has reported ``("ready", ...)`` on
    *results*, call *before_go* if given, then set *go* so that they start at once."""
    ready = [results.get(timeout=timeout_s) for _ in procs]
    assert sorted(r[0] for r in ready) == ["ready"] * len(procs), ready
    if before_go is not None:
        before_go()
    go.set()


def race(
    procs: Sequence[SpawnProcess],
    go: Any,
    results: Any,
    ready_timeout_s: float = 120,
    before_go: Callable[[], object] | None = None,
) -> list[Any]:
    """Start *procs* together (:func:`start_together`), return the one outcome
    each reports on *results*, and reap them whatever happens."""
    try:
        start_together(procs, go, results, ready_timeout_s, before_go)
        return [results.get(timeout=120) for _ in procs]
    finally:
        reap(procs, go)


def kills_a_process(test: F) -> F:
    """Mark a crash test: it runs a child process and SIGKILLs it (POSIX only)."""
    marked: F = pytest.mark.cross_process(
        pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="POSIX signals")(test)
    )
    return marked


def kill_hard(proc: SpawnProcess) -> None:
    """SIGKILL *proc* (no cleanup, no ack, no retry) and wait until it ended."""
    proc.kill()
    proc.join(30)


@contextmanager
def killed_at_exit(proc: SpawnProcess) -> Iterator[SpawnProcess]:
    """*proc*, killed when the block ends if it still runs: a failing test
    leaves no child behind."""
    try:
        yield proc
    finally:
        if proc.is_alive():
            kill_hard(proc)


def reap(procs: Sequence[SpawnProcess], go: Any = None) -> None:
    """End a test's children: set *go* (so that a child still waiting for it
    finishes even when the test failed), join each and kill one that hangs."""
    if go is not None:
        go.set()
    for proc in procs:
        proc.join(30)
        if proc.is_alive():
            proc.kill()


#: The stop latency the suite promises callers of ``run_*`` loops; joins
#: wait longer than this so a slow machine reports a clear failure.
STOP_WITHIN_S = 2.0


def run_threads(targets: Sequence[Callable[[], None]], timeout_s: float = 120.0) -> None:
    """Run *targets* in threads started together; re-raise the first error."""
    errors: list[BaseException] = []
    start = threading.Barrier(len(targets))

    def wrap(target: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                start.wait(30)
                target()
            except BaseException as exc:
                errors.append(exc)

        return run

    threads = [threading.Thread(target=wrap(t), daemon=True) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout_s)
    assert not any(t.is_alive() for t in threads), "a thread did not finish"
    if errors:
        raise errors[0]


class StoppableCall:
    """Run ``target(stop)`` in a daemon thread and keep its exception.

    ``with StoppableCall(target) as bg:`` starts it; leaving the block stops and
    joins it. :meth:`halt` stops it and returns how long it took to return;
    :meth:`healthy` fails the test at once if the target raised.
    """

    def __init__(self, target: Callable[[threading.Event], object]) -> None:
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self._target = target
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            self._target(self.stop)
        except BaseException as exc:  # reported by healthy() / halt()
            self.error = exc

    def healthy(self) -> bool:
        if self.error is not None:
            raise AssertionError(f"the background call raised {self.error!r}") from self.error
        return True

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def halt(self) -> float:
        """Set ``stop``; wait for the call to return; return the seconds it took."""
        started = time.monotonic()
        self.stop.set()
        self._thread.join(STOP_WITHIN_S + 10)
        elapsed = time.monotonic() - started
        assert not self._thread.is_alive(), "the call did not return after stop was set"
        self.healthy()
        return elapsed

    def __enter__(self) -> StoppableCall:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is None:
            self.halt()
        else:  # do not hide the test's own failure
            self.stop.set()
            self._thread.join(STOP_WITHIN_S + 3)


def mark_each_test(*marks: pytest.MarkDecorator) -> Callable[[C], C]:
    """Class decorator: put *marks* on every test *defined in* the class.

    A class-level ``pytest.mark`` would not do: pytest gives a class's marks
    to every subclass, and ``StoreContract`` inherits every area, so one
    area's mark (a requirement, ``sync_only``) would reach the whole suite.
    """

    def decorate(cls: C) -> C:
        for name, member in list(vars(cls).items()):
            if name.startswith("test_") and callable(member):
                for mark in marks:
                    member = mark(member)
                setattr(cls, name, member)
        return cls

    return decorate


def requires(*capabilities: Capability) -> Callable[[C], C]:
    """Class decorator: mark every test *defined in* the class as needing
    *capabilities* (:func:`mark_each_test`)."""
    return mark_each_test(pytest.mark.requires(*capabilities))


_CAPABILITIES: dict[str, frozenset[Capability]] = {}


def _capabilities(factory: StoreFactory) -> frozenset[Capability]:
    """What the engine behind *factory* declares, looked up once per scheme."""
    found = _CAPABILITIES.get(factory.scheme)
    if found is None:
        store = alkstore.open(factory.url, **factory.opts)
        try:
            found = _CAPABILITIES[factory.scheme] = store.capabilities
        finally:
            store.close()
    return found


class ContractBase:
    """Fixtures shared by every contract mixin.

    An engine overrides :meth:`store_factory`; everything else follows.
    ``known_failures`` maps test names to reasons; each becomes a strict xfail.
    """

    known_failures: ClassVar[Mapping[str, str]] = {}

    @pytest.fixture
    def store_factory(self) -> StoreFactory:
        """Override: return a :class:`StoreFactory` on a fresh isolated database."""
        pytest.fail("the engine's contract class must override the store_factory fixture")

    @pytest.fixture(autouse=True, params=FACES)
    def face(self, request: pytest.FixtureRequest) -> Face:
        """Every test runs through the sync API and through the async API
        (A-1): under ``async`` the stores a test opens through its
        ``store_factory`` are the engine's async stores behind a sync
        facade. A test that only the sync face can express is marked
        ``sync_only(reason)``."""
        face: Face = request.param
        if face == "async":
            for mark in request.node.iter_markers("sync_only"):
                pytest.skip(f"sync face only: {mark.args[0] if mark.args else ''}")
        factory: StoreFactory = request.getfixturevalue("store_factory")
        if face == "async" and Capability.ASYNC not in _capabilities(factory):
            pytest.skip("engine does not declare async")
        bind_face(factory, face)
        return face

    @pytest.fixture
    def store(self, store_factory: StoreFactory, face: Face) -> Iterator[Store]:
        """A store on the test's database, closed afterwards."""
        opened = store_factory.open()
        try:
            yield opened
        finally:
            opened.close()

    @pytest.fixture
    def other_database(
        self, store_factory: StoreFactory, request: pytest.FixtureRequest
    ) -> Iterator[StoreFactory]:
        """A factory on a second, empty database (another file, another
        schema), from the engine's conformance hooks."""
        hooks = hooks_for(store_factory.scheme)
        key = f"other-{request.node.name}"
        with hooks.isolated(store_factory.url, store_factory.opts, key) as (url, opts):
            if url == store_factory.url and dict(opts) == dict(store_factory.opts):
                pytest.skip("the engine's conformance hooks cannot make a second database")
            yield dataclasses.replace(store_factory, url=url, opts=opts)

    @pytest.fixture(autouse=True)
    def _capability_gate(self, request: pytest.FixtureRequest) -> None:
        if request.node.get_closest_marker("fresh_database") is not None:
            factory: StoreFactory = request.getfixturevalue("store_factory")
            if factory.shared_database:
                pytest.skip(
                    f"{factory.skip_reason('isolated')}, so every test shares one "
                    "database, and this one reads database-wide state"
                )
        needed: list[Capability] = [
            Capability(c) for m in request.node.iter_markers("requires") for c in m.args
        ]
        if not needed:
            return
        store: Store = request.getfixturevalue("store")
        missing = [c for c in needed if c not in store.capabilities]
        if missing:
            pytest.skip("engine does not declare " + ", ".join(sorted(str(c) for c in missing)))

    @pytest.fixture
    def transient_failure(self, store_factory: StoreFactory) -> Iterator[Callable[[], object]]:
        """A call that the engine reports as ``TransientError`` (E-2), from the
        engine's conformance hooks; without that hook, the test is skipped."""
        cm: AbstractContextManager[Callable[[], object]] = hooks_for(
            store_factory.scheme
        ).transient_failure(store_factory.url, store_factory.opts)
        with cm as call:
            yield call
