"""What both faces of a job handle share: the claim's data, the argument
checks, and the mapping from claimed rows to handles (Q-4, C-3).

The handles themselves are in :mod:`.jobs_async` (the source) and
:mod:`.jobs` (generated from it).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from alkstore.backoff import delay as backoff_delay
from alkstore.errors import InvalidArgument
from alkstore.types import check_duration

from .codec import UNDECODABLE, decode_or_none, let_the_loop_run, try_decode
from .faces import FaceMark, check_face
from .infos import trace_context_of
from .prepare import check_error
from .rows import ClaimRow, Fence

__all__ = ["JobData", "decode_claims", "handle_of"]


class JobData(FaceMark):
    """What a claim handed out, as the handle shows it."""

    _face_method = "ack"

    __slots__ = (
        "_fence",
        "_lost",
        "_settled",
        "_store_id",
        "_trace_text",
        "attempts",
        "backoff_base_s",
        "checkpoint",
        "claimed_at",
        "deadline",
        "group",
        "id",
        "max_attempts",
        "payload",
        "priority",
        "queue",
        "ready_at",
        "result_ttl_s",
        "visibility_timeout_s",
        "worker_id",
    )

    def __init__(self, row: ClaimRow, payload: Any, worker_id: str, store_id: str) -> None:
        self.id = row.id
        self.queue = row.queue
        self.payload = payload
        self.attempts = row.attempts
        self.max_attempts = row.max_attempts
        self.priority = row.priority
        self.deadline = row.deadline
        self.visibility_timeout_s = row.visibility_timeout_s
        self.backoff_base_s = row.backoff_base_s
        self.claimed_at = row.claimed_at
        self.ready_at = row.ready_at
        self.group = row.group
        self.result_ttl_s = row.result_ttl_s  # RS-1: whether the ack keeps a result
        # the last checkpoint stored on the job (by this attempt or an
        # earlier one); None when never set.
        self.checkpoint: Any = None if row.progress is None else decode_or_none(row.progress)
        self._trace_text = row.trace_context
        self.worker_id = worker_id
        self._fence = Fence(row.id, row.claim, row.group)
        self._store_id = store_id
        self._settled = False  # ack, retry, fail or release landed
        self._lost = False  # an operation on this claim was refused

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(id={self.id}, queue={self.queue!r}, "
            f"attempts={self.attempts}/{self.max_attempts})"
        )

    @property
    def trace_context(self) -> dict[str, str] | None:
        """The W3C context stored at the enqueue (O-2), or ``None``."""
        return trace_context_of(self._trace_text)

    @property
    def __alkstore_job__(self) -> JobData:
        """The handle itself: what batch operations (``ack_each``,
        ``ack_batch``) act on; wrappers of a handle forward it."""
        return self

    @property
    def settled(self) -> bool:
        """Whether an ``ack``, ``retry``, ``fail`` or ``release`` of this
        handle returned ``True`` (W-9)."""
        return self._settled

    def should_stop(self) -> bool:
        """True once the claim is known to be lost: an operation on it was
        refused, or its deadline passed (W-12; a worker adds its own stop and
        timeout signals on top)."""
        return self._lost or datetime.now(timezone.utc) >= self.deadline

    def _landed(self, ok: bool) -> bool:
        if ok:
            self._settled = True
        else:
            self._lost = True
        return ok

    def _progressed(self, ok: bool, text: str | None) -> bool:
        """After a progress write (Q-28): the handle shows what landed; a
        refusal means the claim is lost, as for a heartbeat."""
        if ok:
            self.checkpoint = decode_or_none(text)
        else:
            self._lost = True
        return ok

    def _retry_args(self, error: object, delay_s: object) -> tuple[str, float]:
        text = check_error(error)
        delay = check_duration("delay_s", delay_s, allow_none=True)
        if delay is None:
            delay = backoff_delay(max(self.attempts, 1), self.backoff_base_s)
        return text, delay

    @staticmethod
    def _extend_arg(extend_s: object, default: float) -> float:
        extend = check_duration("extend_s", extend_s, allow_zero=False, allow_none=True)
        return default if extend is None else extend


def handle_of(job: object, async_face: bool) -> JobData:
    """The kit handle behind *job*: the handle itself, or what a wrapper (the
    worker's view of a job) holds under ``__alkstore_job__``; a handle of the
    other face is refused (A-7)."""
    inner = getattr(job, "__alkstore_job__", job)
    if not isinstance(inner, JobData):
        raise InvalidArgument(
            f"expected a job claimed from an alkstore store, not {type(job).__name__}"
        )
    if inner._async_face is not async_face:  # one attribute read: hot in ack_batch
        check_face("the job", inner, "ack", async_face)
    return inner


def decode_claims(
    rows: Sequence[ClaimRow], queue_order: Sequence[str]
) -> tuple[list[tuple[ClaimRow, Any]], list[ClaimRow]]:
    """Claimed rows in claim order (the queues' order, then Q-2), with their
    decoded payloads; and the rows whose payload does not decode (C-3: the
    caller dead-letters those)."""
    if len(rows) > 1:
        rank = {name: i for i, name in enumerate(queue_order)}
        rows = sorted(rows, key=lambda r: (rank.get(r.queue, 0), -r.priority, r.ready_at, r.id))
    good: list[tuple[ClaimRow, Any]] = []
    bad: list[ClaimRow] = []
    for row in rows:
        value = try_decode(row.payload)
        let_the_loop_run(row.payload)
        if value is UNDECODABLE:
            bad.append(row)
        else:
            good.append((row, value))
    return good, bad
