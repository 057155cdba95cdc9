"""``alkstore.open_async``: the async face of a store (SPEC §14)."""

from __future__ import annotations

import os
from importlib.metadata import entry_points
from typing import Any

from ._open import DEFAULT_URL, open, url_scheme
from .errors import EngineError, InvalidArgument, UnsupportedOperation
from .protocols import AsyncStore

__all__ = ["ASYNC_ENGINE_GROUP", "open_async"]

#: Entry-point group of the engines' async openers, keyed by URL scheme like
#: ``alkstore.engines``; each is a coroutine function ``(url, **opts)``.
ASYNC_ENGINE_GROUP = "alkstore.async_engines"


async def open_async(url: str | None = None, **engine_opts: Any) -> AsyncStore:
    """Open the async face of the store at *url* (A-1).

    The engine's own async opener (``alkstore.async_engines``) is used when it
    registers one; an engine built on the kit without one gets the kit's
    threaded face (:class:`alkstore.engine.ThreadedAsyncExecutor`); any other
    engine raises :class:`UnsupportedOperation`.
    """
    if url is None:
        url = os.environ.get("ALKSTORE_URL") or DEFAULT_URL
    if not isinstance(url, str):
        raise InvalidArgument(f"url must be a str, not {type(url).__name__}")
    scheme = url_scheme(url)
    matches = [ep for ep in entry_points(group=ASYNC_ENGINE_GROUP) if ep.name == scheme]
    if matches:
        try:
            opener = matches[0].load()
        except Exception as exc:
            raise EngineError(
                f"the async alkstore engine for {scheme!r} failed to load: {exc}"
            ) from exc
        store: AsyncStore = await opener(url, **engine_opts)
        return store
    import asyncio

    from .engine import AsyncKitStore, KitStore, ThreadedAsyncExecutor

    sync = await asyncio.to_thread(open, url, **engine_opts)
    if not isinstance(sync, KitStore):
        sync.close()
        raise UnsupportedOperation(f"the engine for {scheme!r} URLs has no async face")
    return AsyncKitStore(ThreadedAsyncExecutor(sync.executor))
