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
  the async face opens them with :func:`resolve_async` (an ``AsyncSession``
  checks out its connection and begins its transaction, an
  ``AsyncConnection`` begins one, as their sync twins do) before the engine
  sees ``tx``.
- Each face takes its own (A-7): :func:`resolve_sync` refuses an async
  connection or transaction, :func:`resolve_async` a sync one, naming the
  store to use.
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

from alkstore.errors import AlkstoreError, InvalidArgument

from .faces import is_async, wrong_face

__all__ = ["Resolves", "resolve_async", "resolve_sync", "unwrap"]

T = TypeVar("T", covariant=True)


class Resolves(Protocol[T]):
    """An engine's executor, as far as resolving ``tx=`` goes (the seam's
    ``resolve_tx``)."""

    def resolve_tx(self, tx: object) -> T: ...


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
            f"tx is a SQLAlchemy {name}, an object of the async face: pass it to the async "
            "store (alkstore.open_async), or pass a Session or a Connection to this one"
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


#: SQLAlchemy's sync objects that the async face refuses (A-7).
_SQLALCHEMY_SYNC = ("Session", "Connection", "scoped_session", "Engine")
#: What each face takes as its own transaction.
_OWN_TX = "the transaction of its store.transaction(), or its driver's connection"
#: Where the sync transactions and connections the async face refuses come
#: from, besides alkstore's own packages. Not ``sqlite3``: on an engine whose
#: async face runs the sync one on I/O threads, the native connection behind
#: an async transaction is a ``sqlite3.Connection`` (T-2), and it is taken.
_SYNC_MODULES = ("psycopg",)


def resolve_sync(tx: object | None, engine: Resolves[T]) -> T | None:
    """``tx=`` of the sync face, resolved by *engine* (its ``resolve_tx``):
    an object of the async face (an async transaction or driver connection,
    a SQLAlchemy async object) is refused first, naming the async store
    (A-7)."""
    if tx is None:
        return None
    if is_async(tx, "execute") or (
        _module(tx).startswith("sqlalchemy") and type(tx).__name__ in _SQLALCHEMY_ASYNC
    ):
        raise wrong_face("tx", tx, async_face=False, takes=_OWN_TX)
    return engine.resolve_tx(tx)


async def resolve_async(tx: object | None, engine: Resolves[T]) -> T | None:
    """``tx=`` of the async face, resolved by *engine* (its ``resolve_tx``): SQLAlchemy's
    ``AsyncSession`` and ``AsyncConnection`` become their driver connection,
    their transaction begun as :func:`unwrap` begins a sync one's (A-7); a
    sync transaction or connection is refused naming the sync store."""
    if tx is None:
        return None
    module, name = _module(tx), type(tx).__name__
    if module.startswith("sqlalchemy"):
        if name in _SQLALCHEMY_SYNC:
            raise wrong_face("tx", tx, async_face=True, takes="an AsyncSession or AsyncConnection")
        if name in _SQLALCHEMY_ASYNC:
            driver: object = await _sqlalchemy_async(tx)
            return engine.resolve_tx(driver)
        return engine.resolve_tx(tx)
    sync_object = module.startswith("alkstore") or module.split(".")[0] in _SYNC_MODULES
    if sync_object and callable(getattr(tx, "execute", None)) and not is_async(tx, "execute"):
        raise wrong_face("tx", tx, async_face=True, takes=_OWN_TX)
    return engine.resolve_tx(tx)


async def _sqlalchemy_async(tx: Any) -> Any:
    name = type(tx).__name__
    if name == "AsyncEngine":
        raise InvalidArgument(
            "tx is a SQLAlchemy AsyncEngine, which holds no transaction: pass an "
            "AsyncSession or an AsyncConnection (`async with engine.begin() as conn`)"
        )
    try:
        conn = tx
        if name != "AsyncConnection":
            # AsyncSession (or its scoped proxy): checks out the connection and
            # begins the session's transaction, so its commit() carries our write.
            conn = await tx.connection()
        if not conn.in_transaction():
            await conn.begin()  # else its commit() would not carry the write
        raw = await conn.get_raw_connection()
        driver = raw.driver_connection
    except AlkstoreError:  # pragma: no cover - nothing above raises ours
        raise
    except Exception as exc:  # closed, invalidated, ...
        raise InvalidArgument(f"cannot use this SQLAlchemy {name} as tx: {exc}") from exc
    if driver is None:  # pragma: no cover - an open connection has one
        raise InvalidArgument(f"tx is a SQLAlchemy {name} without a driver connection")
    return driver
