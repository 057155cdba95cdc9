"""The one error hierarchy of alkstore (SPEC §2).

A class exists only where a caller would act differently::

    AlkstoreError(Exception)
    ├── InvalidArgument(AlkstoreError, ValueError)  bad input; nothing written
    │   ├── ReservedName                             C-2
    │   └── InvalidSpec                              .spec: the rejected schedule spec
    ├── QueueFull                                    .queue, .max_depth: shed load or wait (Q-24)
    ├── StoreClosed                                  the store was closed
    ├── UnsupportedOperation                         the engine lacks this capability
    ├── SchemaVersionError                           .found, .supported: schema newer than the
    │                                                engine, or older (or missing) and not
    │                                                migrated by this open
    └── EngineError                                  the database failed; __cause__: driver error
        └── TransientError                           safe to retry: busy, conflict, lost link

Every error pickles with its attributes, so it can cross a process boundary.
Engines translate driver exceptions in one place (E-1, E-2); nothing from
``sqlite3`` or ``psycopg`` reaches a caller unwrapped.
"""

from __future__ import annotations

__all__ = [
    "AlkstoreError",
    "EngineError",
    "InvalidArgument",
    "InvalidSpec",
    "QueueFull",
    "ReservedName",
    "SchemaVersionError",
    "StoreClosed",
    "TransientError",
    "UnsupportedOperation",
]


class AlkstoreError(Exception):
    """Root of every error alkstore raises."""


class InvalidArgument(AlkstoreError, ValueError):
    """Bad input. The call wrote nothing and left the caller's transaction as it was."""


class ReservedName(InvalidArgument):
    """A consumer call used a name in the engine's ``__alkstore`` namespace (C-2)."""

    def __init__(self, name: str) -> None:
        super().__init__(f"names starting with '__alkstore' belong to the engine: {name!r}")
        self.name = name

    def __reduce__(self) -> tuple[type[ReservedName], tuple[str]]:
        return (type(self), (self.name,))


class InvalidSpec(InvalidArgument):
    """A schedule spec that is not one of the accepted forms (SC-1)."""

    def __init__(self, spec: object, reason: str = "not a valid schedule spec") -> None:
        super().__init__(f"invalid schedule spec {spec!r}: {reason}")
        self.spec = spec
        self.reason = reason

    def __reduce__(self) -> tuple[type[InvalidSpec], tuple[object, str]]:
        return (type(self), (self.spec, self.reason))


class StoreClosed(AlkstoreError):
    """The store, or the handle's store, was closed (ST-3)."""


class UnsupportedOperation(AlkstoreError):
    """The engine does not declare the capability this call needs (CF-1)."""


class QueueFull(AlkstoreError):
    """An enqueue would leave more than ``max_depth`` unfinished jobs in the
    queue (Q-24). Nothing was written; shed the load, or wait and try again
    (``enqueue(..., wait_s=...)`` waits for room)."""

    def __init__(self, queue: str, max_depth: int) -> None:
        super().__init__(f"queue {queue!r} is full: it holds {max_depth} unfinished jobs")
        self.queue = queue
        self.max_depth = max_depth

    def __reduce__(self) -> tuple[type[QueueFull], tuple[str, int]]:
        return (type(self), (self.queue, self.max_depth))


class SchemaVersionError(AlkstoreError):
    """The database's schema is not the one this engine runs on (ST-2, EN-2).

    ``found > supported``: a newer engine made it; upgrade the engine package.
    ``found < supported``: it is older (0: there is none) and this open did
    not bring it up to date: the role may not run DDL, or the store was
    opened with ``migrate=False``. ``reason``, when given, says which.
    """

    def __init__(self, found: int, supported: int, reason: str | None = None) -> None:
        if reason is None:
            if found > supported:
                reason = (
                    f"database schema version {found} is newer than this engine supports "
                    f"({supported}); upgrade the alkstore engine package"
                )
            else:
                reason = (
                    f"database schema version {found} is older than this engine needs "
                    f"({supported}); run `alkstore migrate` as a role that may change the schema"
                )
        super().__init__(reason)
        self.found = found
        self.supported = supported
        self.reason = reason

    def __reduce__(self) -> tuple[type[SchemaVersionError], tuple[int, int, str]]:
        return (type(self), (self.found, self.supported, self.reason))


class EngineError(AlkstoreError):
    """The database failed. ``__cause__`` holds the driver's exception (E-1)."""


class TransientError(EngineError):
    """A failure that is safe to retry: busy or locked database, serialization
    failure or deadlock, a dropped connection (E-2)."""
