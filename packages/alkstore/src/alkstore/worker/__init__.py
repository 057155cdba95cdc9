"""The worker runtimes (SPEC §13, §14): :class:`Worker` on threads,
:class:`AsyncWorker` on the caller's event loop. Both are built only on the
contract's protocols, so they run on every engine."""

from __future__ import annotations

from ._rules import Fail, Retry, error_text
from ._tasks import AsyncHandler, AsyncWorker
from ._threads import Handler, Worker

__all__ = ["AsyncHandler", "AsyncWorker", "Fail", "Handler", "Retry", "Worker", "error_text"]
