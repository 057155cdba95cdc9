"""``alkstore.open``: find the engine for a URL through entry points (§0)."""

from __future__ import annotations

import os
from importlib.metadata import entry_points
from typing import Any

from .errors import EngineError, InvalidArgument
from .protocols import Store

__all__ = ["DEFAULT_URL", "ENGINE_GROUP", "installed_schemes", "open", "url_scheme"]

#: The entry-point group engines register under, keyed by URL scheme.
ENGINE_GROUP = "alkstore.engines"
#: The embedded default: SQLite in the working directory.
DEFAULT_URL = "sqlite:///alkstore.db"


def url_scheme(url: str) -> str:
    """The scheme of *url*, lower-cased (``"sqlite"``, ``"postgresql"``)."""
    scheme, sep, _ = url.partition("://")
    if not sep or not scheme:
        raise InvalidArgument(f"not a store URL (expected scheme://...): {url!r}")
    return scheme.lower()


def installed_schemes() -> list[str]:
    """The URL schemes of the installed engines, sorted."""
    return sorted({ep.name for ep in entry_points(group=ENGINE_GROUP)})


def open(url: str | None = None, **engine_opts: Any) -> Store:
    """Open the store at *url* with the engine registered for its scheme.

    With no URL: ``$ALKSTORE_URL`` when set, else the embedded default
    ``sqlite:///alkstore.db``. *engine_opts* go to the engine unchanged (for
    example ``schema=`` on PostgreSQL, ``synchronous=`` on SQLite). An unknown
    scheme raises :class:`InvalidArgument` naming the installed ones.
    """
    if url is None:
        url = os.environ.get("ALKSTORE_URL") or DEFAULT_URL
    if not isinstance(url, str):
        raise InvalidArgument(f"url must be a str, not {type(url).__name__}")
    scheme = url_scheme(url)
    matches = [ep for ep in entry_points(group=ENGINE_GROUP) if ep.name == scheme]
    if not matches:
        installed = ", ".join(installed_schemes()) or "none"
        raise InvalidArgument(
            f"no alkstore engine is installed for {scheme!r} URLs (installed: {installed}); "
            "try `pip install alkstore[sqlite]` or `alkstore[postgres]`"
        )
    try:
        factory = matches[0].load()
    except Exception as exc:  # a broken install: say which engine, keep the cause
        raise EngineError(f"the alkstore engine for {scheme!r} URLs failed to load: {exc}") from exc
    store: Store = factory(url, **engine_opts)
    return store
