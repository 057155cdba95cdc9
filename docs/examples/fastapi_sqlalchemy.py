"""FastAPI with SQLAlchemy's AsyncSession: the order and its job commit in
the request's transaction; an AsyncWorker runs in the app's lifespan.

The job joins the session's transaction through its driver connection
(aiosqlite on SQLite, psycopg's AsyncConnection on PostgreSQL). Serve it
with `uvicorn fastapi_sqlalchemy:app`; run as a script, it runs the lifespan
and sends requests in-process through httpx's ASGI transport (no server, no
network).

Run it from any directory: it opens the store at $ALKSTORE_URL, or the
embedded default (sqlite:///alkstore.db in the current directory).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

import httpx
import psycopg
from fastapi import Depends, FastAPI, HTTPException
from pydantic import BaseModel
from sqlalchemy import select
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

import alkstore
from alkstore import AsyncJob
from alkstore.worker import AsyncWorker


class Base(DeclarativeBase):
    pass


class Order(Base):
    __tablename__ = "shop_orders"
    id: Mapped[int] = mapped_column(primary_key=True)
    item: Mapped[str]
    status: Mapped[str] = mapped_column(default="placed")


def sqlalchemy_engine(store: alkstore.AsyncStore) -> AsyncEngine:
    """An async engine on the store's database."""
    if store.url.startswith("sqlite:"):
        return create_async_engine(f"sqlite+aiosqlite:///{store.path}")
    # store.dsn: the libpq DSN, without alkstore's own URL options (?schema=...).
    dsn = store.dsn
    return create_async_engine(
        "postgresql+psycopg://", async_creator=lambda: psycopg.AsyncConnection.connect(dsn)
    )


state: dict[str, Any] = {}


async def confirm(job: AsyncJob) -> None:
    """The worker's handler: the order's new status and the ack commit together."""
    async with state["sessions"]() as session:
        order = await session.get(Order, job.payload["order"])
        if order is None:
            return  # nothing to confirm: acked
        order.status = "confirmed"
        await session.flush()
        await job.ack(tx=session)  # the session itself
        await session.commit()


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    store = await alkstore.open_async()  # $ALKSTORE_URL, else sqlite:///alkstore.db
    engine = sqlalchemy_engine(store)
    async with engine.begin() as conn:
        await conn.run_sync(Base.metadata.create_all)
    state.update(store=store, sessions=async_sessionmaker(engine, expire_on_commit=False))
    stop = asyncio.Event()
    worker = AsyncWorker(store, "confirmations", confirm, concurrency=4)
    running = asyncio.create_task(worker.run(stop=stop))
    try:
        yield
    finally:
        stop.set()  # graceful: running handlers finish first
        await running
        await engine.dispose()
        await store.close()


app = FastAPI(lifespan=lifespan)


async def get_session() -> AsyncIterator[AsyncSession]:
    async with state["sessions"]() as session:
        yield session


Session = Annotated[AsyncSession, Depends(get_session)]


class NewOrder(BaseModel):
    item: str


@app.post("/orders", status_code=201)
async def place_order(new: NewOrder, session: Session) -> dict[str, Any]:
    order = Order(item=new.item)
    session.add(order)
    await session.flush()  # gives the order its id
    queue = state["store"].queue("confirmations")
    await queue.enqueue({"order": order.id}, tx=session)
    if new.item == "":
        # Raised before the commit: the session closes without committing,
        # and the order and its job vanish together.
        raise HTTPException(422, "an order needs an item")
    await session.commit()  # the order and its job: both or neither
    return {"id": order.id, "status": order.status}


@app.get("/orders")
async def list_orders(session: Session) -> list[dict[str, Any]]:
    rows = (await session.scalars(select(Order).order_by(Order.id))).all()
    return [{"id": o.id, "item": o.item, "status": o.status} for o in rows]


async def demo() -> None:
    """What a server does, in-process: the lifespan around a few requests."""
    async with lifespan(app):  # the store, the tables, the worker
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://shop") as client:
            placed = (await client.post("/orders", json={"item": "a book"})).json()
            print("placed:", placed)
            refused = await client.post("/orders", json={"item": ""})
            print("refused:", refused.status_code, refused.json()["detail"])
            for _ in range(600):  # the worker confirms it within moments
                orders = (await client.get("/orders")).json()
                if all(o["status"] == "confirmed" for o in orders):
                    break
                await asyncio.sleep(0.05)
            print("orders:", orders)
    assert [o["status"] for o in orders] == ["confirmed"]


if __name__ == "__main__":
    asyncio.run(demo())
