"""The SQLite engine of alkstore.

Open it through ``alkstore.open("sqlite:///app.db")``; the tables live in
your file as ``__alkstore_*``. See :class:`SQLiteStore` for engine options.
"""

from __future__ import annotations

from ._core import SQLiteTx
from ._store import SQLiteStore, open_store

__version__ = "0.1.0"

__all__ = ["SQLiteStore", "SQLiteTx", "__version__", "open_store"]
