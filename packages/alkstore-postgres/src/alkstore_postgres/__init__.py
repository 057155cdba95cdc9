"""The PostgreSQL engine of alkstore (psycopg 3).

Open it through ``alkstore.open("postgresql://app@db/app", schema="alkstore")``;
every table lives in one engine-owned schema. See :class:`PostgresStore` for
engine options.
"""

from __future__ import annotations

from ._store import PostgresStore, open_store
from ._tx import PostgresTx

__version__ = "0.1.0"

__all__ = ["PostgresStore", "PostgresTx", "__version__", "open_store"]
