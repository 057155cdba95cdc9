"""FastAPI on the bare async driver: each request's own connection carries
the order and its job in one transaction; an AsyncWorker runs in the app's
lifespan.

On PostgreSQL the connections come from a psycopg_pool.AsyncConnectionPool
on `store.dsn` (a `psycopg.AsyncConnection` is what `tx=` takes); on SQLite
each request opens an `aiosqlite` connection on `store.path`. Serve it with
`uvicorn fastapi_psycopg:app`; run as a script, it runs the lifespan and
sends requests in-process through httpx's ASGI transport (no server, no
network).

Run it from any directory: it opens the store at $ALKSTORE_URL, or the
embedded default (sqlite:///alkstore.db in the current directory).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiosqlite
import httpx
from fastapi import FastAPI, HTTPException
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel

import alkstore
from alkstore import AsyncJob
from alkstore.worker import AsyncWorker

state: dict[str, Any] = {}


def sql(text: str) -> str:
    """The driver's placeholder: psycopg takes %s, sqlite3 (aiosqlite) takes ?."""
    return text.replace("%s", "?") if state["sqlite"] else text


@asynccontextmanager
async def connection() -> AsyncIterator[Any]:
    """A connection in a transaction: committed when the block ends, rolled
    back when it raises."""
    if state["sqlite"]:
        async with aiosqlite.connect(state["store"].path) as conn:
            try:
                yield conn
            except BaseException:
                await conn.rollback()
                raise
            await conn.commit()
    else:
        # The pool's connection() commits on a normal exit, rolls back on an error.
        async with state["pool"].connection() as conn:
            yield conn


async def ship(job: AsyncJob) -> None:
    """The worker's handler: the shipment row and the ack commit together."""
    async with connection() as conn:
        await conn.execute(
            sql("UPDATE orders SET status = 'shipped' WHERE id = %s"), (job.payload["order"],)
        )
        await job.ack(tx=conn)


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    store = await alkstore.open_async()  # $ALKSTORE_URL, else sqlite:///alkstore.db
    state.update(store=store, sqlite=store.url.startswith("sqlite:"))
    if not state["sqlite"]:
        # store.dsn: the libpq DSN, without alkstore's own URL options (?schema=...).
        state["pool"] = AsyncConnectionPool(store.dsn, min_size=1, max_size=4, open=False)
        await state["pool"].open()
    async with connection() as conn:
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS orders "
            "(id TEXT PRIMARY KEY, item TEXT NOT NULL, status TEXT NOT NULL)"
        )
    stop = asyncio.Event()
    running = asyncio.create_task(AsyncWorker(store, "shipping", ship).run(stop=stop))
    try:
        yield
    finally:
        stop.set()
        await running
        if "pool" in state:
            await state["pool"].close()
        await store.close()


app = FastAPI(lifespan=lifespan)


class NewOrder(BaseModel):
    item: str


@app.post("/orders", status_code=201)
async def place_order(new: NewOrder) -> dict[str, str]:
    order_id = uuid.uuid4().hex
    async with connection() as conn:  # committed before the response is sent
        await conn.execute(
            sql("INSERT INTO orders (id, item, status) VALUES (%s, %s, 'placed')"),
            (order_id, new.item),
        )
        await state["store"].queue("shipping").enqueue({"order": order_id}, tx=conn)
        if new.item == "":
            # Raised inside the block: the transaction rolls back, and the
            # order and its job vanish together.
            raise HTTPException(422, "an order needs an item")
    return {"id": order_id}


@app.get("/orders")
async def list_orders() -> list[dict[str, str]]:
    async with connection() as conn:
        cur = await conn.execute("SELECT item, status FROM orders ORDER BY item")
        rows = await cur.fetchall()
    return [{"item": item, "status": status} for item, status in rows]


async def demo() -> None:
    """What a server does, in-process: the lifespan around a few requests."""
    async with lifespan(app):  # the store, the table, the worker
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://shop") as client:
            for item in ("a book", "a lamp"):
                print("placed:", (await client.post("/orders", json={"item": item})).json())
            refused = await client.post("/orders", json={"item": ""})
            print("refused:", refused.status_code, refused.json()["detail"])
            for _ in range(600):  # the worker ships them within moments
                orders = (await client.get("/orders")).json()
                if all(o["status"] == "shipped" for o in orders):
                    break
                await asyncio.sleep(0.05)
            print("orders:", orders)
    assert orders == [
        {"item": "a book", "status": "shipped"},
        {"item": "a lamp", "status": "shipped"},
    ]


if __name__ == "__main__":
    asyncio.run(demo())
