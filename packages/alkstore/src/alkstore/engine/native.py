"""The driver connection inside what a framework hands its users (T-2, A-3).

Applications built on SQLAlchemy or Django hold a ``Session``, a
``Connection`` or Django's connection wrapper, not the driver's connection.
:func:`unwrap` finds the driver connection inside them, so ``tx=`` takes
those objects as they are; engines call it before resolving ``tx``. Nothing
here imports a framework: objects are recognised by their type's module.

What the frameworks do that this module accounts for (each is tested with
the real framework in ``contract_tests/test_frameworks.py``):

- A SQLAlchemy ``Connection`` that has run nothing yet has no transaction:
  its ``commit()`` would do nothing, and the pool would roll our write back
  when the connection is returned. So a write through it begins the
  ``Connection``'s transaction, as its first statement would have.
- A ``Session`` before its first statement has no connection at all:
  ``Session.connection()`` checks one out and begins the session's
  transaction, so the session's ``commit()`` and ``rollback()`` carry the
  write.
- Django connects lazily: the wrapper holds no driver connection before
  its first query, so :func:`unwrap` connects it. Django refuses that from
  a thread running an event loop; the refusal says what to do instead.
- The async objects of SQLAlchemy cannot be looked into without awaiting:
  they are refused with the two lines that get their driver connection.
"""

from __future__ import annotations

from typing import Any

from alkstore.errors import AlkstoreError, InvalidArgument

__all__ = ["unwrap"]

_SQLALCHEMY_ASYNC = ("AsyncSession", "AsyncConnection", "async_scoped_session", "AsyncEngine")
_SQLALCHEMY_HOW = (
    "pass a Session or a Connection (with its transaction begun or not), "
    "or the driver connection itself"
)


def _module(obj: object) -> str:
    return type(obj).__module__ or ""


def _sqlalchemy(tx: Any) -> Any:
    name = type(tx).__name__
    if name in _SQLALCHEMY_ASYNC:
        raise InvalidArgument(
            f"tx is a SQLAlchemy {name}, whose driver connection can only be awaited: "
            "`raw = await (await session.connection()).get_raw_connection()` (on an "
            "AsyncConnection: `await conn.get_raw_connection()`), then pass "
            "`tx=raw.driver_connection` to the async store"
        )
    try:
        if callable(getattr(tx, "get_bind", None)) and callable(getattr(tx, "connection", None)):
            # Session or scoped_session: checks out the connection and begins
            # the session's transaction, so its commit() carries our write.
            tx = tx.connection()
        if callable(getattr(tx, "in_transaction", None)) and callable(getattr(tx, "begin", None)):
            # Connection: without a begun transaction its commit() is a no-op.
            if not tx.in_transaction():
                tx.begin()
            proxy = tx.connection  # the pool's proxy of the DBAPI connection
        else:
            proxy = tx  # already the pool's proxy (``Connection.connection``)
        driver = getattr(proxy, "driver_connection", None)
    except AlkstoreError:  # pragma: no cover - nothing above raises ours
        raise
    except Exception as exc:  # closed, invalidated, a greenlet-only session, ...
        raise InvalidArgument(f"cannot use this SQLAlchemy {name} as tx: {exc}") from exc
    if driver is None:
        raise InvalidArgument(f"tx is a SQLAlchemy {name}: {_SQLALCHEMY_HOW}")
    return driver


def _django(tx: Any) -> Any:
    name = type(tx).__name__
    if not callable(getattr(tx, "ensure_connection", None)):
        raise InvalidArgument(
            f"tx is a Django {name}; pass django.db.connection (or "
            "django.db.connections[alias]) inside transaction.atomic()"
        )
    try:
        tx.ensure_connection()  # Django connects on first use
        driver = tx.connection
    except Exception as exc:
        if type(exc).__name__ == "SynchronousOnlyOperation":
            raise InvalidArgument(
                "Django's connection cannot be used from async code: put the "
                "transaction.atomic() block in a sync function, run it with "
                "asgiref's sync_to_async, and use the sync store inside it"
            ) from exc
        raise InvalidArgument(f"cannot use Django's connection as tx: {exc}") from exc
    if driver is None:  # pragma: no cover - ensure_connection sets it
        raise InvalidArgument("Django's connection wrapper holds no connection")
    return driver


def unwrap(tx: object) -> object:
    """The driver connection behind *tx* when it is a framework's object;
    *tx* itself otherwise. psycopg2 connections, bare or inside a framework's
    object, get a clear refusal."""
    module = _module(tx)
    if module.startswith("sqlalchemy"):
        tx = _sqlalchemy(tx)
    elif module.startswith("django"):
        tx = _django(tx)
    if _module(tx).startswith("psycopg2"):  # also under SQLAlchemy's or Django's objects
        raise InvalidArgument(
            "tx is a psycopg2 connection; alkstore's PostgreSQL engine uses psycopg 3 "
            "(`pip install psycopg`): open your connection with psycopg.connect(store.dsn)"
        )
    return tx
