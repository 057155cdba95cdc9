"""pgqueuer's adapter for the peer harness (protocol: bench/harness_proto.py).

Its documented surface: ``Queries.install()``, ``Queries.enqueue`` with
lists for the producer's batches (its own async psycopg connection), and a
``QueueManager`` on another connection with one async entrypoint,
``run(max_concurrent_tasks=WORKER_COUNT)`` and a 10 s heartbeat timeout
(a killed worker's jobs are picked again after it).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import os
import signal
import sys
from datetime import timedelta
from importlib.metadata import version
from pathlib import Path
from typing import Any

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the checkout: bench/

from bench import harness_proto as proto

ENTRYPOINT = "harness"


async def main() -> None:
    pgqueuer: Any = importlib.import_module("pgqueuer")
    kw: dict[str, Any] = {"autocommit": True, "application_name": "harness-pgqueuer"}
    producer_conn = await psycopg.AsyncConnection.connect(proto.URL, **kw)
    queries = pgqueuer.Queries(pgqueuer.PsycopgDriver(producer_conn))
    if os.environ.get("BENCH_INSTALL", "1") == "1":
        try:
            await queries.install()
        except Exception as exc:  # another replica installed it first
            proto.log(f"install: {exc}")
    worker_conn = await psycopg.AsyncConnection.connect(proto.URL, **kw)
    qm = pgqueuer.QueueManager(pgqueuer.Queries(pgqueuer.PsycopgDriver(worker_conn)))

    @qm.entrypoint(ENTRYPOINT)  # type: ignore[untyped-decorator]
    async def harness_job(job: Any) -> None:
        job_id, lat = proto.started(json.loads(job.payload))
        await asyncio.sleep(proto.WORK_S)
        proto.report_done(job_id, lat)

    async def enqueue_many(batch: list[dict[str, Any]]) -> None:
        n = len(batch)
        await queries.enqueue([ENTRYPOINT] * n, [json.dumps(p).encode() for p in batch], [0] * n)

    batch_size = max(1, min(10, proto.WORKERS // 2))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    running = asyncio.create_task(
        qm.run(
            batch_size=batch_size,
            max_concurrent_tasks=max(proto.WORKERS, 2 * batch_size),
            heartbeat_timeout=timedelta(seconds=10),
            dequeue_timeout=timedelta(seconds=1),
        )
    )
    producing = asyncio.create_task(proto.produce(enqueue_many))
    proto.emit(
        {
            "k": "ready",
            "system": "pgqueuer",
            "version": version("pgqueuer"),
            "schema": "public",
            "pid": os.getpid(),
        }
    )
    stopping = asyncio.create_task(stop.wait())
    await asyncio.wait({stopping, running}, return_when=asyncio.FIRST_COMPLETED)
    producing.cancel()
    if running.done():
        proto.log(f"worker ended: {running.exception()!r}")
        os._exit(3)
    qm.shutdown.set()
    with contextlib.suppress(BaseException):
        await asyncio.wait_for(running, 5)
    await worker_conn.close()
    await producer_conn.close()


if __name__ == "__main__":
    asyncio.run(main())
