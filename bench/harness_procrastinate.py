"""procrastinate's adapter for the peer harness (protocol: bench/harness_proto.py).

Its documented async surface: an ``App`` on a ``PsycopgConnector`` (pool of
at most 10 connections, as alkstore's default), ``apply_schema_async``, an
async task, ``batch_defer_async`` for the producer's batches and
``run_worker_async(concurrency=WORKER_COUNT)`` with LISTEN/NOTIFY and
successful jobs deleted. A killed worker's jobs stay ``doing`` until
someone retries them: procrastinate's documented answer is a periodic
``get_stalled_jobs`` + ``retry_job``, run here every 5 s on jobs whose
worker missed its heartbeat for 10 s.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import os
import signal
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the checkout: bench/

from bench import harness_proto as proto

QUEUE = "harness"


async def main() -> None:
    procrastinate: Any = importlib.import_module("procrastinate")
    app = procrastinate.App(
        connector=procrastinate.PsycopgConnector(
            conninfo=proto.URL, max_size=10, kwargs={"application_name": "harness-procrastinate"}
        )
    )

    @app.task(name="harness_job", queue=QUEUE, retry=procrastinate.RetryStrategy(max_attempts=25))  # type: ignore[untyped-decorator]
    async def harness_job(id: int, t: float, pad: str) -> None:
        job_id, lat = proto.started({"id": id, "t": t})
        await asyncio.sleep(proto.WORK_S)
        proto.report_done(job_id, lat)

    await app.open_async()
    if os.environ.get("BENCH_INSTALL", "1") == "1":
        try:
            await app.schema_manager.apply_schema_async()
        except Exception as exc:  # another replica installed it first
            proto.log(f"schema: {exc}")

    async def enqueue_many(batch: list[dict[str, Any]]) -> None:
        await harness_job.batch_defer_async(*batch)

    async def retry_stalled() -> None:
        while True:
            await asyncio.sleep(5)
            try:
                for job in await app.job_manager.get_stalled_jobs(seconds_since_heartbeat=10):
                    await app.job_manager.retry_job(job)
            except Exception as exc:
                proto.emit({"k": "err", "msg": f"retry_stalled: {exc}"[:300]})

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    running = asyncio.create_task(
        app.run_worker_async(
            queues=[QUEUE],
            concurrency=proto.WORKERS,
            listen_notify=True,
            fetch_job_polling_interval=0.5,
            delete_jobs="successful",
            install_signal_handlers=False,
            update_heartbeat_interval=3,
            stalled_worker_timeout=10,
            shutdown_graceful_timeout=2,
        )
    )
    producing = asyncio.create_task(proto.produce(enqueue_many))
    recovering = asyncio.create_task(retry_stalled())
    proto.emit(
        {
            "k": "ready",
            "system": "procrastinate",
            "version": version("procrastinate"),
            "schema": "public",
            "pid": os.getpid(),
        }
    )
    stopping = asyncio.create_task(stop.wait())
    await asyncio.wait({stopping, running}, return_when=asyncio.FIRST_COMPLETED)
    producing.cancel()
    recovering.cancel()
    if running.done():
        proto.log(f"worker ended: {running.exception()!r}")
        os._exit(3)
    running.cancel()
    with contextlib.suppress(BaseException):
        await asyncio.wait_for(running, 5)
    await app.close_async()


if __name__ == "__main__":
    asyncio.run(main())
