"""The adapter side of the peer harness's line protocol (bench/harness.py).

An adapter is one process: a producer and a consumer of one system, started
by the harness with its settings in the environment.

- in (env): ``DATABASE_URL``, ``WORKER_COUNT``, ``JOB_WORK_MS`` (handler
  time, default 1), ``PAYLOAD_BYTES`` (default 256), ``BATCH_MAX`` (rows per
  bulk enqueue call, default 128), ``ID_BASE`` (first job id of this
  launch: ids stay unique across restarts of a replica).
- in (stdin): ``ENQ <n>`` lines, each asking for *n* more jobs (the harness
  paces: fixed rate or depth target); ``STOP`` (or EOF) to stop producing.
- out (stdout, one JSON object a line): ``{"k": "ready", ...}`` once the
  system is installed and its worker runs; ``{"k": "enq", "ids": [...]}``
  after each committed enqueue; ``D <id> <lat>`` (plain text, the one
  frequent line) from the handler, **before it returns** (so before the
  system acks: a job reported done and then lost by a crash only runs
  again, and a job acked is always reported); ``lat`` is the claim latency
  in ms, handler start minus the time the producer stamped into the payload
  just before the enqueue call. ``{"k": "err", "msg": ...}`` for errors the
  adapter survived. Logs go to stderr.

The handler writes its line straight to the pipe (one ``write`` a job):
a SIGKILL loses nothing already written.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

WORKERS = int(os.environ.get("WORKER_COUNT", "4"))
WORK_S = float(os.environ.get("JOB_WORK_MS", "1")) / 1000.0
PAYLOAD_BYTES = int(os.environ.get("PAYLOAD_BYTES", "256"))
BATCH_MAX = int(os.environ.get("BATCH_MAX", "128"))
ID_BASE = int(os.environ.get("ID_BASE", "0"))
URL = os.environ.get("DATABASE_URL", "")
PAD = "x" * max(0, PAYLOAD_BYTES - 48)

_out_lock = threading.Lock()


def emit(record: dict[str, Any]) -> None:
    line = (json.dumps(record, separators=(",", ":")) + "\n").encode()
    with _out_lock:
        os.write(1, line)


def log(message: str) -> None:
    print(f"[{os.environ.get('ADAPTER_NAME', 'adapter')}] {message}", file=sys.stderr, flush=True)


def payload(job_id: int) -> dict[str, Any]:
    return {"id": job_id, "t": time.time(), "pad": PAD}


def started(data: Any) -> tuple[int, float]:
    """The id of a claimed job and its claim latency in ms, from its payload."""
    return int(data["id"]), round((time.time() - float(data["t"])) * 1000.0, 2)


def report_done(job_id: int, lat: float) -> None:
    os.write(1, f"D {job_id} {lat}\n".encode())


class Tokens:
    """``ENQ n`` lines from stdin, read on a thread, counted for the loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.pending = 0
        self.stopped = False
        self.event = asyncio.Event()
        threading.Thread(target=self._read, name="tokens", daemon=True).start()

    def _add(self, n: int) -> None:
        if n < 0:
            self.stopped = True
        else:
            self.pending += n
        self.event.set()

    def _read(self) -> None:
        for line in sys.stdin:
            parts = line.split()
            if parts[:1] == ["ENQ"] and len(parts) == 2:
                self.loop.call_soon_threadsafe(self._add, int(parts[1]))
            elif parts[:1] == ["STOP"]:
                break
        self.loop.call_soon_threadsafe(self._add, -1)

    async def take(self) -> int | None:
        """Up to BATCH_MAX jobs to enqueue now; ``None`` once stopped."""
        while self.pending == 0:
            if self.stopped:
                return None
            self.event.clear()
            await self.event.wait()
        n = min(self.pending, BATCH_MAX)
        self.pending -= n
        return n


async def produce(enqueue_many: Callable[[list[dict[str, Any]]], Awaitable[Any]]) -> None:
    """Enqueue what the harness asks for, through the system's bulk call; a
    failed call (a killed connection) is retried with the same ids."""
    tokens = Tokens(asyncio.get_running_loop())
    next_id = ID_BASE
    while True:
        n = await tokens.take()
        if n is None:
            return
        ids = list(range(next_id, next_id + n))
        next_id += n
        while True:
            batch = [payload(i) for i in ids]
            try:
                await enqueue_many(batch)
            except Exception as exc:  # the system's error; the chaos cells cause these
                emit({"k": "err", "msg": f"enqueue: {type(exc).__name__}: {exc}"[:300]})
                await asyncio.sleep(0.2)
                continue
            emit({"k": "enq", "ids": ids})
            break
