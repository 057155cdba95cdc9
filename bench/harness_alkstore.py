"""alkstore's adapter for the peer harness (protocol: bench/harness_proto.py).

What a user of the async face writes: ``alkstore.open_async(url)``, a queue
with a 10 s visibility timeout (a killed worker's jobs come back within
that; the worker heartbeats running ones), ``enqueue_many`` for the
producer's batches and an ``AsyncWorker`` with ``WORKER_COUNT`` handlers.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the checkout: bench/

import alkstore
from alkstore import QueueOpts
from alkstore.worker import AsyncWorker
from bench import harness_proto as proto

QUEUE = "harness"


async def main() -> None:
    store = await alkstore.open_async(proto.URL, application_name="harness-alkstore")
    queue = store.queue(QUEUE, QueueOpts(visibility_timeout_s=10.0, max_attempts=25))

    async def handle(job: Any) -> None:
        job_id, lat = proto.started(job.payload)
        await asyncio.sleep(proto.WORK_S)
        proto.report_done(job_id, lat)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    worker = AsyncWorker(store, queue, handle, concurrency=proto.WORKERS, grace_s=2.0)
    running = asyncio.create_task(worker.run(stop=stop))
    producing = asyncio.create_task(proto.produce(queue.enqueue_many))
    proto.emit(
        {
            "k": "ready",
            "system": "alkstore",
            "version": alkstore.__version__,
            "schema": "alkstore",
            "pid": os.getpid(),
        }
    )
    stopping = asyncio.create_task(stop.wait())
    await asyncio.wait({stopping, running}, return_when=asyncio.FIRST_COMPLETED)
    producing.cancel()
    if running.done():  # the worker gave up: exit as a crashed process would
        proto.log(f"worker ended: {running.exception()!r}")
        os._exit(3)
    await running
    await store.close()


if __name__ == "__main__":
    asyncio.run(main())
