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
text, durations are finite seconds, ids are 64-bit integers. The seam is
generic over the engine's transaction type ``TxT``: the kit hands a caller's
``tx=`` to :meth:`ExecutorBase.resolve_tx` once, at the public call, and the
operations take what it returned (or ``None`` for "no caller transaction").
The engine decides what it accepts there (its own transaction object, a
native connection, or what :func:`alkstore.engine.native.unwrap` finds
inside a framework's object) and refuses anything else with
``InvalidArgument`` before any statement.
"""

from __future__ import annotations

from typing import Protocol, TypeVar

from alkstore.protocols import Capability

from .wakes import WakeBoard

__all__ = ["ExecutorBase", "NoteSink", "TxT"]

#: The engine's own form of a caller's transaction (what ``resolve_tx`` returns).
TxT = TypeVar("TxT")
TxT_co = TypeVar("TxT_co", covariant=True)


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


class ExecutorBase(Protocol[TxT_co]):
    """The members of an executor that do no I/O: the same on both faces."""

    def resolve_tx(self, tx: object) -> TxT_co:
        """What the operations take for a caller's ``tx=``: checked here,
        before any statement runs, and refused with ``InvalidArgument`` (or
        ``StoreClosed`` on a closed store) when the engine cannot join it
        (T-1, T-2, A-3). Called on the caller's thread or task; it must not
        block, and must not use a connection that belongs to another thread."""
        ...

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
