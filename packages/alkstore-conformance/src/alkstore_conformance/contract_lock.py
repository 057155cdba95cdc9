"""Locks (L-1..L-4).

Expiry tests use TTLs of 0.2-0.3 s and then wait with :func:`eventually`, so
a slow machine makes them slower, never wrong. Name validation of
``store.lock`` is covered with every other name in ``contract_basics``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from itertools import pairwise
from typing import Any

import pytest

from alkstore import Capability, InvalidArgument, Lock, Store

from ._base import ContractBase, eventually, requires, run_threads, unique
from ._factory import StoreFactory

#: A TTL that runs out during the test.
SHORT_TTL_S = 0.25
#: A TTL that does not run out during the test.
LONG_TTL_S = 60.0


class _Boom(Exception):
    """Raised inside ``with lock:`` to show that the lock is released anyway."""


def _aware_utc(when: datetime) -> bool:
    return when.tzinfo is not None and when.utcoffset() == timedelta(0)


def _granted(lock: Lock | None) -> Lock:
    """A lock the test needs granted: fail unless it was."""
    assert lock is not None, "the lock was not granted"
    return lock


def _take_over(store: Store, name: str, owner: str, ttl_s: float = LONG_TTL_S) -> Lock:
    """Acquire *name* as *owner* as soon as the current holder's TTL ran out."""
    lock: Lock | None = eventually(lambda: store.lock(name, ttl_s, owner=owner))
    assert lock is not None and lock.owner == owner
    return lock


def _race_for(name: str, stores: list[Store], threads_n: int) -> list[Lock]:
    """Let *threads_n* threads, spread over *stores*, ask for *name* at once as
    different owners; return the locks they got."""
    winners: list[Lock] = []

    def racer(n: int) -> Callable[[], None]:
        def race() -> None:
            got = stores[n % len(stores)].lock(name, LONG_TTL_S, owner=f"owner-{n}")
            if got is not None:
                winners.append(got)

        return race

    run_threads([racer(n) for n in range(threads_n)], timeout_s=60)
    return winners


@requires(Capability.LOCKS)
class LockContract(ContractBase):
    """Locks (L-1..L-4)."""

    # ------------------------------------------------------------------- L-1

    @pytest.mark.clause("L-1", "C-5", "C-7", "C-4")
    def test_lock_held_by_one_owner_is_refused_to_another(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        name = unique("l")
        before = datetime.now(timezone.utc)
        lock = _granted(store.lock(name, LONG_TTL_S, owner="alice"))
        assert (lock.name, lock.owner) == (name, "alice")
        assert isinstance(lock.token, int)
        assert _aware_utc(lock.expires_at)
        # Engine clocks may be another host's (C-4): a loose window.
        assert abs(lock.expires_at - (before + timedelta(seconds=LONG_TTL_S))) < timedelta(
            seconds=30
        )
        assert store.lock(name, LONG_TTL_S, owner="bob") is None
        with store_factory.open() as other:
            assert other.lock(name, LONG_TTL_S, owner="bob") is None
            assert other.lock(name, 0.01, owner="carol") is None
            # Other names are other locks, including a name extending this one.
            for free in (unique("l"), name + "x"):
                elsewhere = other.lock(free, LONG_TTL_S, owner="bob")
                assert elsewhere is not None and elsewhere.name == free
        assert lock.renew() is True

    @pytest.mark.clause("L-1", "ST-4")
    def test_lock_raced_by_threads_has_exactly_one_winner(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        with store_factory.open() as other:
            for _ in range(4):
                name = unique("l")
                winners = _race_for(name, [store, other], threads_n=6)
                assert len(winners) == 1, [w.owner for w in winners]
                assert store.lock(name, LONG_TTL_S, owner="late") is None

    # ------------------------------------------------------------------- L-2

    @pytest.mark.clause("L-2")
    def test_lock_reacquired_by_its_holder_keeps_token_and_resets_ttl(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        name = unique("l")
        # The second store opens first: on a loaded machine the opening alone
        # may outlast the short TTL.
        with store_factory.open() as other:
            first = _granted(store.lock(name, SHORT_TTL_S, owner="alice"))
            # The owner, not the store, holds the lock.
            again = _granted(other.lock(name, LONG_TTL_S, owner="alice"))
            assert again.token == first.token
            assert again.owner == "alice"
            assert again.expires_at > first.expires_at
            # The TTL was reset to the longer one: still held after the first ran out.
            time.sleep(SHORT_TTL_S + 0.15)
            assert store.lock(name, LONG_TTL_S, owner="bob") is None
            assert other.lock(name, LONG_TTL_S, owner="alice") is not None

    # ------------------------------------------------------------------- L-3

    @pytest.mark.clause("L-3", "L-1", "C-5")
    def test_lock_after_its_ttl_is_taken_by_another_owner(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        name = unique("l")
        old = _granted(store.lock(name, SHORT_TTL_S, owner="alice"))
        with store_factory.open() as other:
            new = _take_over(other, name, "bob")
            # The old holder learns only now, and cannot disturb the new one.
            assert old.renew() is False
            assert old.renew(LONG_TTL_S) is False
            assert old.release() is False
            assert store.lock(name, LONG_TTL_S, owner="carol") is None
            assert other.lock(name, LONG_TTL_S, owner="carol") is None
            assert new.renew() is True
            assert new.release() is True
            assert new.release() is False

    @pytest.mark.clause("L-3")
    def test_renew_or_release_after_expiry_is_refused(self, store: Store) -> None:
        """A lapsed lock is no longer held, even before anyone else takes it."""
        renewed = store.lock(unique("l"), SHORT_TTL_S, owner="alice")
        released = store.lock(unique("l"), SHORT_TTL_S, owner="alice")
        assert renewed is not None and released is not None
        time.sleep(SHORT_TTL_S + 0.15)
        assert renewed.renew() is False
        assert released.release() is False
        # Refusing changed nothing: the names are free.
        assert store.lock(renewed.name, SHORT_TTL_S, owner="bob") is not None
        assert store.lock(released.name, SHORT_TTL_S, owner="bob") is not None

    @pytest.mark.clause("L-3")
    def test_renew_keeps_the_lock_past_its_first_ttl(self, store: Store) -> None:
        name = unique("l")
        lock = _granted(store.lock(name, SHORT_TTL_S, owner="alice"))
        first_expiry = lock.expires_at
        assert lock.renew(LONG_TTL_S) is True
        assert lock.expires_at > first_expiry
        time.sleep(SHORT_TTL_S + 0.15)
        assert store.lock(name, LONG_TTL_S, owner="bob") is None
        assert lock.renew() is True

    @pytest.mark.clause("L-3", "C-4")
    def test_renew_sets_expiry_to_now_plus_ttl(self, store: Store) -> None:
        lock = _granted(store.lock(unique("l"), 10, owner="alice"))
        before = lock.expires_at
        # Without an argument, renew extends by a TTL again from now.
        time.sleep(0.05)
        assert lock.renew() is True
        assert lock.expires_at > before
        before = lock.expires_at
        assert lock.renew(100) is True
        assert _aware_utc(lock.expires_at)
        # Both stamps come from the engine's clock: compare them to each other.
        moved = (lock.expires_at - before).total_seconds()
        assert 90 - 5 <= moved <= 90 + 5, moved
        assert lock.renew(0.5) is True
        assert lock.expires_at < before

    @pytest.mark.clause("L-3", "L-1")
    def test_release_frees_the_lock_for_another_owner_at_once(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        name = unique("l")
        lock = _granted(store.lock(name, LONG_TTL_S, owner="alice"))
        assert lock.release() is True
        assert lock.release() is False
        assert lock.renew() is False
        with store_factory.open() as other:
            _granted(other.lock(name, LONG_TTL_S, owner="bob"))
            assert store.lock(name, LONG_TTL_S, owner="alice") is None

    # ------------------------------------------------------------------- L-4

    @pytest.mark.clause("L-4", "L-3")
    def test_token_increases_with_every_fresh_acquisition(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        name = unique("l")
        tokens: list[int] = []
        with store_factory.open() as other:
            a = _granted(store.lock(name, LONG_TTL_S, owner="alice"))
            tokens.append(a.token)
            # Release, then another owner on another store.
            assert a.release()
            b = _granted(other.lock(name, SHORT_TTL_S, owner="bob"))
            tokens.append(b.token)
            # Expiry, then a takeover.
            c = _take_over(store, name, "carol", SHORT_TTL_S)
            tokens.append(c.token)
            # The same owner again after its own lock expired: a fresh acquisition.
            # (Asking earlier would re-acquire the live lock with its token, L-2.)
            time.sleep(SHORT_TTL_S + 0.15)
            c2 = _granted(other.lock(name, LONG_TTL_S, owner="carol"))
            tokens.append(c2.token)
            # The same owner again after a release.
            assert c2.release()
            c3 = _granted(store.lock(name, LONG_TTL_S, owner="carol"))
            tokens.append(c3.token)
            # Re-acquiring while holding is not fresh (L-2).
            c4 = _granted(other.lock(name, LONG_TTL_S, owner="carol"))
            assert c4.token == c3.token
        assert all(a < b for a, b in pairwise(tokens)), tokens

    @pytest.mark.clause("L-4", "L-1", "ST-4")
    def test_token_increases_in_acquisition_order_under_contention(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        """Threads on two stores take turns on one lock. Each winner records
        its token while it holds the lock, so the record is in acquisition
        order and shows that no two holders overlapped."""
        name = unique("l")
        threads_n, wins_each = 4, 5
        order: list[int] = []
        holding = [0]
        overlaps: list[int] = []
        guard = threading.Lock()
        with store_factory.open() as other:
            stores = [store, other]

            def contender(n: int) -> Callable[[], None]:
                def contend() -> None:
                    wins = 0
                    deadline = time.monotonic() + 60
                    while wins < wins_each and time.monotonic() < deadline:
                        lock = stores[n % 2].lock(name, LONG_TTL_S, owner=f"owner-{n}")
                        if lock is None:
                            time.sleep(0.001)
                            continue
                        with guard:
                            holding[0] += 1
                            if holding[0] > 1:
                                overlaps.append(lock.token)
                            order.append(lock.token)
                        time.sleep(0.001)
                        with guard:
                            holding[0] -= 1
                        assert lock.release() is True
                        wins += 1

                return contend

            run_threads([contender(n) for n in range(threads_n)], timeout_s=90)
        assert overlaps == []
        assert len(order) == threads_n * wins_each
        assert all(a < b for a, b in pairwise(order)), order

    # --------------------------------------------------------- handle, input

    @pytest.mark.clause("L-1")
    def test_lock_as_context_manager_releases_on_exit(self, store: Store) -> None:
        name = unique("l")
        lock = _granted(store.lock(name, LONG_TTL_S, owner="alice"))
        with lock as held:
            assert held.token == lock.token
            assert store.lock(name, LONG_TTL_S, owner="bob") is None
        bob = _granted(store.lock(name, LONG_TTL_S, owner="bob"))
        with pytest.raises(_Boom), bob:
            raise _Boom
        assert bob.renew() is False
        assert store.lock(name, LONG_TTL_S, owner="carol") is not None

    @pytest.mark.clause("L-1")
    def test_lock_without_owner_gets_a_unique_generated_owner(self, store: Store) -> None:
        name = unique("l")
        first = _granted(store.lock(name, LONG_TTL_S))
        assert isinstance(first.owner, str) and first.owner
        # Another call without an owner is another owner.
        assert store.lock(name, LONG_TTL_S) is None
        second = _granted(store.lock(unique("l"), LONG_TTL_S, owner=None))
        assert second.owner != first.owner
        # The generated owner is a real owner: naming it re-acquires (L-2).
        again = store.lock(name, LONG_TTL_S, owner=first.owner)
        assert again is not None and again.token == first.token

    @pytest.mark.clause("C-4", "C-6")
    def test_lock_with_bad_ttl_is_refused(self, store: Store) -> None:
        name = unique("l")
        bad_ttls: list[Any] = [0, -1, -0.5, float("nan"), float("inf"), "1", None, True]
        for bad in bad_ttls:
            with pytest.raises(InvalidArgument):
                store.lock(name, bad)
        # Nothing was taken by the refused calls.
        lock = _granted(store.lock(name, LONG_TTL_S, owner="alice"))
        for bad in [*bad_ttls[:3], float("nan"), "1", True]:
            with pytest.raises(InvalidArgument):
                lock.renew(bad)
        assert lock.renew() is True
