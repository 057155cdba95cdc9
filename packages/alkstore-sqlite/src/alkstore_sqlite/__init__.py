"""The SQLite engine of alkstore.

Open it through ``alkstore.open("sqlite:///app.db")`` (or
``await alkstore.open_async(...)``); the tables live in your file as
``__alkstore_*``. See :class:`SQLiteStore` for engine options.
"""

from __future__ import annotations

from ._store import AsyncSQLiteStore, SQLiteStore, open_async_store, open_store
from ._tx import SQLiteTx

__version__ = "0.1.0"

__all__ = [
    "AsyncSQLiteStore",
    "SQLiteStore",
    "SQLiteTx",
    "__version__",
    "open_async_store",
    "open_store",
]
