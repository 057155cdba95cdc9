"""The PostgreSQL engine of alkstore (psycopg 3).

Open it through ``alkstore.open("postgresql://app@db/app", schema="alkstore")``
(or ``await alkstore.open_async(...)`` for the native async store); every
table lives in one engine-owned schema. See the package README for engine
options.
"""

from __future__ import annotations

from ._store import AsyncPostgresStore, PostgresStore, open_async_store, open_store, parse_url
from ._tx import PostgresTx
from ._tx_async import AsyncPostgresTx

__version__ = "0.1.0"

__all__ = [
    "AsyncPostgresStore",
    "AsyncPostgresTx",
    "PostgresStore",
    "PostgresTx",
    "__version__",
    "open_async_store",
    "open_store",
    "parse_url",
]
