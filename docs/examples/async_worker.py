"""The async face: an AsyncWorker on the caller's event loop, and the two faces
sharing one database.

Run it from any directory: it opens the store at $ALKSTORE_URL, or the
embedded default (sqlite:///alkstore.db in the current directory).
"""

from __future__ import annotations

import asyncio

import alkstore
from alkstore import AsyncJob, Fail, QueueOpts, Retry
from alkstore.worker import AsyncWorker

done: list[str] = []


async def resize(job: AsyncJob) -> None:
    """An async handler: return to ack, raise Retry or Fail as with Worker."""
    name = job.payload["image"]
    if name.endswith(".txt"):
        raise Fail(f"{name} is not an image")
    if name == "flaky.png" and job.attempts == 1:
        raise Retry(delay_s=0)  # a transient problem: again, right away
    await asyncio.sleep(0.01)  # the I/O a real handler awaits
    done.append(name)


async def main() -> None:
    store = await alkstore.open_async()  # $ALKSTORE_URL, else sqlite:///alkstore.db
    images = store.queue("images", QueueOpts(max_attempts=3))

    # The business row and its job in one transaction, as with the sync store.
    async with store.transaction() as tx:
        await tx.execute("CREATE TABLE IF NOT EXISTS uploads (name TEXT NOT NULL)")
        await tx.execute("INSERT INTO uploads (name) VALUES ('cat.png')")
        await images.enqueue({"image": "cat.png"}, tx=tx)
    await images.enqueue_many([{"image": "flaky.png"}, {"image": "notes.txt"}])

    # The sync face works on the same database: a job it enqueues is claimed
    # by the async worker below (and the other way round).
    with alkstore.open() as sync_store:  # the same $ALKSTORE_URL or default
        sync_store.queue("images").enqueue({"image": "dog.png"})

    # A listener on the loop: notifications arrive after commit.
    async with store.listen("images-done") as listener:
        worker = AsyncWorker(store, images, resize, concurrency=8)
        ran = await worker.run_until_empty()  # in production: await worker.run(stop=event)
        await store.notify("images-done", {"count": len(done)})
        note = await listener.get(timeout_s=5)

    print(f"ran {ran} handler call(s); resized: {sorted(done)}")
    print("notified:", note.payload if note else None)
    stats = await images.stats()
    print(stats)
    assert sorted(done) == ["cat.png", "dog.png", "flaky.png"]
    assert stats.dead == 1 and stats.pending == 0
    await store.close()


asyncio.run(main())
