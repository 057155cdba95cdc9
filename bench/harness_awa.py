"""awa's adapter for the peer harness (protocol: bench/harness_proto.py).

awa's Python SDK (``awa-pg`` on PyPI: a Rust core in a wheel), as its
docstrings show a worker process: ``AsyncClient(url, max_connections=10)``,
``migrate()``, ``insert_many_copy`` for the producer's batches (its COPY
bulk path), one async task and ``start([(queue, WORKER_COUNT)])``. Its
heartbeat rescue is set to give a killed worker's jobs back after 10 s, as
the other systems here are.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import os
import signal
import sys
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the checkout: bench/

from bench import harness_proto as proto

QUEUE = "harness"


@dataclass
class HarnessJob:
    id: int
    t: float
    pad: str


async def main() -> None:
    awa: Any = importlib.import_module("awa")
    client = awa.AsyncClient(proto.URL, max_connections=10)
    if os.environ.get("BENCH_INSTALL", "1") == "1":
        await client.migrate()

    @client.task(HarnessJob, queue=QUEUE)  # type: ignore[untyped-decorator]
    async def handle(job: Any) -> None:
        job_id, lat = proto.started({"id": job.args.id, "t": job.args.t})
        await asyncio.sleep(proto.WORK_S)
        proto.report_done(job_id, lat)

    async def enqueue_many(batch: list[dict[str, Any]]) -> None:
        await client.insert_many_copy([HarnessJob(**p) for p in batch], queue=QUEUE)

    await client.start(
        [(QUEUE, proto.WORKERS)],
        heartbeat_staleness_ms=10_000,
        heartbeat_rescue_interval_ms=2_000,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    producing = asyncio.create_task(proto.produce(enqueue_many))
    proto.emit(
        {
            "k": "ready",
            "system": "awa",
            "version": version("awa-pg"),
            "schema": "awa",
            "pid": os.getpid(),
        }
    )
    await stop.wait()
    producing.cancel()
    with contextlib.suppress(Exception):
        await client.shutdown(timeout_ms=2000)
    await client.close()


if __name__ == "__main__":
    asyncio.run(main())
