"""What the producer group commit of both faces shares (docs/adr/0008): the
bound of a combined statement and how a batch is taken; the leader and
follower loops are :mod:`._combine_async`."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import TypeVar

from alkstore.engine import NewJob

__all__ = ["MAX_ROWS", "Request", "take_batch"]

#: Most jobs one combined statement carries.
MAX_ROWS = 1_000


class Request:
    """One caller's plain enqueue, waiting to be combined."""

    __slots__ = ("jobs", "queue")

    def __init__(self, queue: str, jobs: Sequence[NewJob]) -> None:
        self.queue = queue
        self.jobs = jobs


R = TypeVar("R", bound=Request)


def take_batch(first: R, waiting: deque[R]) -> list[R]:
    """*first* and the requests waiting behind it, in order, as long as the
    batch stays within :data:`MAX_ROWS` jobs (*first* always goes)."""
    batch = [first]
    rows = len(first.jobs)
    while waiting and rows + len(waiting[0].jobs) <= MAX_ROWS:
        nxt = waiting.popleft()
        batch.append(nxt)
        rows += len(nxt.jobs)
    return batch
