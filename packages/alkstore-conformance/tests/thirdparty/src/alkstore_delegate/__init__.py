"""An example third-party engine: ``delegate-sqlite:///path.db`` opens the
SQLite engine on that file. It registers only the ``alkstore.engines`` entry
point, no conformance hooks."""

from __future__ import annotations

from typing import Any

import alkstore_sqlite
from alkstore import InvalidArgument, Store

__all__ = ["SCHEME", "open_store"]

SCHEME = "delegate-sqlite"


def open_store(url: str, **engine_opts: Any) -> Store:
    """The engine's factory: ``(url, **engine_opts) -> Store``."""
    scheme, sep, rest = url.partition("://")
    if scheme.lower() != SCHEME or not sep:
        raise InvalidArgument(f"not a {SCHEME}:// URL: {url!r}")
    store: Store = alkstore_sqlite.open_store(f"sqlite://{rest}", **engine_opts)
    return store
