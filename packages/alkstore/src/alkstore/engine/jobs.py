# Generated from jobs_async.py by scripts/async_to_sync.py: edit that file, not this one.
"""Job handles: one claim each, identified by (id, claim number) (Q-4).

Both faces share their data and argument checks (:class:`.jobs_base.JobData`);
only the I/O differs. The engine re-checks the row on every operation (Q-7):
the handle's own state is a hint for ``should_stop`` (W-12), never a reason to
skip the database.
"""

from __future__ import annotations

from typing import Any

from alkstore.protocols import Capability

from .capabilities import require
from .codec import decode_or_none
from .jobs_base import JobData
from .native import resolve_sync
from .prepare import check_error, check_progress
from .results import ack_results
from .rows import ClaimRow
from .seam import Executor

__all__ = ["KitJob"]


class KitJob(JobData):
    """A claimed job (the :class:`~alkstore.protocols.Job` protocol)."""

    __slots__ = ("_ex",)

    def __init__(
        self, ex: Executor[Any], row: ClaimRow, payload: Any, worker_id: str, store_id: str
    ) -> None:
        super().__init__(row, payload, worker_id, store_id)
        self._ex = ex

    def ack(self, tx: object | None = None, *, result: Any = None) -> bool:
        """Delete the row while this claim is valid (Q-7, Q-9); a job stamped
        with ``result_ttl_s`` keeps *result* in the same transaction (RS-1)."""
        if result is None and self.result_ttl_s is None:  # the plain ack: nothing kept
            return self._landed((self._ex.ack(resolve_sync(tx, self._ex), (self._fence,)))[0])
        given = None if result is None else (result,)
        results = ack_results((self,), given)
        if results is None:
            return self._landed((self._ex.ack(resolve_sync(tx, self._ex), (self._fence,)))[0])
        require(self._ex.capabilities, Capability.RESULTS)
        landed = self._ex.ack(resolve_sync(tx, self._ex), (self._fence,), results)
        return self._landed(landed[0])

    def parent_results(self, tx: object | None = None) -> dict[int, Any]:
        """The kept results (RS-1) of the jobs this one was enqueued after,
        by id (WF-4); a parent without a kept result is absent."""
        require(self._ex.capabilities, Capability.WORKFLOWS)
        got = self._ex.parent_results(resolve_sync(tx, self._ex), self.id)
        return {i: decode_or_none(text) for i, text in sorted(got.items())}

    def retry(self, error: str, delay_s: float | None = None, tx: object | None = None) -> bool:
        """Back to pending after *delay_s* or the curve; dead at budget (Q-10)."""
        text, delay = self._retry_args(error, delay_s)
        return self._landed(self._ex.retry(resolve_sync(tx, self._ex), self._fence, delay, text))

    def fail(self, error: str, tx: object | None = None) -> bool:
        """Dead-letter now (Q-11)."""
        return self._landed(
            self._ex.fail(resolve_sync(tx, self._ex), self._fence, check_error(error))
        )

    def release(self) -> bool:
        """Give the claim back unstarted, the attempt not counted (Q-26)."""
        return self._landed(self._ex.release(self._fence))

    def heartbeat(self, extend_s: float | None = None) -> bool:
        """Deadline = now + *extend_s* (default: the row's visibility
        timeout); refused once lapsed (Q-8)."""
        deadline = self._ex.heartbeat(
            self._fence, self._extend_arg(extend_s, self.visibility_timeout_s)
        )
        if deadline is None:
            self._lost = True
            return False
        self.deadline = deadline
        return True

    def progress(self, value: Any, tx: object | None = None) -> bool:
        """Store *value* (C-3, at most 64 KiB encoded; ``None`` clears it) as
        the job's checkpoint while this claim is valid, fenced like a
        heartbeat; the deadline does not move. Kept across retries, reclaims,
        death and redrive: a later attempt reads it as ``checkpoint`` (Q-28).
        With *tx*, it lands with the caller's transaction (T-1)."""
        require(self._ex.capabilities, Capability.PROGRESS)
        text = check_progress(value)
        ok = self._ex.progress(resolve_sync(tx, self._ex), self._fence, text)
        return self._progressed(ok, text)
