"""How the suite reaches an engine: store factories and engine hooks."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any, Protocol

import alkstore
from alkstore import Store

__all__ = ["HOOKS_GROUP", "EngineHooks", "StoreFactory", "hooks_for"]

#: Entry-point group where an engine registers its :class:`EngineHooks`, keyed
#: by URL scheme, like ``alkstore.engines``.
HOOKS_GROUP = "alkstore_conformance.hooks"


@dataclass(frozen=True)
class StoreFactory:
    """Opens fresh stores on one isolated database.

    A plain URL plus engine options, so it pickles into the child processes of
    the cross-process tests. Every store a test opens through it sees the same
    database; no other test's rows are there.
    """

    url: str
    opts: Mapping[str, Any] = field(default_factory=dict)

    def open(self, **overrides: Any) -> Store:
        """A new store on the isolated database; *overrides* replace engine options."""
        return alkstore.open(self.url, **{**self.opts, **overrides})

    @property
    def scheme(self) -> str:
        return self.url.partition("://")[0].lower()


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


class _NoHooks:
    """The fallback for an engine without hooks: no isolation, no E-2 probe."""

    def __init__(self, scheme: str) -> None:
        self.scheme = scheme

    @contextmanager
    def isolated(
        self, url: str, opts: Mapping[str, Any], key: str
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        yield url, dict(opts)

    def transient_failure(
        self, url: str, opts: Mapping[str, Any]
    ) -> AbstractContextManager[Callable[[], object]]:
        raise NotImplementedError(
            f"the {self.scheme!r} engine registers no {HOOKS_GROUP!r} entry point, "
            "so the suite cannot provoke a transient failure (E-2)"
        )

    def future_schema(
        self, url: str, opts: Mapping[str, Any]
    ) -> AbstractContextManager[Callable[[], object]]:
        raise NotImplementedError(
            f"the {self.scheme!r} engine registers no {HOOKS_GROUP!r} entry point, "
            "so the suite cannot fake a newer schema (ST-2)"
        )


def hooks_for(scheme: str) -> EngineHooks:
    """The hooks the engine for *scheme* registered, or a fallback that does
    not isolate and cannot probe E-2."""
    for ep in entry_points(group=HOOKS_GROUP):
        if ep.name == scheme:
            hooks: EngineHooks = ep.load()
            return hooks
    return _NoHooks(scheme)
