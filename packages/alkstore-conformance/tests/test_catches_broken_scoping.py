"""CF-3 for the scoping and hardening areas: the suite fails engines broken
in ways it was not written against.

The breakages here sit outside the engine: a store wrapper whose queue
handles leak across queues and databases, and the contract package's own
checks switched off. So they work on any engine, and they keep working
when an engine's SQL is rewritten. All variants run in one pytest process
(one class each), and each class must have at least one failing test.
"""

from __future__ import annotations

import re
import textwrap

import pytest

#: variant -> (the mixin, the test of it that must fail).
VARIANTS = {
    # Handles not scoped: ack_batch acks whatever handles it is given.
    "ack_batch_unscoped": (
        "ScopingContract",
        "test_scoped_queue_operations_ignore_another_queues_jobs",
    ),
    # get_job and cancel fall back to every queue of the database.
    "lookups_unscoped": (
        "ScopingContract",
        "test_scoped_queue_operations_ignore_another_queues_jobs",
    ),
    # A sweep sweeps every queue; stats count every queue.
    "sweep_and_stats_unscoped": (
        "ScopingContract",
        "test_sweep_moves_and_purges_only_its_own_queue",
    ),
    # The payload depth check is off: 257 levels are written.
    "payload_depth_unchecked": (
        "HardeningContract",
        "test_deep_cyclic_or_long_int_payloads_are_refused_by_every_write",
    ),
    # Reversed cron ranges are read as wrap-arounds again.
    "reversed_ranges_accepted": (
        "HardeningContract",
        "test_schedule_with_a_reversed_range_is_refused_and_writes_nothing",
    ),
    # A raw TypeError leaves get_job for a non-integer id.
    "raw_type_errors": (
        "HardeningContract",
        "test_queue_calls_with_hostile_arguments_raise_only_alkstore_errors",
    ),
}

SUITE = """
import dataclasses

import pytest

import alkstore.names
import alkstore.specs
from alkstore import JobState
from alkstore_conformance import HardeningContract, ScopingContract, StoreFactory


class BrokenQueue:
    def __init__(self, store, queue, variant):
        self._store, self._queue, self._variant = store, queue, variant

    def __getattr__(self, name):
        return getattr(self._queue, name)

    def _all(self):
        # The unbroken handles of every queue of the database.
        raw = self._store._store
        return [raw.queue(s.queue) for s in raw.queue_stats()]

    def ack_batch(self, jobs):
        if self._variant == "ack_batch_unscoped":
            return sum(1 for job in jobs if job.ack())
        return self._queue.ack_batch(jobs)

    def get_job(self, job_id):
        if self._variant == "raw_type_errors" and not isinstance(job_id, int):
            raise TypeError("job_id")
        found = self._queue.get_job(job_id)
        if found is None and self._variant == "lookups_unscoped":
            for q in self._all():
                found = found or q.get_job(job_id)
        return found

    def cancel(self, job_id, tx=None):
        done = self._queue.cancel(job_id, tx=tx)
        if not done and self._variant == "lookups_unscoped":
            return any(q.cancel(job_id, tx=tx) for q in self._all())
        return done

    def sweep_expired(self):
        if self._variant != "sweep_and_stats_unscoped":
            return self._queue.sweep_expired()
        results = [q.sweep_expired() for q in self._all()] or [self._queue.sweep_expired()]
        return type(results[0])(
            expired=sum(r.expired for r in results),
            purged=sum(r.purged for r in results),
            exhausted=sum(r.exhausted for r in results),
        )

    def stats(self):
        own = self._queue.stats()
        if self._variant != "sweep_and_stats_unscoped":
            return own
        every = [q.stats() for q in self._all()]
        return dataclasses.replace(
            own,
            pending=sum(s.pending for s in every),
            scheduled=sum(s.scheduled for s in every),
            processing=sum(s.processing for s in every),
            dead=sum(s.dead for s in every),
        )


class BrokenStore:
    def __init__(self, store, variant):
        self._store, self._variant = store, variant

    def __getattr__(self, name):
        return getattr(self._store, name)

    def queue(self, name, opts=None):
        return BrokenQueue(self, self._store.queue(name, opts), self._variant)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._store.close()


@dataclasses.dataclass(frozen=True)
class BrokenFactory(StoreFactory):
    variant: str = ""

    def open(self, **overrides):
        return BrokenStore(super().open(**overrides), self.variant)


def _make(variant, area):
    base = {{"ScopingContract": ScopingContract, "HardeningContract": HardeningContract}}[area]

    class Broken(base):
        @pytest.fixture
        def store_factory(self, tmp_path):
            return BrokenFactory(f"sqlite:///{{tmp_path / 'broken.db'}}", variant=variant)

        @pytest.fixture(autouse=True)
        def _broken_checks(self, monkeypatch):
            if variant == "payload_depth_unchecked":
                monkeypatch.setattr(alkstore.names, "MAX_PAYLOAD_DEPTH", 10**6)
            if variant == "reversed_ranges_accepted":
                monkeypatch.setattr(alkstore.specs, "_check_ranges", lambda *a: None)
                alkstore.specs._parse.cache_clear()
            yield
            alkstore.specs._parse.cache_clear()

    Broken.__name__ = Broken.__qualname__ = f"TestBroken_{{variant}}"
    return Broken


{classes}
"""


def test_each_variant_breaks_what_it_claims() -> None:
    import alkstore.names
    import alkstore.specs

    assert hasattr(alkstore.names, "MAX_PAYLOAD_DEPTH")
    assert callable(alkstore.specs._check_ranges)


def test_suite_fails_every_broken_variant(pytester: pytest.Pytester) -> None:
    classes = "\n".join(
        f"TestBroken_{variant} = _make({variant!r}, {area!r})"
        for variant, (area, _) in VARIANTS.items()
    )
    # The control: the same wrapper, nothing broken, must pass the same tests.
    classes += "\nTestBroken_none_scoping = _make('', 'ScopingContract')"
    classes += "\nTestBroken_none_hardening = _make('', 'HardeningContract')"
    pytester.makepyfile(test_broken=textwrap.dedent(SUITE.format(classes=classes)))
    selected = " or ".join(sorted({test for _, test in VARIANTS.values()}))
    result = pytester.runpytest_subprocess(
        "-q", "-rf", "-p", "no:cacheprovider", "-k", selected, timeout=900
    )
    out = result.stdout.str()
    failed = set(re.findall(r"FAILED test_broken\.py::TestBroken_(\w+?)::(test_\w+)", out))
    missed = sorted(v for v, (_, test) in VARIANTS.items() if (v, test) not in failed)
    assert missed == [], f"variants that passed the suite: {missed}\n{out[-3000:]}"
    control = sorted(t for v, t in failed if v.startswith("none_"))
    assert control == [], f"the unbroken control failed: {control}\n{out[-3000:]}"
