"""The engine seam, the part both faces share: what an engine supplies so that
the kit can implement the whole public API above it, once (docs/adr/0010,
docs/adr/0017).

An engine implements :class:`~alkstore.engine.seam.Executor` (and, for a
native async face, :class:`~alkstore.engine.seam_async.AsyncExecutor`: the
same operations as coroutines; the sync protocol is generated from the async
one). Each operation is one unit of I/O with the engine's own atomicity: it
fully happens or leaves no trace (C-6), joins the caller's ``tx`` where it
takes one (T-1), and wraps every driver error (E-1, E-2). Everything that does
not depend on the database — argument checks, payload encoding and decoding,
the backoff curve, claim order, handles, blocking loops, the scheduler's
planning and leader loop, listeners, the outbox — lives in the kit and is the
same for every engine.

Arguments arrive validated: names follow C-1, payloads are encoded JSON
text, durations are finite seconds, ids are 64-bit integers. ``tx`` is
passed through as the caller gave it; the engine resolves it (its own
transaction object, a native connection, or what
:func:`alkstore.engine.native.unwrap` finds inside a framework's object) and
refuses anything else with ``InvalidArgument`` before any statement.
"""

from __future__ import annotations

from typing import Protocol

from alkstore.protocols import Capability

from .wakes import WakeBoard

__all__ = ["ExecutorBase", "NoteSink"]


class NoteSink(Protocol):
    """Where an engine delivers notifications for one listener (N-1)."""

    @property
    def channels(self) -> frozenset[str]:
        """The channels this sink listens on."""
        ...

    def deliver(self, channel: str, payload: str) -> None:
        """Called once per notification, in commit order per channel, with the
        stored payload text. Must not block; may be called from any thread."""
        ...


class ExecutorBase(Protocol):
    """The members of an executor that do no I/O: the same on both faces."""

    @property
    def url(self) -> str:
        """The store's URL without a password (E-4)."""
        ...

    @property
    def capabilities(self) -> frozenset[Capability]:
        """What the engine supports (CF-1)."""
        ...

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` ran."""
        ...

    @property
    def store_id(self) -> str:
        """Names the database: equal for two stores on the same one, different
        for another file, server, database or schema (C-7)."""
        ...

    @property
    def wakes(self) -> WakeBoard:
        """Bumped, per queue name and ``"stream:<name>"``, when a commit may
        have made work (Q-19); every key when the engine cannot tell."""
        ...

    def fallback_s(self) -> float | None:
        """How often blocked calls look again without a wake (``None``: never)."""
        ...
