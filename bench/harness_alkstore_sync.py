"""alkstore's sync face in the peer harness (protocol: bench/harness_proto.py).

What a user of the sync face writes: ``alkstore.open(url)``, the same queue
options as bench/harness_alkstore.py, ``enqueue_many`` for the producer's
batches and a ``Worker`` with ``WORKER_COUNT`` handler threads (plain
functions). The producer's loop hands each batch to a thread.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the checkout: bench/

import alkstore
from alkstore import QueueOpts, Worker
from bench import harness_proto as proto

QUEUE = "harness"


async def main() -> None:
    store = alkstore.open(proto.URL, application_name="harness-alkstore-sync")
    queue = store.queue(QUEUE, QueueOpts(visibility_timeout_s=10.0, max_attempts=25))

    def handle(job: Any) -> None:
        job_id, lat = proto.started(job.payload)
        time.sleep(proto.WORK_S)
        proto.report_done(job_id, lat)

    stop = threading.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    worker = Worker(store, queue, handle, concurrency=proto.WORKERS, grace_s=2.0)
    running = threading.Thread(target=worker.run, kwargs={"stop": stop}, daemon=True)
    running.start()

    async def enqueue_many(batch: list[dict[str, Any]]) -> None:
        await asyncio.to_thread(queue.enqueue_many, batch)

    producing = asyncio.create_task(proto.produce(enqueue_many))
    proto.emit(
        {
            "k": "ready",
            "system": "alkstore-sync",
            "version": alkstore.__version__,
            "schema": "alkstore",
            "pid": os.getpid(),
        }
    )
    while not stop.is_set():
        await asyncio.sleep(0.2)
        if not running.is_alive():  # the worker gave up: exit as a crashed process would
            proto.log("worker ended")
            os._exit(3)
    producing.cancel()
    await asyncio.to_thread(running.join, 10)
    store.close()


if __name__ == "__main__":
    asyncio.run(main())
