"""What both store faces share (SPEC §3, §14): what they say of their
executor and the argument checks that need no I/O. The faces are
:mod:`.store_async` (the source) and :mod:`.store` (generated)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from alkstore.errors import InvalidArgument, StoreClosed
from alkstore.names import encode_payload, validate_name
from alkstore.protocols import Capability
from alkstore.specs import ScheduleSpec
from alkstore.types import EnqueueOpts, check_int

from .faces import FaceMark, check_face
from .jobs_base import handle_of
from .prepare import (
    MAX_CLAIM_BATCH,
    check_schedule_args,
    check_wait,
    check_worker_id,
    encode_enqueue_opts,
)
from .rows import ScheduleRow
from .seam_base import ExecutorBase

__all__ = ["StoreBase", "fences_of", "queue_names", "schedule_parts"]


def queue_names(queues: object, async_face: bool) -> tuple[str, ...]:
    """``claim_any``'s queues: names or handles (of this face, A-7), at least
    one, in order, each once (W-10)."""
    if isinstance(queues, (str, bytes)) or not isinstance(queues, Sequence) or not queues:
        raise InvalidArgument("queues must be a non-empty sequence of queue names or handles")
    names: list[str] = []
    for q in queues:
        if isinstance(q, str):
            # C-2: a name the caller spells may not be reserved; a handle
            # (an outbox's queue) may name the engine's own.
            name = validate_name(q, "queue")
        else:
            handle_name = getattr(q, "name", None)
            if handle_name is None or not hasattr(q, "claim_batch"):
                raise InvalidArgument(f"not a queue name or handle: {type(q).__name__}")
            check_face("a queue of queues", q, "claim_batch", async_face)
            name = validate_name(handle_name, "queue", allow_reserved=True)
        if name not in names:
            names.append(name)
    return tuple(names)


def fences_of(jobs: object, store_id: str, async_face: bool) -> tuple[list[Any], list[int]]:
    """The handles of *jobs* and the positions of those of this store (C-7)."""
    if isinstance(jobs, (str, bytes)) or not isinstance(jobs, Sequence):
        raise InvalidArgument("jobs must be a sequence of claimed jobs")
    handles = [handle_of(j, async_face) for j in jobs]
    mine = [i for i, h in enumerate(handles) if h._store_id == store_id]
    return handles, mine


def schedule_parts(
    name: object, spec: object, queue: object, payload: Any, opts: object, tz: object
) -> tuple[ScheduleSpec, Callable[[datetime], ScheduleRow]]:
    """Checks ``store.schedule``'s arguments (SC-1); returns the parsed spec
    and how to build the row once the engine's clock gives the first fire."""
    sched_name, parsed, queue_name, zone = check_schedule_args(name, spec, queue, tz)
    text = encode_payload(payload)
    if opts is not None and not isinstance(opts, EnqueueOpts):
        raise InvalidArgument(f"opts must be EnqueueOpts, not {type(opts).__name__}")
    opts_text = encode_enqueue_opts(opts)
    spec_text = str(spec)

    def row_at(now: datetime) -> ScheduleRow:
        first = parsed.first_fire(now, zone)
        return ScheduleRow(sched_name, spec_text, queue_name, text, opts_text, zone, first)

    return parsed, row_at


class StoreBase(FaceMark):
    """What the sync and the async store share: what they say of their
    executor, and the argument checks of ``claim_any``."""

    _ex: ExecutorBase[Any]
    _face_method = "claim_any"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._ex.url!r})"

    @property
    def url(self) -> str:
        """The store's URL without a password (E-4)."""
        return self._ex.url

    @property
    def capabilities(self) -> frozenset[Capability]:
        """What the engine supports (CF-1)."""
        return self._ex.capabilities

    @property
    def closed(self) -> bool:
        """Whether ``close()`` ran (ST-3)."""
        return self._ex.closed

    def _check_open(self) -> None:
        if self._ex.closed:
            raise StoreClosed("the store was closed")

    def _claim_any_args(
        self, queues: object, worker_id: object, n: object, wait_s: object
    ) -> tuple[tuple[str, ...], str, int, float]:
        return (
            queue_names(queues, self._async_face),
            check_worker_id(worker_id),
            check_int("n", n, 1, MAX_CLAIM_BATCH),
            check_wait(wait_s),
        )
