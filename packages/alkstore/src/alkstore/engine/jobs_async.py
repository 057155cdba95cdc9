# Async source of jobs.py (scripts/async_to_sync.py makes it: edit this file).
# mypy: warn-unreachable=False
"""Job handles: one claim each, identified by (id, claim number) (Q-4).

Both faces share their data and argument checks (:class:`.jobs_base.JobData`);
only the I/O differs. The engine re-checks the row on every operation (Q-7):
the handle's own state is a hint for ``should_stop`` (W-12), never a reason to
skip the database.
"""

from __future__ import annotations

from typing import Any

from alkstore._acompat import aoffload
from alkstore._sizes import surely_small
from alkstore.protocols import Capability

from .capabilities import require
from .codec import decode_or_none
from .jobs_base import JobData
from .native import resolve_async
from .prepare import check_error, check_progress
from .results import ack_results
from .rows import ClaimRow
from .seam_async import AsyncExecutor

__all__ = ["AsyncKitJob"]


class AsyncKitJob(JobData):
    """A claimed job (the :class:`~alkstore.protocols.AsyncJob` protocol)."""

    __slots__ = ("_ex",)

    def __init__(
        self, ex: AsyncExecutor[Any], row: ClaimRow, payload: Any, worker_id: str, store_id: str
    ) -> None:
        super().__init__(row, payload, worker_id, store_id)
        self._ex = ex

    async def ack(self, tx: object | None = None, *, result: Any = None) -> bool:
        """Delete the row while this claim is valid (Q-7, Q-9); a job stamped
        with ``result_ttl_s`` keeps *result* in the same transaction (RS-1)."""
        if result is None and self.result_ttl_s is None:  # the plain ack: nothing kept
            return self._landed(
                (await self._ex.ack(await resolve_async(tx, self._ex), (self._fence,)))[0]
            )
        given = None if result is None else (result,)
        if True:  # ASYNC
            if result is None or surely_small(result):
                results = ack_results((self,), given)
            else:  # a result that may be big is encoded in a thread
                results = await aoffload(ack_results, (self,), given)
        else:
            results = ack_results((self,), given)
        if results is None:
            return self._landed(
                (await self._ex.ack(await resolve_async(tx, self._ex), (self._fence,)))[0]
            )
        require(self._ex.capabilities, Capability.RESULTS)
        landed = await self._ex.ack(await resolve_async(tx, self._ex), (self._fence,), results)
        return self._landed(landed[0])

    async def parent_results(self, tx: object | None = None) -> dict[int, Any]:
        """The kept results (RS-1) of the jobs this one was enqueued after,
        by id (WF-4); a parent without a kept result is absent."""
        require(self._ex.capabilities, Capability.WORKFLOWS)
        got = await self._ex.parent_results(await resolve_async(tx, self._ex), self.id)
        return {i: decode_or_none(text) for i, text in sorted(got.items())}

    async def retry(
        self, error: str, delay_s: float | None = None, tx: object | None = None
    ) -> bool:
        """Back to pending after *delay_s* or the curve; dead at budget (Q-10)."""
        text, delay = self._retry_args(error, delay_s)
        return self._landed(
            await self._ex.retry(await resolve_async(tx, self._ex), self._fence, delay, text)
        )

    async def fail(self, error: str, tx: object | None = None) -> bool:
        """Dead-letter now (Q-11)."""
        return self._landed(
            await self._ex.fail(await resolve_async(tx, self._ex), self._fence, check_error(error))
        )

    async def release(self) -> bool:
        """Give the claim back unstarted, the attempt not counted (Q-26)."""
        return self._landed(await self._ex.release(self._fence))

    async def heartbeat(self, extend_s: float | None = None) -> bool:
        """Deadline = now + *extend_s* (default: the row's visibility
        timeout); refused once lapsed (Q-8)."""
        deadline = await self._ex.heartbeat(
            self._fence, self._extend_arg(extend_s, self.visibility_timeout_s)
        )
        if deadline is None:
            self._lost = True
            return False
        self.deadline = deadline
        return True

    async def progress(self, value: Any, tx: object | None = None) -> bool:
        """Store *value* (C-3, at most 64 KiB encoded; ``None`` clears it) as
        the job's checkpoint while this claim is valid, fenced like a
        heartbeat; the deadline does not move. Kept across retries, reclaims,
        death and redrive: a later attempt reads it as ``checkpoint`` (Q-28).
        With *tx*, it lands with the caller's transaction (T-1)."""
        require(self._ex.capabilities, Capability.PROGRESS)
        if True:  # ASYNC
            if value is None or surely_small(value):
                text = check_progress(value)
            else:  # a value that may be big is encoded in a thread
                text = await aoffload(check_progress, value)
        else:
            text = check_progress(value)
        ok = await self._ex.progress(await resolve_async(tx, self._ex), self._fence, text)
        return self._progressed(ok, text)
