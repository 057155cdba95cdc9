"""The suite catches broken engines (CF-3), proven on the engine under test.

Each case wraps the engine's own store in a proxy that breaks one rule the
way the peers in LESSONS.md broke it (an ack that lands after the claim
lapsed, a claim that ignores priority, ...), runs the suite's own test for
that rule against the proxy, and requires the test to fail. A test that
passes a store which breaks its rule proves nothing; this keeps the suite
honest on every engine it runs against.

The in-repo engines are also run through the suite with broken SQL in the
conformance package's own tests (``tests/test_catches_broken_engines.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

from alkstore import Capability, Job, JobInfo, QueueOpts, Store

from ._base import ContractBase
from .contract_queue import QueueContract


class _Proxy:
    """Delegates everything it does not override."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _LyingJob(_Proxy):
    """Every handle operation claims success, lapsed or not (the unfenced
    completion of the Postgres peers)."""

    def ack(self, tx: object | None = None, *, result: Any = None) -> bool:
        self._inner.ack(tx, result=result)
        return True

    def heartbeat(self, extend_s: float | None = None) -> bool:
        self._inner.heartbeat(extend_s)
        return True

    def retry(self, error: str, delay_s: float | None = None, tx: object | None = None) -> bool:
        self._inner.retry(error, delay_s, tx)
        return True

    def fail(self, error: str, tx: object | None = None) -> bool:
        self._inner.fail(error, tx)
        return True


class _BrokenQueue(_Proxy):
    def __init__(self, inner: Any, breakage: str) -> None:
        super().__init__(inner)
        self._breakage = breakage

    def claim(self, worker_id: str, wait_s: float = 0) -> Job | None:
        jobs = self.claim_batch(worker_id, 1, wait_s)
        return jobs[0] if jobs else None

    def claim_batch(self, worker_id: str, n: int, wait_s: float = 0) -> list[Job]:
        if self._breakage == "claim_ignores_priority":
            # Take everything, hand back the oldest enqueues first, give the rest back.
            jobs = self._inner.claim_batch(worker_id, 10_000, wait_s)
            jobs.sort(key=lambda j: j.id)
            for extra in jobs[n:]:
                extra.retry("not wanted", delay_s=0)
            return list(jobs[:n])
        jobs = self._inner.claim_batch(worker_id, n, wait_s)
        if self._breakage == "handles_lie":
            return [_LyingJob(j) for j in jobs]
        return list(jobs)

    def get_job(self, job_id: int) -> JobInfo | None:
        info: JobInfo | None = self._inner.get_job(job_id)
        if self._breakage == "get_job_misses_dead" and info is not None and info.state == "dead":
            return None
        return info

    def cancel(self, job_id: int, tx: object | None = None) -> bool:
        landed: bool = self._inner.cancel(job_id, tx)
        if self._breakage == "cancel_always_true":
            return True
        return landed

    def ack_batch(self, jobs: Sequence[Job]) -> int:
        inner = [j._inner if isinstance(j, _LyingJob) else j for j in jobs]
        count: int = self._inner.ack_batch(inner)
        return len(jobs) if self._breakage == "handles_lie" else count


class _BrokenStore(_Proxy):
    def __init__(self, inner: Store, breakage: str) -> None:
        super().__init__(inner)
        self._breakage = breakage

    def queue(self, name: str, opts: QueueOpts | None = None) -> Any:
        return _BrokenQueue(self._inner.queue(name, opts), self._breakage)


#: breakage -> the suite's test that must catch it.
CASES: dict[str, str] = {
    "handles_lie": "test_handle_ops_after_the_deadline_are_refused_and_change_nothing",
    "claim_ignores_priority": (
        "test_claim_batch_returns_jobs_by_priority_then_run_at_then_enqueue_order"
    ),
    "get_job_misses_dead": "test_get_job_returns_every_field_in_every_state",
    "cancel_always_true": "test_cancel_of_a_dead_missing_or_foreign_job_is_false",
}


class SelfCheckContract(ContractBase):
    """CF-3 on the engine under test."""

    @pytest.mark.clause("CF-3")
    @pytest.mark.requires(Capability.QUEUES)
    @pytest.mark.parametrize("breakage", sorted(CASES))
    def test_suite_fails_a_store_that_breaks_a_rule(self, store: Store, breakage: str) -> None:
        check: Callable[[QueueContract, Store], None] = getattr(QueueContract, CASES[breakage])
        # Sanity first: the same test passes on the engine as it is.
        check(QueueContract(), store)
        broken: Any = _BrokenStore(store, breakage)
        with pytest.raises((AssertionError, pytest.fail.Exception)):
            check(QueueContract(), broken)
