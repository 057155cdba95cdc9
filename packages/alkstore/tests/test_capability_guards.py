"""CF-1 in the kit: an operation whose capability the engine does not declare
is refused with ``UnsupportedOperation``, naming the capability, before
anything is written. The SQLite engine declares them all, so each test
takes one away from its executor."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from alkstore import Store
from alkstore.engine.capabilities import require
from alkstore.errors import UnsupportedOperation
from alkstore.protocols import Capability
from alkstore.types import EnqueueOpts


@pytest.fixture
def without(store: Store, monkeypatch: pytest.MonkeyPatch) -> Callable[[Capability], None]:
    """Take *capability* away from this store's executor."""
    ex: Any = store._ex  # type: ignore[attr-defined]

    def take(capability: Capability) -> None:
        assert capability in ex.capabilities
        monkeypatch.setattr(ex, "capabilities", ex.capabilities - {capability})

    return take


def _refused(capability: Capability, call: Callable[[], object]) -> None:
    with pytest.raises(UnsupportedOperation, match=rf"\(capability '{capability.value}'\)"):
        call()


def test_require_names_the_capability_and_passes_a_declared_one() -> None:
    require({Capability.PAUSE}, Capability.PAUSE)
    with pytest.raises(UnsupportedOperation, match=r"cannot pause queues \(capability 'pause'\)"):
        require(frozenset(), Capability.PAUSE)
    # A capability without its own phrase still names itself.
    with pytest.raises(UnsupportedOperation, match=r"\(capability 'groups'\)"):
        require(frozenset(), Capability.GROUPS)


def test_pause_and_run_now_are_refused_and_write_nothing(
    store: Store, without: Callable[[Capability], None]
) -> None:
    q = store.queue("q")
    job_id = q.enqueue({"n": 1}, EnqueueOpts(delay_s=3600))
    without(Capability.PAUSE)
    _refused(Capability.PAUSE, q.pause)
    _refused(Capability.PAUSE, q.resume)
    _refused(Capability.PAUSE, q.is_paused)
    without(Capability.RUN_NOW)
    _refused(Capability.RUN_NOW, lambda: q.run_now(job_id))
    assert q.stats().scheduled == 1  # still waiting for its time


def test_workflows_results_progress_and_workers_are_refused(
    store: Store, without: Callable[[Capability], None]
) -> None:
    q = store.queue("q")
    parent = q.enqueue({"n": 1}, EnqueueOpts(result_ttl_s=60))
    without(Capability.WORKFLOWS)
    _refused(Capability.WORKFLOWS, lambda: q.enqueue({"n": 2}, EnqueueOpts(after=[parent])))
    assert q.stats().pending == 1
    job = q.claim("w")
    assert job is not None
    without(Capability.PROGRESS)
    _refused(Capability.PROGRESS, lambda: job.progress({"done": 1}))
    without(Capability.RESULTS)
    _refused(Capability.RESULTS, lambda: job.ack(result={"ok": True}))
    _refused(Capability.RESULTS, lambda: q.result(job.id))
    without(Capability.WORKERS)
    _refused(Capability.WORKERS, store.workers)
    assert q.stats().processing == 1  # the refused ack left the claim as it was


def test_replace_and_debounce_are_refused(
    store: Store, without: Callable[[Capability], None]
) -> None:
    q = store.queue("q")
    without(Capability.REPLACE_DEBOUNCE)
    _refused(Capability.REPLACE_DEBOUNCE, lambda: q.enqueue_unique("k", 1, on_conflict="replace"))
    _refused(Capability.REPLACE_DEBOUNCE, lambda: q.enqueue_unique("k", 1, debounce_s=5))
    assert q.stats().pending == 0
    # Skip, the default, needs no capability beyond unique keys.
    assert q.enqueue_unique("k", 1).created
