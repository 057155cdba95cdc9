"""A-7: a worker refuses a store or a queue handle of the other face at
construction, and names the worker to use."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import alkstore
from alkstore import AsyncWorker, Worker
from alkstore.errors import InvalidArgument


def _noop(job: Any) -> None:
    pass


async def _anoop(job: Any) -> None:
    pass


def test_a_sync_worker_over_an_async_store_names_the_async_worker(url: str) -> None:
    async def main() -> None:
        store = await alkstore.open_async(url)
        try:
            with pytest.raises(InvalidArgument, match=r"alkstore\.AsyncWorker"):
                Worker(store, "emails", _noop)  # type: ignore[arg-type]
            with pytest.raises(InvalidArgument, match=r"alkstore\.AsyncWorker"):
                Worker(None, store.queue("emails"), _noop)  # type: ignore[arg-type]
            AsyncWorker(store, "emails", _anoop)  # its own face is taken
        finally:
            await store.close()

    asyncio.run(main())


def test_an_async_worker_over_a_sync_store_names_the_sync_worker(url: str) -> None:
    with alkstore.open(url) as store:
        with pytest.raises(InvalidArgument, match=r"alkstore\.Worker\b"):
            AsyncWorker(store, "emails", _anoop)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgument, match=r"alkstore\.Worker\b"):
            AsyncWorker(None, store.queue("emails"), _anoop)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgument, match=r"alkstore\.Worker\b"):
            AsyncWorker(store, ["a", "b"], _anoop)  # type: ignore[arg-type]
        Worker(store, "emails", _noop)  # its own face is taken
