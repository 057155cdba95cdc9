"""What both faces of the transactional outbox share (Q-20): its reserved
queue and the handler that hands a payload to ``deliver``."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from alkstore.errors import InvalidArgument
from alkstore.names import OUTBOX_PREFIX, validate_name
from alkstore.types import QueueOpts

__all__ = ["OUTBOX_OPTS", "OUTBOX_PREFIX", "check_deliver", "handler_for", "outbox_queue_name"]

#: The fixed opts of every outbox's backing queue (Q-20).
OUTBOX_OPTS = QueueOpts(visibility_timeout_s=60.0, max_attempts=5, backoff_base_s=5.0)


def outbox_queue_name(name: str) -> str:
    """The reserved queue that backs outbox *name* (Q-20)."""
    return OUTBOX_PREFIX + validate_name(name, "outbox")


def check_deliver(deliver: object) -> None:
    # W-8: refused before anything is claimed.
    if not callable(deliver):
        raise InvalidArgument(f"deliver must be callable, not {type(deliver).__name__}")


def handler_for(deliver: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """A job handler that hands the payload to *deliver*, and is a coroutine
    function exactly when *deliver* is one (so the worker awaits it, W-8)."""
    if inspect.iscoroutinefunction(deliver):

        async def deliver_async(job: Any) -> object:
            return await deliver(job.payload)

        return deliver_async
    return lambda job: deliver(job.payload)
