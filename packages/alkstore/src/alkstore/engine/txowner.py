"""Which transactions of ``store.transaction()`` are open in the current
thread or task (E-5).

The kit marks each transaction it opens in a context variable, so an engine
can tell that a write without ``tx=`` (or a second transaction) comes from
code that already holds a transaction of the same database, and refuse it at
once rather than wait for a lock it can never get. A context variable
follows a task across the threads that ``asyncio.to_thread`` runs it in.
"""

from __future__ import annotations

from contextvars import ContextVar, Token

__all__ = ["enter", "innermost", "leave", "open_here"]

_OPEN: ContextVar[tuple[object, ...]] = ContextVar("alkstore_open_transactions", default=())


def enter() -> tuple[object, Token[tuple[object, ...]]]:
    """Mark a new transaction open here; returns its marker and the reset token."""
    marker = object()
    return marker, _OPEN.set((*_OPEN.get(), marker))


def leave(token: Token[tuple[object, ...]]) -> None:
    try:
        _OPEN.reset(token)
    except ValueError:  # left from another context than it was entered in
        _OPEN.set(())


def open_here() -> tuple[object, ...]:
    """The markers of the transactions open in this thread or task."""
    return _OPEN.get()


def innermost() -> object | None:
    """The marker of the transaction being opened or run here, if any."""
    opened = _OPEN.get()
    return opened[-1] if opened else None
