"""Streams (S-1..S-4).

The suite reads S-1 and S-4 together as *dense* offsets: the committed events
of a stream carry exactly 1, 2, 3, ... — a rolled-back publish leaves no hole
(its offset is "never used", S-2), and a trim never lets an offset be handed
out again. A reader that follows ``read(after)`` with ``after`` = the last
offset it saw therefore always receives ``after + 1`` next.
"""

from __future__ import annotations

import queue as queue_mod
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from alkstore import Capability, Event, InvalidArgument, Store

from . import _children_misc
from ._base import (
    ContractBase,
    reap,
    requires,
    run_threads,
    signals,
    spawn,
    start_together,
    unique,
)
from ._factory import StoreFactory
from .contract_transaction import roll_back

#: Upper bound for a blocking call that should return "at once" or "soon".
#: Well below the 20 s the calls are given, and above the PostgreSQL engine's
#: 5 s fallback poll, so passing shows a real wake, not a poll.
SOON_S = 4.0


class _Rollback(Exception):
    """Raised inside a transaction to roll it back."""


def _offsets(events: list[Event]) -> list[int]:
    return [e.offset for e in events]


class _Follower:
    """A reader that follows a stream as a consumer would: ``read(after)``
    with ``after`` = the last offset seen, asserting every batch continues
    exactly where the previous one ended (S-2)."""

    def __init__(self, store: Store, stream: str) -> None:
        self.stream = store.stream(stream)
        self.after = 0
        self.seen: list[Event] = []
        self._limits = [1, 3, 100, 7]
        self._turn = 0

    def poll(self) -> int:
        limit = self._limits[self._turn % len(self._limits)]
        self._turn += 1
        if limit == 100:
            # Let a few events pile up, so that batches hold several of them.
            time.sleep(0.003)
        batch = self.stream.read(self.after, limit=limit)
        assert len(batch) <= limit
        expected = list(range(self.after + 1, self.after + 1 + len(batch)))
        assert _offsets(batch) == expected, (
            f"read(after={self.after}) returned offsets {_offsets(batch)}: "
            "a gap, a repeat or a later offset visible before an earlier one"
        )
        self.seen.extend(batch)
        if batch:
            self.after = batch[-1].offset
        return len(batch)

    def drain(self) -> None:
        while self.poll():
            pass


def _check_followed(follower: _Follower, committed: list[tuple[int, Any]]) -> None:
    """Every committed event was read exactly once, in order, offsets 1..N,
    with its own payload; no rolled-back payload was ever seen."""
    n = len(committed)
    assert sorted(off for off, _ in committed) == list(range(1, n + 1)), (
        "committed offsets are not 1..N: an offset was skipped or handed out twice"
    )
    assert _offsets(follower.seen) == list(range(1, n + 1))
    by_offset = dict(committed)
    for event in follower.seen:
        assert event.payload == by_offset[event.offset]
        assert "ghost" not in event.payload


@requires(Capability.STREAMS)
class StreamContract(ContractBase):
    """Streams (S-1..S-4)."""

    # ------------------------------------------------------------------- S-1

    @pytest.mark.clause("S-1")
    def test_publish_on_fresh_stream_numbers_offsets_from_one(self, store: Store) -> None:
        s = store.stream(unique("s"))
        assert s.name.startswith("s-")
        assert s.read() == []
        offsets = [s.publish({"n": n}) for n in range(5)]
        assert offsets == [1, 2, 3, 4, 5]
        events = s.read()
        assert _offsets(events) == [1, 2, 3, 4, 5]
        assert [e.payload for e in events] == [{"n": n} for n in range(5)]

    @pytest.mark.clause("S-1", "C-7")
    def test_publish_on_two_streams_numbers_each_independently(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        a_name, b_name = unique("s"), unique("s")
        a, b = store.stream(a_name), store.stream(b_name)
        with store_factory.open() as other:
            b_other = other.stream(b_name)
            got_a: list[int] = []
            got_b: list[int] = []
            for n in range(4):
                got_a.append(a.publish(f"a{n}"))
                got_b.append((b if n % 2 else b_other).publish(f"b{n}"))
            assert got_a == [1, 2, 3, 4]
            assert got_b == [1, 2, 3, 4]
            assert [e.payload for e in other.stream(a_name).read()] == ["a0", "a1", "a2", "a3"]
            assert [e.payload for e in b.read()] == ["b0", "b1", "b2", "b3"]
            # A stream whose name extends another's is a different stream.
            assert other.stream(a_name + "x").read() == []
            assert store.stream(a_name + "x").publish("x") == 1

    @pytest.mark.clause("S-1")
    def test_publish_from_two_stores_continues_one_sequence(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        name = unique("s")
        with store_factory.open() as other:
            streams = [store.stream(name), other.stream(name)]
            offsets = [streams[n % 2].publish(n) for n in range(10)]
        assert offsets == list(range(1, 11))
        assert [e.payload for e in store.stream(name).read()] == list(range(10))

    # ------------------------------------------------------------------- S-2

    @pytest.mark.clause("S-2", "S-4", "ST-4")
    def test_read_while_threads_publish_sees_every_offset_once_in_order(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        """Four threads on two stores publish a mix of plain events, events in
        transactions held open and committed, and events in transactions held
        open and rolled back; a reader on a third store follows the stream
        the whole time and must never see a gap."""
        name = unique("s")
        threads_n, per_thread = 4, 32
        committed: list[tuple[int, Any]] = []
        errors: list[BaseException] = []
        guard = threading.Lock()
        with store_factory.open() as second, store_factory.open() as reader_store:
            publishers = [store, second]

            def publish(t: int) -> None:
                try:
                    got = _children_misc.publish_mixed(publishers[t % 2], name, f"t{t}", per_thread)
                    with guard:
                        committed.extend(got)
                except BaseException as exc:
                    errors.append(exc)

            threads = [threading.Thread(target=publish, args=(t,)) for t in range(threads_n)]
            follower = _Follower(reader_store, name)
            for t in threads:
                t.start()
            try:
                deadline = time.monotonic() + 120
                while any(t.is_alive() for t in threads) and time.monotonic() < deadline:
                    follower.poll()
            finally:
                for t in threads:
                    t.join(60)
            assert errors == []
            follower.drain()
        assert len(committed) == threads_n * per_thread * 3 // 4
        _check_followed(follower, committed)

    @pytest.mark.clause("S-2", "S-4")
    @pytest.mark.cross_process
    def test_read_while_processes_publish_sees_every_offset_once_in_order(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        """Three processes publish the same mix as the threaded test while this
        process follows the stream."""
        name = unique("s")
        procs_n, per_proc = 3, 24
        go, results = signals()
        procs = [
            spawn(
                _children_misc.publish_stream_events,
                store_factory,
                name,
                f"p{n}",
                per_proc,
                go,
                results,
            )
            for n in range(procs_n)
        ]
        try:
            follower = _Follower(store, name)
            start_together(procs, go, results, 60)
            committed: list[tuple[int, Any]] = []
            done = 0
            deadline = time.monotonic() + 120
            while done < procs_n:
                assert time.monotonic() < deadline, "publishers did not finish"
                try:
                    msg = results.get_nowait()
                except queue_mod.Empty:
                    follower.poll()
                    continue
                assert msg[0] == "ok", msg
                committed.extend((off, payload) for off, payload in msg[2])
                done += 1
            follower.drain()
        finally:
            reap(procs, go)
        assert len(committed) == procs_n * per_proc * 3 // 4
        _check_followed(follower, committed)

    @pytest.mark.clause("S-2")
    @pytest.mark.cross_process
    def test_read_in_another_process_sees_every_published_event(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        """A child follows the stream with ``wait`` and ``read`` while this
        process publishes, some events in transactions."""
        name = unique("s")
        n = 30
        ready, results = signals()
        proc = spawn(_children_misc.read_stream_events, store_factory, name, n, ready, results)
        try:
            assert ready.wait(60), "the reader process did not start"
            s = store.stream(name)
            for i in range(n):
                if i % 3 == 0:
                    with store.transaction() as tx:
                        s.publish({"i": i}, key=f"k{i}", tx=tx)
                else:
                    s.publish({"i": i}, key=f"k{i}")
                if i % 10 == 0:
                    time.sleep(0.02)
            msg = results.get(timeout=90)
        finally:
            reap([proc])
        assert msg[0] == "ok", msg
        assert msg[1] == [(i + 1, f"k{i}", {"i": i}) for i in range(n)]

    # ------------------------------------------------------------------- S-3

    @pytest.mark.clause("S-3", "C-5")
    def test_commit_lower_or_equal_offset_is_refused_and_changes_nothing(
        self, store: Store
    ) -> None:
        s = store.stream(unique("s"))
        for n in range(10):
            s.publish(n)
        assert s.offset("c") == 0
        assert s.commit("c", 0) is False
        assert s.offset("c") == 0
        assert s.commit("c", 5) is True
        assert s.offset("c") == 5
        assert s.commit("c", 5) is False
        assert s.commit("c", 3) is False
        assert s.offset("c") == 5
        assert s.commit("c", 6) is True
        assert s.commit("c", 9) is True
        assert s.offset("c") == 9

    @pytest.mark.clause("S-3", "C-7")
    def test_commit_per_consumer_and_per_stream_is_independent(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        a_name, b_name = unique("s"), unique("s")
        a, b = store.stream(a_name), store.stream(b_name)
        for n in range(5):
            a.publish(n)
            b.publish(n)
        assert a.offset("never-committed") == 0
        assert a.commit("c1", 4)
        assert a.commit("c2", 2)
        assert b.commit("c1", 1)
        assert (a.offset("c1"), a.offset("c2"), b.offset("c1"), b.offset("c2")) == (4, 2, 1, 0)
        # A consumer whose name extends another's is a different consumer.
        assert a.offset("c1x") == 0
        # Offsets are stored, not kept in the handle: another store sees them
        # and is refused the same way.
        with store_factory.open() as other:
            a2 = other.stream(a_name)
            assert a2.offset("c1") == 4
            assert a2.commit("c1", 4) is False
            assert a2.commit("c1", 5) is True
        assert a.offset("c1") == 5
        assert a.commit("c1", 2) is False
        assert a.offset("c1") == 5

    @pytest.mark.clause("S-3", "ST-4")
    def test_commit_raced_by_threads_keeps_the_highest_offset(self, store: Store) -> None:
        s = store.stream(unique("s"))
        s.publish(0)
        moved: list[int] = []

        def committer(start: int) -> Callable[[], None]:
            def commit_all() -> None:
                for off in range(start, 41, 4):
                    if s.commit("c", off):
                        moved.append(off)

            return commit_all

        run_threads([committer(n) for n in range(1, 5)], timeout_s=60)
        assert s.offset("c") == 40
        assert 40 in moved

    # ------------------------------------------------------------------- S-4

    @pytest.mark.clause("S-4", "T-1")
    def test_publish_in_rolled_back_transaction_leaves_no_event(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        name = unique("s")
        s = store.stream(name)
        assert s.publish("first") == 1

        def publish_ghosts(tx: object) -> None:
            s.publish("ghost-1", tx=tx)
            s.publish("ghost-2", key="k", tx=tx)

        roll_back(store, publish_ghosts)
        assert [e.payload for e in s.read()] == ["first"]
        # The next committed event takes the next offset a reader can see.
        with store_factory.open() as other:
            assert other.stream(name).publish("second") == 2
        assert [(e.offset, e.payload) for e in s.read(after=1)] == [(2, "second")]
        assert s.publish("third") == 3

    @pytest.mark.clause("S-4", "T-1")
    def test_publish_in_transaction_is_invisible_until_commit(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        name = unique("s")
        s = store.stream(name)
        with store_factory.open() as other:
            watcher = other.stream(name)
            with store.transaction() as tx:
                first = s.publish("a", tx=tx)
                second = s.publish("b", key="k", tx=tx)
                assert watcher.read() == []
            assert (first, second) == (1, 2)
            assert [(e.offset, e.key, e.payload) for e in watcher.read()] == [
                (1, None, "a"),
                (2, "k", "b"),
            ]

    # --------------------------------------------------------- read and trim

    @pytest.mark.clause("S-1", "S-2")
    def test_read_pages_with_after_and_limit(self, store: Store) -> None:
        s = store.stream(unique("s"))
        for n in range(1, 26):
            s.publish(n)
        assert _offsets(s.read()) == list(range(1, 26))
        assert _offsets(s.read(0, 10)) == list(range(1, 11))
        assert _offsets(s.read(10, 10)) == list(range(11, 21))
        assert _offsets(s.read(20, 10)) == list(range(21, 26))
        assert s.read(25, 10) == []
        assert s.read(1000) == []
        assert _offsets(s.read(after=24, limit=1)) == [25]
        assert _offsets(s.read(limit=1)) == [1]
        pages: list[int] = []
        after = 0
        while batch := s.read(after, 4):
            pages.extend(_offsets(batch))
            after = batch[-1].offset
        assert pages == list(range(1, 26))

    @pytest.mark.clause("S-1", "C-3", "C-4")
    def test_read_returns_keys_payloads_and_aware_utc_times(self, store: Store) -> None:
        s = store.stream(unique("s"))
        before = datetime.now(timezone.utc)
        published: list[tuple[Any, str | None]] = [
            ({"order": 1, "items": [1, 2.5, None]}, "order-1"),
            ("ünïcødé ✓ 📬", None),
            (None, "ключ"),
            ([1, [2, {"k": True}]], "x" * 200),
            ((1, 2), None),
            ({1: "int key"}, "k"),
        ]
        for payload, key in published:
            s.publish(payload, key=key)
        events = s.read()
        assert [(e.payload, e.key) for e in events] == [
            ({"order": 1, "items": [1, 2.5, None]}, "order-1"),
            ("ünïcødé ✓ 📬", None),
            (None, "ключ"),
            ([1, [2, {"k": True}]], "x" * 200),
            ([1, 2], None),
            ({"1": "int key"}, "k"),
        ]
        for event in events:
            assert isinstance(event, Event)
            assert event.created_at.tzinfo is not None
            assert event.created_at.utcoffset() == timedelta(0)
            # Engine clocks may be another host's (C-4): a loose window.
            assert abs(event.created_at - before) < timedelta(seconds=30)

    @pytest.mark.clause("S-1")
    def test_trim_deletes_events_before_the_offset_and_counts_them(self, store: Store) -> None:
        s = store.stream(unique("s"))
        for n in range(1, 11):
            s.publish(n)
        assert s.trim(0) == 0
        assert s.trim(1) == 0
        assert s.trim(4) == 3
        assert _offsets(s.read()) == list(range(4, 11))
        assert _offsets(s.read(after=2)) == list(range(4, 11))
        assert s.trim(4) == 0
        assert s.trim(3) == 0
        assert s.trim(6) == 2
        assert _offsets(s.read()) == list(range(6, 11))
        assert s.publish(11) == 11

    @pytest.mark.clause("S-1")
    def test_trim_of_every_event_never_reuses_offsets(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        name = unique("s")
        s = store.stream(name)
        for n in range(5):
            s.publish(n)
        assert s.trim(6) == 5
        assert s.read() == []
        assert s.publish("after-trim") == 6
        assert s.trim(1000) == 1
        assert s.read() == []
        # Not even after reopening: the counter is stored, not derived from rows.
        with store_factory.open() as other:
            assert other.stream(name).publish("reopened") == 7
        assert [(e.offset, e.payload) for e in s.read()] == [(7, "reopened")]

    # ------------------------------------------------------------------ wait

    @pytest.mark.clause("S-2")
    def test_wait_with_event_past_after_returns_true_at_once(self, store: Store) -> None:
        s = store.stream(unique("s"))
        s.publish("x")
        s.publish("y")
        for after in (0, 1):
            started = time.monotonic()
            assert s.wait(after, 20) is True
            assert time.monotonic() - started < SOON_S
        assert s.wait(0, 0) is True

    @pytest.mark.clause("S-2", "C-5")
    def test_wait_without_event_past_after_returns_false_after_timeout(self, store: Store) -> None:
        s = store.stream(unique("s"))
        started = time.monotonic()
        assert s.wait(0, 0.3) is False
        elapsed = time.monotonic() - started
        assert 0.25 <= elapsed < SOON_S
        s.publish("one")
        s.publish("two")
        assert s.wait(2, 0.2) is False
        # An event exists, but none past `after`.
        assert s.wait(5, 0.2) is False
        assert s.wait(2, 0) is False

    @pytest.mark.clause("S-2", "ST-4")
    def test_wait_is_woken_by_publish_from_another_store(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        name = unique("s")
        s = store.stream(name)
        s.publish("old")
        errors: list[BaseException] = []
        with store_factory.open() as other:

            def publish_later() -> None:
                try:
                    time.sleep(0.2)
                    other.stream(name).publish("new")
                except BaseException as exc:
                    errors.append(exc)

            thread = threading.Thread(target=publish_later)
            started = time.monotonic()
            thread.start()
            try:
                assert s.wait(1, 20) is True
                assert time.monotonic() - started < SOON_S
            finally:
                thread.join(30)
        assert errors == []
        assert [e.payload for e in s.read(after=1)] == ["new"]

    @pytest.mark.clause("S-2", "T-3", "S-4")
    def test_wait_is_not_satisfied_by_rolled_back_publish(
        self, store: Store, store_factory: StoreFactory
    ) -> None:
        name = unique("s")
        s = store.stream(name)
        errors: list[BaseException] = []
        with store_factory.open() as other:

            def publish_and_roll_back() -> None:
                try:
                    time.sleep(0.1)
                    with other.transaction() as tx:
                        other.stream(name).publish("ghost", tx=tx)
                        time.sleep(0.1)
                        raise _Rollback
                except _Rollback:
                    pass
                except BaseException as exc:
                    errors.append(exc)

            thread = threading.Thread(target=publish_and_roll_back)
            thread.start()
            try:
                assert s.wait(0, 0.8) is False
            finally:
                thread.join(30)
            assert errors == []
            assert s.read() == []
            other.stream(name).publish("real")
            assert s.wait(0, 20) is True
        assert [(e.offset, e.payload) for e in s.read()] == [(1, "real")]

    @pytest.mark.clause("S-2", "C-7")
    def test_wait_ignores_publishes_on_other_streams(self, store: Store) -> None:
        name = unique("s")
        s = store.stream(name)
        neighbour = store.stream(name + "x")
        neighbour.publish("elsewhere")
        assert s.wait(0, 0.2) is False
        assert s.read() == []

    # ------------------------------------------------------------- bad input

    @pytest.mark.clause("C-1", "C-6")
    def test_bad_arguments_are_refused_and_write_nothing(self, store: Store) -> None:
        s = store.stream(unique("s"))
        s.publish("only")
        bad_after: Any
        for bad_after in (-1, 1.5, "1", None, True):
            with pytest.raises(InvalidArgument):
                s.read(bad_after)
            with pytest.raises(InvalidArgument):
                s.wait(bad_after, 0.01)
        bad_limit: Any
        for bad_limit in (0, -1, 2.5, "10", None, True):
            with pytest.raises(InvalidArgument):
                s.read(0, bad_limit)
        bad_timeout: Any
        for bad_timeout in (-1, float("nan"), "1", None):
            with pytest.raises(InvalidArgument):
                s.wait(0, bad_timeout)
        bad_before: Any
        for bad_before in (-1, 2.5, "3", None, True):
            with pytest.raises(InvalidArgument):
                s.trim(bad_before)
        bad_consumer: Any
        for bad_consumer in ("", "x" * 201, "nul\x00", "line\nbreak", None, 42, b"c"):
            with pytest.raises(InvalidArgument):
                s.commit(bad_consumer, 1)
            with pytest.raises(InvalidArgument):
                s.offset(bad_consumer)
        bad_offset: Any
        for bad_offset in (-1, 1.5, "1", None, True):
            with pytest.raises(InvalidArgument):
                s.commit("c", bad_offset)
        bad_key: Any
        for bad_key in (42, b"k", ["k"]):
            with pytest.raises(InvalidArgument):
                s.publish("x", key=bad_key)
        assert s.offset("c") == 0
        assert [(e.offset, e.payload) for e in s.read()] == [(1, "only")]
        assert s.publish("next") == 2
