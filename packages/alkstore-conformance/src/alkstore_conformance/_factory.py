"""How the suite reaches an engine: store factories and engine hooks.

An engine needs nothing but its ``alkstore.engines`` entry point to run the
suite (P-4). The hooks are optional, each one on its own: a test that needs
a hook the engine does not register is skipped, and the skip says which hook
and where to register it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any, Literal, Protocol

import pytest

import alkstore
from alkstore import Store
from alkstore._open import redact_url

__all__ = [
    "FACES",
    "HOOKS_GROUP",
    "HOOK_NAMES",
    "EngineHooks",
    "Face",
    "StoreFactory",
    "bind_face",
    "hooks_for",
    "hooks_of",
]

#: Entry-point group where an engine registers its :class:`EngineHooks`, keyed
#: by URL scheme, like ``alkstore.engines``.
HOOKS_GROUP = "alkstore_conformance.hooks"

#: The faces every contract test runs through (A-1).
Face = Literal["sync", "async"]
FACES: tuple[Face, ...] = ("sync", "async")


@dataclass(frozen=True, repr=False)
class StoreFactory:
    """Opens fresh stores on one isolated database.

    A plain URL plus engine options, so it pickles into the child processes of
    the cross-process tests. Every store a test opens through it sees the same
    database; no other test's rows are there.
    """

    url: str
    opts: Mapping[str, Any] = field(default_factory=dict)
    #: True when every test of the run uses this one database (the URL
    #: runner on an engine without an ``isolated`` hook): tests marked
    #: ``fresh_database`` are then skipped.
    shared_database: bool = False

    #: The face :meth:`open` opens: ``"sync"``, or ``"async"`` (the engine's
    #: async store behind a sync facade, A-1). The suite's ``face`` fixture
    #: sets it on the test's own factory (:func:`bind_face`); an engine's
    #: ``store_factory`` leaves it alone.
    face: Face = field(default="sync", compare=False)

    def open(self, **overrides: Any) -> Store:
        """A new store on the isolated database; *overrides* replace engine options.

        Under the async face of the suite (A-1) the store is the engine's
        async store (``alkstore.open_async``) behind a sync facade."""
        options = {**self.opts, **overrides}
        if self.face == "async":
            from ._facade import open_facade

            store: Store = open_facade(self.url, **options)
            return store
        return alkstore.open(self.url, **options)

    def __repr__(self) -> str:  # E-4: a failing test's report shows no password
        return (
            f"StoreFactory({redact_url(self.url)!r}, {redact_url(repr(dict(self.opts)))}, "
            f"shared_database={self.shared_database}, face={self.face!r})"
        )

    def __reduce__(self) -> tuple[type[StoreFactory], tuple[str, dict[str, Any], bool]]:
        # A child process of a cross-process test opens the sync face: the
        # async face is proven in the test's own process.
        return (StoreFactory, (self.url, dict(self.opts), self.shared_database))

    def skip_reason(self, hook: str) -> str:
        """Why a test that needs the engine hook *hook* cannot run here."""
        return (
            f"needs the engine hook {hook}(): the {self.scheme!r} engine registers none "
            f"under the {HOOKS_GROUP!r} entry point group"
        )

    @property
    def scheme(self) -> str:
        return self.url.partition("://")[0].lower()


def bind_face(factory: StoreFactory, face: Face) -> StoreFactory:
    """Make *factory* (the test's own, made by its ``store_factory`` fixture
    for this test alone) open *face*; returns it.

    The factory is frozen so that a test cannot change where it points; the
    face is the one field the suite's ``face`` fixture sets, once, before the
    test or any fixture opens a store through it."""
    if face not in FACES:
        raise ValueError(f"face must be one of {FACES}, not {face!r}")
    object.__setattr__(factory, "face", face)
    return factory


class EngineHooks(Protocol):
    """What an engine gives the suite beyond ``alkstore.open``.

    Registered under the entry-point group :data:`HOOKS_GROUP`. Both methods
    are context managers so that they clean up after themselves.
    """

    def isolated(
        self, url: str, opts: Mapping[str, Any], key: str
    ) -> AbstractContextManager[tuple[str, dict[str, Any]]]:
        """Yield ``(url, opts)`` of a fresh, empty database (a new file, a new
        schema) derived from *url* for the test *key*; drop it afterwards."""
        ...

    def transient_failure(
        self, url: str, opts: Mapping[str, Any]
    ) -> AbstractContextManager[Callable[[], object]]:
        """Yield a callable that makes one contract call on that database under
        a condition the engine reports as ``TransientError`` (a held write
        lock, a dropped connection), for rule E-2."""
        ...

    def future_schema(
        self, url: str, opts: Mapping[str, Any]
    ) -> AbstractContextManager[Callable[[], object]]:
        """Make the fresh database at *url* look as if a newer engine created
        it, and yield a callable that snapshots everything the engine owns
        there (to show that a refused open changed nothing), for rule ST-2."""
        ...


#: The hooks an engine may register, each optional.
HOOK_NAMES = ("isolated", "transient_failure", "future_schema")


def _registered(scheme: str) -> object | None:
    for ep in entry_points(group=HOOKS_GROUP):
        if ep.name == scheme:
            hooks: object = ep.load()
            return hooks
    return None


def hooks_of(scheme: str) -> frozenset[str]:
    """The names of the hooks the engine for *scheme* registered."""
    hooks = _registered(scheme)
    return frozenset(n for n in HOOK_NAMES if callable(getattr(hooks, n, None)))


class _Hooks:
    """An engine's hooks with a fallback for each one it lacks: no isolation
    (the URL's database is shared), and a skip, with the reason, for a test
    that needs a probe (E-2, ST-2)."""

    def __init__(self, scheme: str, registered: object | None) -> None:
        self.scheme = scheme
        self._registered = registered

    def _own(self, name: str) -> Any:
        return getattr(self._registered, name, None)

    def _probe(
        self, name: str, url: str, opts: Mapping[str, Any]
    ) -> AbstractContextManager[Callable[[], object]]:
        """The engine's probe *name* on that database; the calling test is
        skipped, with the reason, when the engine registered none."""
        own = self._own(name)
        if own is None:
            pytest.skip(StoreFactory(f"{self.scheme}://").skip_reason(name))
        cm: AbstractContextManager[Callable[[], object]] = own(url, opts)
        return cm

    def isolated(
        self, url: str, opts: Mapping[str, Any], key: str
    ) -> AbstractContextManager[tuple[str, dict[str, Any]]]:
        own = self._own("isolated")
        if own is not None:
            cm: AbstractContextManager[tuple[str, dict[str, Any]]] = own(url, opts, key)
            return cm
        return _shared(url, opts)

    def transient_failure(
        self, url: str, opts: Mapping[str, Any]
    ) -> AbstractContextManager[Callable[[], object]]:
        return self._probe("transient_failure", url, opts)

    def future_schema(
        self, url: str, opts: Mapping[str, Any]
    ) -> AbstractContextManager[Callable[[], object]]:
        return self._probe("future_schema", url, opts)


@contextmanager
def _shared(url: str, opts: Mapping[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    yield url, dict(opts)


def hooks_for(scheme: str) -> EngineHooks:
    """The hooks of the engine for *scheme*. A hook it does not register falls
    back: ``isolated`` yields the URL unchanged (no isolation), and the probes
    skip the calling test with the reason."""
    return _Hooks(scheme, _registered(scheme))
